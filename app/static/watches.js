// A watched thread's changes on the page: each refresh as a dated diff against the one
// before (GET .../watch and .../watch/changes). app.js hands over its helpers; everything
// from the server goes in as text, never as markup.

const $ = (selector) => document.querySelector(selector);

/** The watch panel, wired to the page; `ctx` holds app.js's helpers. */
export function createWatches(ctx) {
  const { api, runPath, el, isCurrent } = ctx;

  function reset() {
    $("#watch-panel").hidden = true;
    $("#watch-summary").textContent = "";
    $("#watch-changes").replaceChildren();
  }

  const when = (iso) => new Date(iso).toLocaleString();

  /** One refresh: its date, its thread, and the sources and findings that came, went or changed. */
  function entryItem(entry) {
    const link = el("a", "", entry.thread_id);
    link.href = `#/runs/${encodeURIComponent(entry.thread_id)}`;
    const head = el("p", "", el("time", "", when(entry.at)), " · refresh ", link);
    if (!entry.diff) return el("li", "", head, el("p", "muted", `The refresh ${entry.status}.`));
    const d = entry.diff;
    const counts = `sources +${d.sources_added.length} −${d.sources_removed.length} `
      + `~${d.sources_changed.length}, findings +${d.findings_added.length} −${d.findings_dropped.length}`;
    const lines = [
      ...d.sources_added.map((s) => `+ ${s.url}`),
      ...d.sources_removed.map((s) => `− ${s.url}`),
      ...d.sources_changed.map((s) => `~ ${s.url}`),
      ...d.findings_added.map((f) => `+ ${f}`),
      ...d.findings_dropped.map((f) => `− ${f}`),
    ];
    const item = el("li", entry.changed ? "watch-changed" : "", head,
      el("p", "muted", entry.changed ? counts : `${counts} (no change)`));
    if (lines.length) item.append(el("ul", "", ...lines.map((line) => el("li", "", line))));
    return item;
  }

  /** Show the thread's watch and its changes, newest first; nothing for a thread not watched. */
  async function show(view) {
    let watch, changes;
    try {
      watch = await api(runPath(view.id, "/watch"), { signal: view.controller.signal });
      changes = await api(runPath(view.id, "/watch/changes"), { signal: view.controller.signal });
    } catch {
      return; // not watched (404), or the view was left
    }
    if (!isCurrent(view)) return;
    $("#watch-summary").textContent = `Refreshed every ${watch.every}: ${watch.refreshes} so far, `
      + `the next due ${when(watch.next_due)}.`;
    const items = changes.map(entryItem);
    $("#watch-changes").replaceChildren(...(items.length ? items : [el("li", "muted", "No refresh yet.")]));
    $("#watch-panel").hidden = false;
  }

  return { show, reset };
}
