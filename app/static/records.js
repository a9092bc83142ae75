// A run's record on the page: the source behind a report's footnote (the text the run
// read, with the passages its sentences cite marked) and re-runs of a finished thread,
// compared with the original. app.js hands over its helpers (API calls that send the key,
// DOM building); as there, everything from the server goes in as text, never as markup.

const HASH_CHARS = 12;
const TERMINAL = new Set(["completed", "failed", "cancelled"]);
const KIND_LABELS = {
  page: "page (read in full)", snippet: "search snippet", passage: "passage of the local corpus",
};
const $ = (selector) => document.querySelector(selector);
const shortHash = (hash) => String(hash || "").slice(0, HASH_CHARS);

/** Sorted, disjoint [start, end) ranges within `length`: quotes may overlap or repeat. */
export function mergeRanges(ranges, length) {
  const merged = [];
  const sorted = ranges
    .map(([a, b]) => [Math.max(0, a), Math.min(length, b)])
    .filter(([a, b]) => a < b)
    .sort((x, y) => x[0] - y[0] || x[1] - y[1]);
  for (const [a, b] of sorted) {
    const last = merged[merged.length - 1];
    if (last && a <= last[1]) last[1] = Math.max(last[1], b);
    else merged.push([a, b]);
  }
  return merged;
}

/**
 * Footnote labels (`[^n]`, what the API's `sources/{n}` takes) in order of first use: the
 * HTML numbers its notes `#fn1`, `#fn2`… in that order, whatever their labels say.
 */
export function labelsInOrder(markdown) {
  const end = markdown.startsWith("---\n") ? markdown.indexOf("\n---\n", 4) : -1;
  const body = end === -1 ? markdown : markdown.slice(end + 5);
  const defined = new Set([...body.matchAll(/^\[\^(\d+)\]:/gm)].map((m) => m[1]));
  const order = [];
  for (const m of body.matchAll(/\[\^(\d+)\](?!:)/g)) {
    if (defined.has(m[1]) && !order.includes(m[1])) order.push(m[1]);
  }
  return order.map(Number);
}

/** The whole record feature set, wired to the page; `ctx` holds app.js's helpers. */
export function createRecords(ctx) {
  const { api, runPath, el, showText, busy, isCurrent, currentView, openThread } = ctx;
  const dialog = $("#source-dialog");
  let opened = null; // { link, controller } of the footnote whose source is shown
  let labels = { id: null, promise: null };

  /** A link opening apart (no referrer) for http(s) addresses, plain text otherwise. */
  function sourceLink(url, text) {
    let parsed = null;
    try { parsed = new URL(url); } catch { /* not a URL: shown as text */ }
    if (!parsed || (parsed.protocol !== "http:" && parsed.protocol !== "https:")) {
      return el("span", "", text || url);
    }
    const link = el("a", "", text || url);
    link.href = parsed.href;
    link.target = "_blank";
    link.rel = "noopener noreferrer";
    return link;
  }

  // -- the source behind a footnote ------------------------------------------------------

  /** Footnote `k` of the HTML as the report's label, from the Markdown (once per thread). */
  async function footnoteLabel(view, k) {
    if (labels.id !== view.id) {
      const promise = api(runPath(view.id, "/report"), { accept: "text/markdown" })
        .then(labelsInOrder)
        .catch(() => { labels = { id: null, promise: null }; return []; });
      labels = { id: view.id, promise };
    }
    return (await labels.promise)[k - 1] ?? k;
  }

  /** Open the panel for a footnote mark (`#fnK`), or footnote `k`, and fill it with what the run read. */
  async function openSource(view, link, k = Number(/^#fn(\d+)$/.exec(link.getAttribute("href") || "")?.[1])) {
    if (!k) return;
    await showSource(view, link, `Source [${k}]`, () => footnoteLabel(view, k));
  }

  /** Open the panel for source `n` of the run (an answer's citation: no label to look up).

  `cited` is the answer's passage ({start, end, sentence}): it is the one marked. */
  async function openNumbered(view, n, link, cited) {
    await showSource(view, link, `Source [${n}]`, async () => n, cited);
  }

  async function showSource(view, link, heading, label, cited = null) {
    opened?.controller.abort();
    const controller = new AbortController();
    opened = { link, controller };
    $("#source-title").textContent = heading;
    showText($("#source-status"), "Loading the source…");
    showText($("#source-error"), "");
    $("#source-body").replaceChildren();
    if (!dialog.open) dialog.showModal();
    try {
      const n = await label();
      const source = await api(runPath(view.id, `/sources/${n}`), { signal: controller.signal });
      if (opened?.controller !== controller) return;
      showText($("#source-status"), "");
      fillSource(source, cited);
    } catch (err) {
      if (opened?.controller !== controller || err.name === "AbortError") return;
      if (err.status === 401) { closeSource(); return; } // the key box, behind, needs the focus
      showText($("#source-status"), "");
      showText($("#source-error"), err.status === 404 ? `No such footnote: ${err.message}` : err.message);
    }
  }

  /** The source's facts and text: the report's quotes marked, or the answer's passage (`cited`). */
  function fillSource(source, cited) {
    $("#source-title").textContent = source.title || source.url || "Untitled source";
    const facts = el("dl", "source-facts");
    const fact = (name, value) => facts.append(el("dt", "", name), el("dd", "", value));
    fact("Address", sourceLink(source.url));
    const ofCollection = String(source.url || "").startsWith("collection://");
    fact("Kind", ofCollection ? "passage of your collection" : KIND_LABELS[source.kind] || source.kind);
    if (source.document) fact("Document", source.page ? `${source.document}, page ${source.page}` : source.document);
    fact("Provider", source.provider);
    fact("Query", source.query || "unknown");
    const when = source.read_at ? el("time", "", new Date(source.read_at).toLocaleString()) : "unknown";
    if (source.read_at) when.dateTime = source.read_at;
    fact("Read", when);
    const hash = el("code", "", shortHash(source.content_hash));
    hash.title = `SHA-256 ${source.content_hash}`;
    fact("Content hash", hash);
    fact("Text kept", source.kept ? "yes, in the run's evidence" : "no, the evidence store no longer has it");
    const quotes = source.quotes || [];
    const sentences = [...new Set(quotes.map((q) => q.sentence))];
    const text = markedText(source.text || "", cited ? [cited] : quotes);
    const answering = cited
      ? [el("h3", "", "The answer's sentence citing it"),
        el("ul", "source-citing source-answer", el("li", "", cited.sentence))]
      : [];
    $("#source-body").replaceChildren(
      facts,
      ...answering,
      el("h3", "", cited ? "The text the run read, the answer's passage marked" : "The text the run read"),
      text,
      el("h3", "", "Report sentences citing it"),
      sentences.length
        ? el("ul", "source-citing", ...sentences.map((s) => el("li", "", s)))
        : el("p", "muted", "none"),
    );
    if (cited) text.querySelector("mark")?.scrollIntoView({ block: "center" });
  }

  /** The text with each quoted passage in a <mark>; offsets count code points, as the server does. */
  function markedText(text, quotes) {
    const chars = Array.from(text);
    const box = el("div", "source-text");
    let at = 0;
    for (const [a, b] of mergeRanges(quotes.map((q) => [q.start, q.end]), chars.length)) {
      box.append(chars.slice(at, a).join(""), el("mark", "", chars.slice(a, b).join("")));
      at = b;
    }
    box.append(chars.slice(at).join(""));
    return box;
  }

  function closeSource() {
    if (dialog.open) dialog.close();
  }

  /** Focus goes back to the footnote the panel was opened from. */
  function sourceClosed() {
    const link = opened?.link;
    opened?.controller.abort();
    opened = null;
    if (link?.isConnected) link.focus();
  }

  // -- re-runs and the comparison --------------------------------------------------------

  function renderDetail(view, detail) {
    view.rerun = detail.rerun || null;
    const note = $("#rerun-of");
    note.replaceChildren();
    if (view.rerun) {
      const link = el("a", "", `run ${view.rerun.of}`);
      link.href = `#/runs/${encodeURIComponent(view.rerun.of)}`;
      note.append("re-run of ", link, ` (${view.rerun.mode})`);
    }
    note.hidden = !view.rerun;
  }

  /** Re-runs once the thread has finished; the comparison once this re-run has. */
  function update(view) {
    const done = TERMINAL.has(view.status);
    for (const id of ["#rerun-replay", "#rerun-refresh"]) {
      $(id).hidden = !done;
      $(id).disabled = Boolean($(id).dataset.busy);
    }
    $("#compare").hidden = !view.rerun;
    $("#compare").disabled = Boolean($("#compare").dataset.busy) || !done;
    $("#records-actions").hidden = !done && !view.rerun;
  }

  function reset() {
    closeSource();
    labels = { id: null, promise: null };
    showText($("#records-error"), "");
    $("#rerun-of").hidden = true;
    $("#records-actions").hidden = true;
    $("#compare-panel").hidden = true;
    $("#compare-body").replaceChildren();
  }

  async function rerun(button, mode) {
    const view = currentView();
    if (!view) return;
    showText($("#records-error"), "");
    await busy(button, async () => {
      try {
        const answer = await api(runPath(view.id, "/rerun"), { method: "POST", body: { mode } });
        openThread(answer.thread_id);
      } catch (err) {
        if (isCurrent(view)) showText($("#records-error"), err.message);
      }
    });
  }

  async function compare(button) {
    const view = currentView();
    if (!view?.rerun) return;
    showText($("#records-error"), "");
    await busy(button, async () => {
      try {
        const path = runPath(view.rerun.of, `/diff/${encodeURIComponent(view.id)}`);
        const diff = await api(path, { signal: view.controller.signal });
        if (!isCurrent(view)) return;
        $("#compare-body").replaceChildren(...comparison(diff));
        $("#compare-panel").hidden = false;
      } catch (err) {
        if (isCurrent(view) && err.name !== "AbortError") showText($("#records-error"), err.message);
      }
    });
  }

  const entries = (map) =>
    Object.entries(map || {}).sort(([a], [b]) => a.localeCompare(b)).map(([k, v]) => `${k}: ${v}`).join("\n") || "none";
  const FIGURES = [
    ["Report status", (s) => s.report_status || "none"],
    ["Sources", (s) => String(s.sources)],
    ["Cited claims", (s) => String(s.cited_claims)],
    ["Supported share", (s) => (s.supported_share == null ? "–" : `${Math.round(s.supported_share * 100)}%`)],
    ["Review score", (s) => (s.review_score == null ? "–" : s.review_score.toFixed(2))],
    ["Models", (s) => entries(s.models)],
    ["Templates", (s) => entries(s.templates)],
  ];

  /** The two runs' figures side by side; a row whose sides differ is marked. */
  function figuresTable(diff) {
    const head = el("tr", "", el("th", "", "Figure"), el("th", "", "Original"), el("th", "", "This run"));
    const rows = FIGURES.map(([name, shown]) => {
      const before = shown(diff.base), after = shown(diff.other);
      const row = el("tr", "", el("th", "", name), el("td", "base", before), el("td", "other", after));
      row.firstChild.scope = "row";
      row.dataset.same = String(before === after);
      return row;
    });
    const table = el("table", "compare-figures", el("thead", "", head), el("tbody", "", ...rows));
    return el("div", "table-scroll", table);
  }

  /** A titled list (or "none"), its count in `data-count` for a quick look. */
  function listBlock(key, title, items, render) {
    const block = el("section", "compare-list", el("h4", "", `${title} (${items.length})`));
    block.dataset.list = key;
    block.dataset.count = String(items.length);
    block.append(items.length ? el("ul", "", ...items.map((item) => el("li", "", ...render(item)))) : el("p", "muted", "none"));
    return block;
  }

  function comparison(diff) {
    const source = (change) => [sourceLink(change.url, change.title || change.url)];
    const changed = (change) => [
      ...source(change), " ", el("code", "", shortHash(change.before)), " → ", el("code", "", shortHash(change.after)),
    ];
    const text = (sentence) => [sentence];
    return [
      figuresTable(diff),
      listBlock("sources_added", "Sources added", diff.sources_added || [], source),
      listBlock("sources_removed", "Sources removed", diff.sources_removed || [], source),
      listBlock("sources_changed", "Sources changed", diff.sources_changed || [], changed),
      el("p", "muted", `${diff.sources_unchanged ?? 0} sources unchanged.`),
      listBlock("findings_added", "Findings added", diff.findings_added || [], text),
      listBlock("findings_dropped", "Findings dropped", diff.findings_dropped || [], text),
      el("p", "muted", `${diff.findings_kept ?? 0} findings kept.`),
      listBlock("templates_changed", "Templates changed", diff.templates_changed || [], text),
    ];
  }

  // -- wiring ------------------------------------------------------------------------------

  $("#source-close").addEventListener("click", closeSource);
  dialog.addEventListener("close", sourceClosed);
  // A click on the backdrop (outside the dialog's box) closes it too.
  dialog.addEventListener("click", (event) => {
    if (event.target !== dialog) return;
    const box = dialog.getBoundingClientRect();
    const inside = event.clientX >= box.left && event.clientX <= box.right
      && event.clientY >= box.top && event.clientY <= box.bottom;
    if (!inside) closeSource();
  });
  $("#rerun-replay").addEventListener("click", (e) => rerun(e.currentTarget, "replay"));
  $("#rerun-refresh").addEventListener("click", (e) => rerun(e.currentTarget, "refresh"));
  $("#compare").addEventListener("click", (e) => compare(e.currentTarget));

  return { openSource, openNumbered, renderDetail, update, reset };
}
