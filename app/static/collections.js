// The key's document collections on the page: list them with their documents, create one,
// upload files to it (multipart), delete a document or a collection; and the start form's
// choice of sources (the server's search, plus any collections, or only them). app.js
// hands over its helpers; everything from the server goes in as text, never as markup.

const $ = (selector) => document.querySelector(selector);
const KIND_WORDS = { pdf: "PDF", docx: "Word", html: "HTML", text: "text" };
const path = (id, tail = "") => `/v1/collections/${encodeURIComponent(id)}${tail}`;

/** The collections panel and the start form's sources, wired to the page; `ctx` holds app.js's helpers. */
export function createCollections(ctx) {
  const { api, el, showText, busy, plural } = ctx;
  let known = []; // the collections last listed, with their documents

  function size(bytes) {
    if (bytes < 1024) return plural(bytes, "byte");
    if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KB`;
    return `${(bytes / 1024 / 1024).toFixed(1)} MB`;
  }

  /** What a document is: its kind, its pages or sections, its size. */
  function documentFacts(d) {
    const parts = d.pages ? plural(d.pages, "page") : plural(d.sections, "section");
    return `${KIND_WORDS[d.kind] || d.kind} · ${parts} · ${size(d.bytes)}`;
  }

  function documentItem(collection, d) {
    const remove = el("button", "small danger", "Delete");
    remove.type = "button";
    remove.setAttribute("aria-label", `Delete ${d.name}`);
    remove.addEventListener("click", () => busy(remove, async () => {
      if (!confirm(`Delete ${d.name} from ${collection.name}?`)) return;
      await change(collection, () => api(path(collection.id, `/documents/${encodeURIComponent(d.id)}`), { method: "DELETE" }));
    }));
    const item = el("li", "document",
      el("span", "", el("span", "document-name", d.name), " ", el("span", "muted", documentFacts(d))), remove);
    item.dataset.documentId = d.id;
    return item;
  }

  function collectionItem(collection) {
    const error = el("p", "error", "");
    error.setAttribute("role", "alert");
    error.hidden = true;
    const remove = el("button", "small danger", "Delete collection");
    remove.type = "button";
    remove.addEventListener("click", () => busy(remove, async () => {
      if (!confirm(`Delete the collection ${collection.name} and its documents?`)) return;
      await change(collection, () => api(path(collection.id), { method: "DELETE" }), error);
    }));
    const files = el("input", "collection-files");
    files.type = "file";
    files.multiple = true;
    files.setAttribute("aria-label", `Files to add to ${collection.name}`);
    const send = el("button", "small", "Upload");
    send.type = "submit";
    const form = el("form", "upload-form", files, send);
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      if (!files.files.length) { showText(error, "Choose one or more files to upload."); return; }
      const body = new FormData();
      for (const file of files.files) body.append("file", file);
      busy(send, () => change(collection, () => api(path(collection.id, "/documents"), { method: "POST", body }), error));
    });
    const docs = collection.documents.map((d) => documentItem(collection, d));
    const item = el("li", "collection",
      el("div", "panel-head", el("h3", "", collection.name), remove),
      docs.length ? el("ul", "documents", ...docs) : el("p", "muted", "No documents yet."),
      form, error);
    item.dataset.collectionId = collection.id;
    item.dataset.name = collection.name;
    return item;
  }

  /**
   * Do one change, then list again. A refused change (an unreadable upload, say) shows the
   * API's message under its collection (or the panel's) and leaves the list as it was.
   */
  async function change(collection, action, errorBox = $("#collections-error")) {
    try {
      await action();
    } catch (err) {
      if (err.status !== 401) showText(errorBox, err.message);
      return;
    }
    await load();
  }

  /** List the key's collections and their documents, and offer them on the start form. */
  async function load() {
    let listed;
    try {
      const page = await api("/v1/collections");
      listed = await Promise.all(page.items.map((c) => api(path(c.id))));
    } catch (err) {
      // A server that keeps no collections (409 invalid_state) has no panel to show.
      const none = err.code === "invalid_state";
      $("#collections-panel").hidden = none;
      $(".source-choice").hidden = none;
      if (err.status !== 401 && !none) showText($("#collections-error"), err.message);
      return;
    }
    $("#collections-panel").hidden = false;
    $(".source-choice").hidden = false;
    known = listed;
    showText($("#collections-error"), "");
    $("#collections").replaceChildren(...known.map(collectionItem));
    $("#collections-empty").hidden = known.length > 0;
    offerSources();
  }

  /** The start form's checkboxes, one per collection; the ticked ones stay ticked. */
  function offerSources() {
    const ticked = new Set(chosen());
    const boxes = known.map((c) => {
      const box = el("input", "collection-choice");
      box.type = "checkbox";
      box.value = c.id;
      box.checked = ticked.has(c.id);
      box.addEventListener("change", updateOnly);
      return el("label", "check", box, ` ${c.name}`);
    });
    $("#source-collections").replaceChildren(...boxes);
    $("#source-collections-none").hidden = known.length > 0;
    updateOnly();
  }

  const chosen = () => [...document.querySelectorAll("#source-collections .collection-choice:checked")].map((b) => b.value);

  /** "Only my collections" means something once a collection is ticked. */
  function updateOnly() {
    const only = $("#collections-only");
    only.disabled = chosen().length === 0;
    if (only.disabled) only.checked = false;
  }

  /** The run's options for its sources: none when only the server's search is wanted. */
  function runOptions() {
    const collections = chosen();
    return collections.length ? { collections, collections_only: $("#collections-only").checked } : {};
  }

  async function create(event) {
    event.preventDefault();
    const name = $("#collection-name").value.trim();
    if (!name) { showText($("#collections-error"), "Enter a name for the new collection."); return; }
    await busy($("#create-collection"), async () => {
      try {
        await api("/v1/collections", { method: "POST", body: { name } });
      } catch (err) {
        if (err.status !== 401) showText($("#collections-error"), err.message);
        return;
      }
      $("#collection-name").value = "";
      await load();
    });
  }

  function init() {
    $("#collection-form").addEventListener("submit", create);
    $("#refresh-collections").addEventListener("click", (e) => busy(e.currentTarget, load));
    load();
  }

  return { init, load, runOptions };
}
