// The research-agent page: start runs, follow them live, approve, read the report.
// Plain DOM code, no framework. Everything that came from a user, a source or a model is
// inserted with textContent / .value; the only innerHTML is the server's report fragment,
// which the server renders with raw HTML escaped. A module: records.js (sources behind
// footnotes, re-runs and comparisons), members.js (a research step's member lanes) and
// collections.js (the key's uploaded files, and a run's sources) are imported and handed
// the helpers below.
import { createCollections } from "./collections.js";
import { createMembers } from "./members.js";
import { createQuestions } from "./questions.js";
import { createRecords } from "./records.js";
import { createWatches } from "./watches.js";

(() => {
  const KEY_STORAGE = "research-agent.api-key";
  const THREAD_PAGE = 20;
  const BACKOFF_START_MS = 500;
  const BACKOFF_MAX_MS = 5000;
  // Statuses that get their own timeline line (queued/running would only be noise).
  const TIMELINE_STATUSES = new Set(["paused", "waiting_for_approval", "completed", "failed", "cancelled"]);
  const TERMINAL = new Set(["completed", "failed", "cancelled"]);
  // What each status is called on the page (a badge; its title says more).
  const STATUS_WORDS = {
    queued: "queued", running: "running", waiting_for_approval: "waiting for your approval",
    paused: "paused", completed: "finished", failed: "failed", cancelled: "cancelled",
    partial: "partial report", insufficient: "too little found",
  };
  const STATUS_LABELS = {
    queued: "Queued", running: "Running", waiting_for_approval: "Waiting for your approval",
    paused: "Paused", completed: "Finished", failed: "Failed", cancelled: "Cancelled",
    partial: "Finished with a partial report: the budget ended before a draft passed review",
    insufficient: "Finished, but the sources found do not cover the subject: the report cites nothing",
  };
  /** What a badge says: a completed run whose report is not final says how it stands. */
  const shownStatus = (status, report) =>
    (status === "completed" && (report === "partial" || report === "insufficient") ? report : status);
  const numbers = new Intl.NumberFormat("en-US");
  const APPROVAL_WORDS = { none: "none", plan: "the plan", plan_and_report: "the plan and the report" };
  const REPORT_EMPTY = "The report appears here when the run has one.";

  const $ = (selector) => document.querySelector(selector);

  // -- small DOM helpers -----------------------------------------------------------------

  /** An element with a class and text; children may be nodes or strings (added as text). */
  function el(tag, className, ...children) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    for (const child of children) {
      if (child === null || child === undefined) continue;
      node.append(child instanceof Node ? child : String(child));
    }
    return node;
  }

  const plural = (n, one, many = `${one}s`) => `${numbers.format(n)} ${n === 1 ? one : many}`;
  const planSize = (plan) =>
    `${plural(plan?.investigation_points?.length ?? 0, "point")}, ${plural(plan?.search_queries?.length ?? 0, "query", "queries")}`;

  function showText(node, text) {
    node.textContent = text || "";
    node.hidden = !text;
  }

  function sleep(ms, signal) {
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, ms);
      signal?.addEventListener("abort", () => { clearTimeout(timer); resolve(); }, { once: true });
    });
  }

  /** Disable a button while its action runs, so a double click never sends twice. */
  async function busy(button, action) {
    if (button.dataset.busy) return;
    button.dataset.busy = "1";
    button.disabled = true;
    try {
      await action();
    } finally {
      delete button.dataset.busy;
      button.disabled = false;
      if (state.view) updateButtons(state.view);
    }
  }

  // -- the API -----------------------------------------------------------------------------

  class ApiError extends Error {
    constructor(status, code, message, details) {
      super(message);
      this.status = status;
      this.code = code;
      this.details = details || {};
    }
  }

  function storedKey() {
    try { return localStorage.getItem(KEY_STORAGE) || ""; } catch { return ""; }
  }

  function authHeaders(extra) {
    const headers = { ...extra };
    const key = storedKey();
    if (key) headers["X-API-Key"] = key;
    return headers;
  }

  /** The `{error: {code, message, details}}` answer as an ApiError; a 401 opens the key box. */
  async function toApiError(response) {
    let body = null;
    try { body = await response.json(); } catch { /* not JSON: keep the status */ }
    const error = body?.error || {};
    const message = error.message || `The server answered ${response.status} ${response.statusText}`.trim();
    if (response.status === 401) showKeyPanel(storedKey() ? "The stored API key was refused: enter a valid one." : null);
    return new ApiError(response.status, error.code || "http_error", message, error.details);
  }

  /** One API call: JSON (or FormData, sent as multipart) in, JSON (or text for other `accept` types) out; errors throw ApiError. */
  async function api(path, { method = "GET", body, accept = "application/json", signal } = {}) {
    const init = { method, headers: authHeaders({ Accept: accept }), signal };
    if (body instanceof FormData) {
      init.body = body; // the browser writes the multipart Content-Type and its boundary
    } else if (body !== undefined) {
      init.body = JSON.stringify(body);
      init.headers["Content-Type"] = "application/json";
    }
    const response = await fetch(path, init);
    if (!response.ok) throw await toApiError(response);
    if (response.status === 204) return null;
    return accept === "application/json" ? response.json() : response.text();
  }

  const runPath = (id, tail = "") => `/v1/research/${encodeURIComponent(id)}${tail}`;

  // -- API key -----------------------------------------------------------------------------

  function showKeyPanel(message) {
    const panel = $("#key-panel");
    if (message) $("#key-message").textContent = message;
    if (panel.hidden) {
      panel.hidden = false;
      $("#api-key").focus();
    }
  }

  function saveKey(event) {
    event.preventDefault();
    const key = $("#api-key").value.trim();
    try {
      if (key) localStorage.setItem(KEY_STORAGE, key);
      else localStorage.removeItem(KEY_STORAGE);
    } catch { /* storage disabled: the key lasts until reload only */ }
    $("#api-key").value = "";
    $("#key-panel").hidden = true;
    loadThreads();
    collections.load();
    route(true);
  }

  // -- starting a run ----------------------------------------------------------------------

  // Which input a validation error's field path points at.
  const FIELD_INPUTS = {
    topic: "#topic", "options.max_iterations": "#max-iterations",
    "options.min_sources": "#min-sources", "options.approval": "#approval",
    "options.collections": "#source-collections",
  };

  function numberOrNull(input) {
    // An empty or unparsable box goes to the server as null, so its message explains it.
    return input.value.trim() === "" || Number.isNaN(Number(input.value)) ? null : Number(input.value);
  }

  async function startRun(event) {
    event.preventDefault();
    const errorBox = $("#form-error");
    showText(errorBox, "");
    document.querySelectorAll("#start-form [aria-invalid]").forEach((n) => n.removeAttribute("aria-invalid"));
    if (!$("#topic").value.trim()) {
      showText(errorBox, "Enter a topic: what should be researched?");
      $("#topic").setAttribute("aria-invalid", "true");
      $("#topic").focus();
      return;
    }
    const body = {
      topic: $("#topic").value,
      options: {
        max_iterations: numberOrNull($("#max-iterations")),
        min_sources: numberOrNull($("#min-sources")),
        approval: $("#approval").value,
        ...collections.runOptions(),
      },
    };
    await busy($("#start"), async () => {
      try {
        const answer = await api("/v1/research", { method: "POST", body });
        $("#topic").value = "";
        loadThreads();
        location.hash = `#/runs/${answer.thread_id}`;
      } catch (err) {
        showFormError(errorBox, err);
      }
    });
  }

  function showFormError(box, err) {
    box.textContent = err.message;
    const fields = err.details?.fields || [];
    if (fields.length > 1) {
      // The message joins them all; a list reads better when there are several.
      box.textContent = "Please check these fields:";
      box.append(el("ul", "field-errors", ...fields.map((f) => el("li", "", `${f.field || "body"}: ${f.message}`))));
    }
    for (const f of fields) $(FIELD_INPUTS[f.field] || "#none")?.setAttribute("aria-invalid", "true");
    box.hidden = false;
  }

  // -- past research -----------------------------------------------------------------------

  const threads = { cursor: null, loaded: 0, refreshTimer: null };

  /** Load the list; `more` appends the next page, otherwise the first pages are reloaded. */
  async function loadThreads(more = false) {
    const params = new URLSearchParams();
    params.set("limit", String(more ? THREAD_PAGE : Math.min(100, Math.max(THREAD_PAGE, threads.loaded))));
    if (more && threads.cursor) params.set("cursor", threads.cursor);
    try {
      const page = await api(`/v1/research?${params}`);
      const list = $("#threads");
      if (!more) { list.replaceChildren(); threads.loaded = 0; }
      for (const item of page.items) list.append(threadItem(item));
      threads.loaded += page.items.length;
      threads.cursor = page.next_cursor || null;
      $("#more-threads").hidden = !threads.cursor;
      $("#threads-empty").hidden = threads.loaded > 0;
      showText($("#threads-error"), "");
      markCurrentThread();
    } catch (err) {
      if (err.status !== 401) showText($("#threads-error"), err.message);
    }
  }

  function threadItem(item) {
    const li = el("li", "thread");
    li.dataset.threadId = item.thread_id;
    const link = el("a", "thread-topic", item.topic);
    link.href = `#/runs/${encodeURIComponent(item.thread_id)}`;
    const status = el("span", "status badge");
    setBadge(status, shownStatus(item.status, item.report_status));
    const when = el("time", "muted", new Date(item.created_at).toLocaleString());
    when.dateTime = item.created_at;
    li.append(link, el("span", "thread-meta", status, " ", when));
    return li;
  }

  function markCurrentThread() {
    const id = state.view?.id;
    for (const li of document.querySelectorAll("#threads .thread")) {
      if (li.dataset.threadId === id) li.setAttribute("aria-current", "true");
      else li.removeAttribute("aria-current");
    }
  }

  // A replayed history brings several status events at once: one reload for all of them.
  function refreshThreadsSoon() {
    clearTimeout(threads.refreshTimer);
    threads.refreshTimer = setTimeout(() => loadThreads(), 400);
  }

  // -- routing -----------------------------------------------------------------------------

  const state = { view: null, route: null };

  /** `#/runs/<id>` opens a run, anything else starting with `#/` (or nothing) closes it. */
  function route(force = false) {
    const hash = location.hash;
    if (hash && !hash.startsWith("#/")) return; // an in-page anchor, e.g. a footnote
    const match = /^#\/runs\/([^/?#]+)$/.exec(hash);
    const id = match ? decodeURIComponent(match[1]) : null;
    if (!force && id === state.route) return;
    state.route = id;
    if (id) openRun(id);
    else closeRun("Start a new research or open a past one.");
  }

  // -- one open run ------------------------------------------------------------------------

  function closeRun(message, title = "No research open") {
    state.view?.controller.abort(); // ends its stream and silences its pending requests
    state.view = null;
    $("#run").hidden = true;
    $("#run-empty").hidden = false;
    $("#run-empty-title").textContent = title;
    $("#run-empty-message").textContent = message;
    markCurrentThread();
  }

  function isCurrent(view) {
    return state.view === view && !view.controller.signal.aborted;
  }

  async function openRun(id) {
    closeRun("Loading…", "Opening the research");
    const view = {
      id, controller: new AbortController(), lastEventId: 0, status: null, reportStatus: null, done: false,
      pendingApproval: null, approvalKey: null, draftVersion: null, hasReport: false,
      report: "none", // none | loading | loaded
      pauseRequested: false, sources: 0, rerun: null,
      cited: null, // once the report is loaded: the URLs it cites
    };
    state.view = view;
    resetRunDom();
    drawGraph();
    markCurrentThread();
    let detail;
    try {
      detail = await api(runPath(id), { signal: view.controller.signal });
    } catch (err) {
      if (isCurrent(view)) closeRun(err.status === 404 ? "This research does not exist (any more)." : err.message, "Could not open it");
      return;
    }
    if (!isCurrent(view)) return;
    $("#run-empty").hidden = true;
    $("#run").hidden = false;
    renderDetail(view, detail);
    watches.show(view);
    followEvents(view);
  }

  function resetRunDom() {
    for (const id of ["#timeline", "#sources", "#sources-other", "#report", "#plan-points", "#plan-queries", "#approval-report-preview"]) {
      $(id).replaceChildren();
    }
    for (const id of ["#run-topic", "#run-options", "#usage", "#source-count"]) $(id).textContent = "";
    for (const id of ["#run-note", "#stream-note", "#run-error", "#report-error", "#approval-error"]) showText($(id), "");
    $("#live-draft").textContent = "";
    $("#live-draft").hidden = true;
    $("#live-title").hidden = true;
    $("#report-empty").hidden = false;
    $("#report-empty").textContent = REPORT_EMPTY;
    $("#sources-more").hidden = true;
    $("#progress-panel").open = true;
    $("#approval-panel").hidden = true;
    $("#copy-report").disabled = true;
    $("#download-report").disabled = true;
    for (const button of document.querySelectorAll(".download-as-file")) button.disabled = true;
    setBadge($("#run-status"), "");
    records.reset();
    questions.reset();
    watches.reset();
  }

  function renderDetail(view, detail) {
    records.renderDetail(view, detail);
    $("#run-topic").textContent = detail.topic;
    document.title = `${detail.topic} · Research agent`;
    const o = detail.options || {};
    $("#run-options").textContent =
      `${o.max_iterations} iterations · ${o.min_sources} sources min · approval: ${APPROVAL_WORDS[o.approval] || o.approval}`;
    view.reportStatus = detail.report_status;
    setStatus(view, detail.status);
    const seconds = Object.values(detail.usage?.nodes || {}).reduce((sum, n) => sum + (n.seconds || 0), 0);
    renderUsage({ tokens: detail.tokens, cost_usd: detail.cost_usd, seconds });
    if (detail.status === "waiting_for_approval") showApproval(view, detail.approval);
    if (detail.report) { view.hasReport = true; ensureReport(view); }
  }

  function setBadge(node, status) {
    node.textContent = STATUS_WORDS[status] || status;
    node.dataset.status = status;
    node.title = STATUS_LABELS[status] || "";
  }

  function setStatus(view, status) {
    if (view.status !== status) view.pauseRequested = false;
    view.status = status;
    const shown = shownStatus(status, view.reportStatus);
    setBadge($("#run-status"), shown);
    const item = document.querySelector(`#threads .thread[data-thread-id="${CSS.escape(view.id)}"] .status`);
    if (item) setBadge(item, shown);
    showText($("#run-note"), view.pauseRequested ? "Pausing after the current step…" : "");
    updateButtons(view);
  }

  /** Each control only when the API would accept it in the current status. */
  function updateButtons(view) {
    const s = view.status;
    const busyNow = (id) => Boolean($(id).dataset.busy);
    $("#pause").disabled = busyNow("#pause") || view.pauseRequested || !(s === "queued" || s === "running");
    $("#resume").disabled = busyNow("#resume") || s !== "paused";
    $("#cancel").disabled = busyNow("#cancel") || !s || TERMINAL.has(s);
    $("#delete").disabled = busyNow("#delete") || !s;
    records.update(view);
    questions.update(view);
  }

  function renderUsage(total) {
    if (!total) return;
    const seconds = `${(total.seconds || 0).toFixed(1)} s`;
    const text = total.tokens
      ? `${numbers.format(total.tokens)} tokens · $${formatCost(total.cost_usd || 0)} · ${seconds}`
      : `No model tokens · ${seconds}`;
    $("#usage").textContent = text;
  }

  function formatCost(usd) {
    return usd >= 1 ? usd.toFixed(2) : usd.toFixed(4);
  }

  // -- run controls --------------------------------------------------------------------------

  async function control(button, action) {
    const view = state.view;
    if (!view) return;
    showText($("#run-error"), "");
    await busy(button, async () => {
      try {
        await action(view);
      } catch (err) {
        if (isCurrent(view) && err.name !== "AbortError") showText($("#run-error"), err.message);
      }
    });
  }

  // Statuses are taken from the event stream only: an action's answer can arrive after
  // newer events and would otherwise set the badge back.
  const controls = {
    pause: async (view) => {
      await api(runPath(view.id, "/pause"), { method: "POST" });
      if (isCurrent(view) && !TERMINAL.has(view.status) && view.status !== "paused") {
        view.pauseRequested = true;
        setStatus(view, view.status);
      }
    },
    // A paused run resumes with no body at all: any JSON body is read as an approval decision.
    resume: (view) => api(runPath(view.id, "/resume"), { method: "POST" }),
    cancel: (view) => api(runPath(view.id, "/cancel"), { method: "POST" }),
    delete: async (view) => {
      if (!confirm("Delete this research, its events and its report? This cannot be undone.")) return;
      await api(runPath(view.id), { method: "DELETE" });
      location.hash = "#/";
      loadThreads();
    },
  };

  // -- live events -------------------------------------------------------------------------

  /**
   * Follow the run's SSE stream with fetch (EventSource cannot send the key header).
   * The stream is replayed from the start so the timeline is rebuilt on every open;
   * reconnects pass Last-Event-ID, and frames at or below the last applied id are dropped.
   */
  async function followEvents(view) {
    let delay = BACKOFF_START_MS;
    const { signal } = view.controller;
    while (isCurrent(view) && !view.done) {
      let progressed = false;
      try {
        const headers = authHeaders({ Accept: "text/event-stream" });
        if (view.lastEventId > 0) headers["Last-Event-ID"] = String(view.lastEventId);
        const response = await fetch(runPath(view.id, "/events"), { headers, signal, cache: "no-store" });
        if (!response.ok) {
          const err = await toApiError(response);
          if (response.status === 401) return; // the key box is open; saving reopens the run
          if (response.status === 404) { if (isCurrent(view)) closeRun("This research was deleted.", "Gone"); return; }
          throw err;
        }
        await readSse(response.body, (frame) => {
          if (!isCurrent(view)) return;
          if (applyFrame(view, frame)) progressed = true;
          showText($("#stream-note"), "");
        });
      } catch (err) {
        if (!isCurrent(view)) return; // aborted on purpose: another run was opened
        showText($("#stream-note"), `Connection lost (${err.message}); reconnecting…`);
      }
      if (view.done || !isCurrent(view)) return;
      if (progressed) delay = BACKOFF_START_MS;
      await sleep(delay, signal);
      delay = Math.min(delay * 2, BACKOFF_MAX_MS);
    }
  }

  /** Parse an SSE body: `field: value` lines, a blank line ends a frame, `:` lines are comments. */
  async function readSse(body, onFrame) {
    const reader = body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    let frame = { id: null, event: "message", data: [] };
    const takeLine = (line) => {
      if (line === "") {
        if (frame.data.length) onFrame({ id: frame.id, event: frame.event, data: frame.data.join("\n") });
        frame = { id: null, event: "message", data: [] };
        return;
      }
      if (line.startsWith(":")) return; // heartbeat
      const colon = line.indexOf(":");
      const name = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? "" : line.slice(colon + 1);
      if (value.startsWith(" ")) value = value.slice(1);
      if (name === "id") frame.id = value;
      else if (name === "event") frame.event = value;
      else if (name === "data") frame.data.push(value);
    };
    for (;;) {
      const { value, done } = await reader.read();
      buffer += decoder.decode(value || new Uint8Array(), { stream: !done });
      // Lines end in \r\n, \n or \r; a \r at the very end may still get its \n.
      let match;
      while ((match = /\r\n|\n|\r(?!$)/.exec(buffer)) !== null) {
        takeLine(buffer.slice(0, match.index));
        buffer = buffer.slice(match.index + match[0].length);
      }
      if (done) return; // an unfinished frame at the end is dropped, as the SSE spec says
    }
  }

  /** Apply a frame once: true when it was new. */
  function applyFrame(view, frame) {
    const id = Number.parseInt(frame.id, 10);
    if (!Number.isFinite(id) || id <= view.lastEventId) return false;
    view.lastEventId = id;
    let data = {};
    try { data = JSON.parse(frame.data); } catch { /* keep {} */ }
    try {
      handleEvent(view, frame.event, data || {});
    } catch (err) {
      console.error(`could not show event ${frame.event}`, err); // one odd event never stops the stream
    }
    return true;
  }

  function handleEvent(view, name, data) {
    switch (name) {
      case "status": onStatus(view, data); break;
      case "approval_required":
        view.pendingApproval = data;
        // The server sets the status before it asks, so the question may come second.
        if (view.status === "waiting_for_approval") showApproval(view, data);
        addStep("approval", "Approval needed", data.type === "report"
          ? `the report (${data.status || "draft"})`
          : `the plan (${planSize(data.plan)})`);
        break;
      case "plan": planStep(data.plan || {}, Boolean(data.edited)); break;
      case "note": searchStep(data); members.noted(data); break;
      case "member_started": members.started(data); break;
      case "member_finished": members.finished(data); break;
      case "draft": addStep("draft", `Draft ${data.version}`, `${numbers.format(data.chars || 0)} characters written`); break;
      case "review": reviewStep(data); break;
      case "fallback": addStep("fallback", "Fallback", `${data.step}: ${data.reason}`); break;
      case "repair": addStep("fallback", "Answer asked again", `${data.step}: ${data.error}`); break;
      case "structured_output":
        if (view.structured !== data.method) {  // said once per run, unless it changes
          view.structured = data.method;
          addStep("model", "Structured output", `${data.model}: ${data.method}`);
        }
        break;
      case "report":
        addStep("report", "Report", `${data.status} report, ${numbers.format(data.chars || 0)} characters`);
        // Not loaded yet: the checkpoint holding it is written after this event, before
        // the `completed` status, which loads it.
        view.hasReport = true;
        break;
      case "error": addStep("error", "Error", data.message || data.code || "the run failed"); break;
      case "token": liveToken(view, data); break;
      case "usage": renderUsage(data.total); break;
      case "source": addSource(view, data); break;
      case "done":
        view.done = true;
        markGraphNode(null);
        if (data.status) setStatus(view, data.status);
        members.settle(view);
        break;
      case "node_started": markGraphNode(data.node); break;
      default: break; // node_finished: the next node_started says as much
    }
  }

  function onStatus(view, data) {
    const status = data.status;
    if (data.report) view.reportStatus = data.report;
    else if (status === "queued" || status === "running") view.reportStatus = null;
    setStatus(view, status);
    // A failure's message has its own `error` step just before: the status line stays short.
    if (TIMELINE_STATUSES.has(status)) addStep("status", STATUS_LABELS[status], null);
    if (status === "waiting_for_approval") showApproval(view, view.pendingApproval);
    else {
      view.pendingApproval = null; // answered: the next question comes with its own event
      hideApproval(view);
    }
    // Every completed run has a report, stored by now (a `report` event can come earlier).
    if (status === "completed") ensureReport(view);
    refreshThreadsSoon();
  }

  // -- the research graph --------------------------------------------------------------------

  const SVG_NS = "http://www.w3.org/2000/svg";
  const NODE_W = 104, NODE_H = 30, GAP_X = 14, ROW_H = 78, PAD = 12;
  let graphShape = null; // GET /assistants/research/graph, fetched once

  function svgEl(tag, attrs, ...children) {
    const node = document.createElementNS(SVG_NS, tag);
    for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, String(value));
    for (const child of children) node.append(child);
    return node;
  }

  /** Rows by breadth-first depth from __start__, in the order the graph lists its nodes. */
  function graphRows(shape) {
    const ids = shape.nodes.map((n) => n.id);
    const depth = new Map([["__start__", 0]]);
    for (let queue = ["__start__"]; queue.length;) {
      const from = queue.shift();
      for (const e of shape.edges) {
        if (e.source === from && !depth.has(e.target)) {
          depth.set(e.target, depth.get(from) + 1);
          queue.push(e.target);
        }
      }
    }
    const rows = [];
    for (const id of ids) (rows[depth.get(id) ?? rows.length] ||= []).push(id);
    return rows.filter(Boolean);
  }

  /** The graph as Studio draws it, in plain SVG: nodes in rows, edges down, back and across. */
  function renderGraph(shape) {
    const rows = graphRows(shape);
    const widest = Math.max(...rows.map((r) => r.length));
    const width = PAD * 2 + widest * NODE_W + (widest - 1) * GAP_X;
    const height = PAD * 2 + (rows.length - 1) * ROW_H + NODE_H;
    const at = new Map();
    rows.forEach((row, r) => {
      const rowWidth = row.length * NODE_W + (row.length - 1) * GAP_X;
      row.forEach((id, i) => at.set(id, {
        x: (width - rowWidth) / 2 + i * (NODE_W + GAP_X), y: PAD + r * ROW_H, row: r,
      }));
    });
    const arrow = svgEl("marker", { id: "graph-arrow", viewBox: "0 0 8 8", refX: 7, refY: 4,
      markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" }, svgEl("path", { d: "M0,0 L8,4 L0,8 z" }));
    const root = svgEl("svg", { viewBox: `0 0 ${width} ${height}`, role: "img",
      "aria-label": "The research graph: its nodes and the one running now" },
      svgEl("defs", {}, arrow));
    for (const e of shape.edges) {
      const a = at.get(e.source), b = at.get(e.target);
      if (!a || !b) continue;
      const ax = a.x + NODE_W / 2, bx = b.x + NODE_W / 2;
      let d;
      if (b.row > a.row) d = `M${ax},${a.y + NODE_H} L${bx},${b.y}`;
      else if (b.row < a.row) d = `M${ax + 10},${a.y} Q${(ax + bx) / 2 + 30},${(a.y + b.y + NODE_H) / 2} ${bx + 10},${b.y + NODE_H}`;
      else d = `M${ax},${a.y + NODE_H} Q${(ax + bx) / 2},${a.y + NODE_H + 34} ${bx},${b.y + NODE_H}`;
      root.append(svgEl("path", { d, class: `graph-edge${e.conditional ? " conditional" : ""}`,
        "marker-end": "url(#graph-arrow)" }));
    }
    for (const [id, p] of at) {
      const label = id.replace(/^__|__$/g, "").replace(/_/g, " ");
      const g = svgEl("g", { class: "graph-node", "data-node": id },
        svgEl("rect", { x: p.x, y: p.y, width: NODE_W, height: NODE_H, rx: id.startsWith("__") ? 15 : 6 }),
        svgEl("text", { x: p.x + NODE_W / 2, y: p.y + NODE_H / 2 + 4, "text-anchor": "middle" }, label));
      g.append(svgEl("title", {}, id));
      root.append(g);
    }
    return root;
  }

  // The node running now and those run before, kept apart from the drawing: events may
  // come before the graph's shape has.
  const graphMarks = { current: null, visited: new Set() };

  async function drawGraph() {
    const box = $("#graph");
    graphMarks.current = null;
    graphMarks.visited.clear();
    box.replaceChildren();
    if (!graphShape) {
      try {
        graphShape = await api("/assistants/research/graph");
      } catch {
        box.hidden = true; // a picture, not a feature: the page works without it
        return;
      }
    }
    box.replaceChildren(renderGraph(graphShape));
    box.hidden = false;
    paintGraphMarks();
  }

  /** Mark the node running now (null: none); nodes run before keep a "visited" mark. */
  function markGraphNode(id) {
    if (graphMarks.current) graphMarks.visited.add(graphMarks.current);
    graphMarks.current = id;
    paintGraphMarks();
  }

  function paintGraphMarks() {
    for (const node of document.querySelectorAll("#graph .graph-node")) {
      node.classList.toggle("visited", graphMarks.visited.has(node.dataset.node));
      node.classList.toggle("current", node.dataset.node === graphMarks.current);
    }
  }

  // -- the timeline --------------------------------------------------------------------------

  function addStep(kind, title, text, ...extra) {
    const li = el("li", "step", el("span", "step-title", title));
    li.dataset.kind = kind;
    if (text) li.append(" ", el("span", "step-text", text));
    li.append(...extra);
    $("#timeline").append(li);
    return li;
  }

  /** The plan's step; an edited plan is a step of its own: its queries are the ones run. */
  function planStep(plan, edited) {
    const queries = plan.search_queries || [];
    const list = el("ul", "step-list", ...queries.map((q) => el("li", "", q)));
    const li = addStep("plan", edited ? "Plan, as you edited it" : "Plan",
      `${plan.theme ? `${plan.theme}: ` : ""}${planSize(plan)}`, queries.length ? list : null);
    if (edited) li.dataset.edited = "true";
  }

  function searchStep(note) {
    let outcome = note.status === "ok"
      ? `${plural(note.results, "result")}, ${note.new} new`
      : note.status === "empty" ? "no results" : "failed";
    if (note.pages_read) outcome += `, ${plural(note.pages_read, "page")} read`;
    if (note.page_errors) outcome += `, ${plural(note.page_errors, "page")} unreadable`;
    const li = el("li", "step", el("span", "step-title", `Search ${note.step_no ?? ""}`.trim()),
      " ", el("q", "query", note.query), ` ${outcome}`);
    li.dataset.kind = "search";
    li.dataset.status = note.status;
    searchGroup().querySelector(".search-list").append(li);
    const group = searchGroup();
    const count = Number(group.dataset.count || 0) + 1;
    const found = Number(group.dataset.found || 0) + (note.new || 0);
    const failed = Number(group.dataset.failed || 0) + (note.status === "failed" ? 1 : 0);
    Object.assign(group.dataset, { count, found, failed });
    group.querySelector("summary").textContent =
      `${plural(count, "search", "searches")}, ${plural(found, "new source")}${failed ? `, ${failed} failed` : ""}`;
  }

  /** Consecutive searches share one folded step (the list opens on a click). */
  function searchGroup() {
    const last = $("#timeline").lastElementChild;
    if (last?.dataset.kind === "searches") return last;
    return addStep("searches", "Searches", null, " ",
      el("details", "search-group", el("summary", "step-text", ""), el("ol", "search-list")));
  }

  function reviewStep(review) {
    const s = review.scores || {};
    const score = (x) => (typeof x === "number" ? x.toFixed(2) : "–");
    const parts = [
      `fact check ${score(s.fact_check)}`, `completeness ${score(s.completeness)}`,
      `logic ${score(s.logic)}`, `format ${score(s.format)}`,
    ];
    const cited = review.citations?.cited_claims;
    if (cited) {
      // With nothing cited there is no share (null): only a real one is shown.
      parts.push(`supported citations ${Math.round(review.citations.share * 100)}% (${review.citations.supported} of ${cited})`);
    }
    const verdict = review.approved ? "passed" : "needs work";
    const li = addStep("review", `Review of draft ${review.version}`,
      `${score(review.overall_score)} (${verdict})`, el("div", "step-detail", parts.join(" · ")));
    li.dataset.passed = String(Boolean(review.approved));
  }

  // -- sources, live draft -------------------------------------------------------------------

  function addSource(view, source) {
    const url = String(source.url || "");
    const title = String(source.title || url || "untitled");
    let parsed = null;
    try { parsed = new URL(url); } catch { /* not a URL: shown as text */ }
    const li = el("li", "source");
    li.dataset.url = sameUrl(url);
    if (parsed && (parsed.protocol === "http:" || parsed.protocol === "https:")) {
      const link = el("a", "", title);
      link.href = parsed.href;
      link.target = "_blank";
      link.rel = "noopener noreferrer";
      li.append(link, " ", el("span", "domain", parsed.hostname));
    } else {
      li.append(el("span", "source-title", title), " ", el("span", "domain", url));
    }
    const cited = !view.cited || view.cited.has(li.dataset.url);
    $(cited ? "#sources" : "#sources-other").append(li);
    view.sources += 1;
    countSources(view);
  }

  /** A URL as the report and the events both write it ("Go_(game)" and "Go_%28game%29"). */
  function sameUrl(url) {
    try { return decodeURI(new URL(url).href).replace(/\/$/, ""); } catch { return String(url); }
  }

  /** Once the report is in: the sources it cites first, the rest folded under them. */
  function arrangeSources(view) {
    const links = [...$("#report").querySelectorAll("a[href^='http']")].map((a) => a.href);
    const passages = [...$("#report").querySelectorAll(".collection-source[data-url]")].map((p) => p.dataset.url);
    view.cited = new Set([...links, ...passages].map(sameUrl));
    for (const li of [...$("#sources").children]) {
      if (!view.cited.has(li.dataset.url)) $("#sources-other").append(li);
    }
    countSources(view);
  }

  function countSources(view) {
    const other = $("#sources-other").children.length;
    $("#source-count").textContent = view.cited
      ? `(${view.sources - other} cited of ${view.sources} collected)`
      : `(${view.sources})`;
    $("#sources-more").hidden = other === 0;
    $("#sources-more-title").textContent = `${plural(other, "more source")} collected, not cited`;
  }

  function liveToken(view, data) {
    if (view.hasReport) return; // a replayed history: the report itself is shown instead
    const pre = $("#live-draft");
    if (view.draftVersion !== data.version) {
      view.draftVersion = data.version;
      pre.textContent = "";
      $("#live-title").textContent = `Draft ${data.version} being written`;
    }
    pre.append(data.text || "");
    pre.hidden = false;
    $("#live-title").hidden = false;
    pre.scrollTop = pre.scrollHeight;
  }

  function clearLiveDraft() {
    $("#live-draft").textContent = "";
    $("#live-draft").hidden = true;
    $("#live-title").hidden = true;
  }

  // -- the report ----------------------------------------------------------------------------

  /** Load the report fragment once (at open when the run has one, else at `completed`). */
  async function ensureReport(view) {
    if (view.report !== "none") return;
    view.report = "loading";
    try {
      const html = await api(runPath(view.id, "/report"), { accept: "text/html", signal: view.controller.signal });
      if (!isCurrent(view)) return;
      showReportHtml($("#report"), html);
      view.report = "loaded";
      view.hasReport = true;
      arrangeSources(view);
      // A finished run opens on its report: how it ran is folded below.
      if (TERMINAL.has(view.status)) $("#progress-panel").open = false;
      clearLiveDraft();
      $("#report-empty").hidden = true;
      $("#copy-report").disabled = false;
      $("#download-report").disabled = false;
      for (const button of document.querySelectorAll(".download-as-file")) button.disabled = false;
      showText($("#report-error"), "");
    } catch (err) {
      view.report = "none"; // the next trigger (a `completed` status) tries again
      if (isCurrent(view) && err.name !== "AbortError") showText($("#report-error"), err.message);
    }
  }

  /** Insert the server's (already escaped) fragment; wide tables get their own scroller. */
  function showReportHtml(container, html) {
    container.innerHTML = html;
    // A collection passage's reference (`collection://...`) is no address a browser opens:
    // in the report it opens the source dialog of its footnote, elsewhere it is text.
    for (const link of container.querySelectorAll("a[href^='collection:']")) {
      const footnote = link.closest("li.footnote-item[id^='fn']");
      const shown = footnote && container.id === "report"
        ? el("button", "link-button collection-source", link.textContent)
        : el("span", "collection-source", link.textContent);
      if (shown.tagName === "BUTTON") {
        shown.type = "button";
        shown.dataset.footnote = footnote.id;
      }
      shown.title = `${link.getAttribute("href")}: a passage of your collection`;
      shown.dataset.url = link.getAttribute("href");
      link.replaceWith(shown);
    }
    for (const table of container.querySelectorAll("table")) {
      const scroller = el("div", "table-scroll");
      table.replaceWith(scroller);
      scroller.append(table);
    }
  }

  async function reportMarkdown(view) {
    return api(runPath(view.id, "/report"), { accept: "text/markdown" });
  }

  async function copyReport() {
    const view = state.view;
    const button = $("#copy-report");
    await busy(button, async () => {
      try {
        const markdown = await reportMarkdown(view);
        await writeClipboard(markdown);
        button.textContent = "Copied";
        setTimeout(() => { button.textContent = "Copy Markdown"; }, 2000);
      } catch (err) {
        showText($("#report-error"), `Could not copy: ${err.message}`);
      }
    });
  }

  async function writeClipboard(text) {
    if (navigator.clipboard?.writeText) return navigator.clipboard.writeText(text);
    // Plain http on another host has no async clipboard: the old selection copy still works.
    const area = el("textarea", "offscreen");
    area.value = text;
    document.body.append(area);
    area.select();
    const ok = document.execCommand("copy");
    area.remove();
    if (!ok) throw new Error("this browser refused to copy");
  }

  /** Save `blob` as a file named `name` (a link to it, clicked). */
  function saveFile(blob, name) {
    const url = URL.createObjectURL(blob);
    const link = el("a", "offscreen");
    link.href = url;
    link.download = name;
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 1000);
  }

  async function downloadReport() {
    const view = state.view;
    await busy($("#download-report"), async () => {
      try {
        const markdown = await reportMarkdown(view);
        saveFile(new Blob([markdown], { type: "text/markdown;charset=utf-8" }), `${view.id}.md`);
      } catch (err) {
        showText($("#report-error"), `Could not download: ${err.message}`);
      }
    });
  }

  // The report's files, by the button's data-format: what to ask for (Accept).
  const REPORT_FILES = {
    pdf: "application/pdf",
    docx: "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    html: "text/html; profile=standalone",
  };

  /** Download the report as a PDF, Word file or HTML document, rendered by the service. */
  async function downloadReportAs(event) {
    const button = event.currentTarget;
    const format = button.dataset.format;
    const view = state.view;
    await busy(button, async () => {
      try {
        const response = await fetch(runPath(view.id, "/report"), {
          headers: authHeaders({ Accept: REPORT_FILES[format] }),
        });
        if (!response.ok) throw await toApiError(response);
        saveFile(await response.blob(), `report-${view.id}.${format}`);
        showText($("#report-error"), "");
      } catch (err) {
        showText($("#report-error"), `Could not download: ${err.message}`);
      }
    });
  }

  /**
   * Footnote links (`#fn1`) scroll inside their fragment instead of changing the route; a
   * footnote mark in the text also opens the panel with the source it cites.
   */
  function followInPageLink(event) {
    const passage = event.target.closest("button.collection-source");
    if (passage && state.view) {
      records.openSource(state.view, passage, Number(passage.dataset.footnote.slice(2)));
      return;
    }
    const link = event.target.closest("a[href^='#']");
    if (!link || link.getAttribute("href").startsWith("#/")) return;
    event.preventDefault();
    const id = decodeURIComponent(link.getAttribute("href").slice(1));
    const target = event.currentTarget.querySelector(`[id="${CSS.escape(id)}"]`);
    if (target) {
      target.scrollIntoView({ behavior: "smooth", block: "center" });
      target.classList.add("flash");
      setTimeout(() => target.classList.remove("flash"), 1500);
    }
    if (state.view && link.closest("sup.footnote-ref")) records.openSource(state.view, link);
  }

  // -- approval ------------------------------------------------------------------------------

  function hideApproval(view) {
    view.approvalKey = null;
    $("#approval-panel").hidden = true;
  }

  /** Build the panel from an approval payload; the same payload again keeps the edits. */
  function showApproval(view, payload) {
    if (!payload) return;
    const key = JSON.stringify(payload);
    if (view.approvalKey === key) return;
    view.approvalKey = key;
    view.approval = payload;
    showText($("#approval-error"), "");
    $("#feedback").value = "";
    const isPlan = payload.type === "plan";
    $("#approval-plan").hidden = !isPlan;
    $("#approval-report").hidden = isPlan;
    $("#edit-approve").hidden = !isPlan;
    if (isPlan) fillPlan(payload.plan || {});
    else fillReportPreview(view, payload);
    $("#approval-title").textContent = isPlan ? "Approve the research plan" : "Approve the report";
    $("#approval-panel").hidden = false;
  }

  function fillPlan(plan) {
    $("#plan-theme").textContent = plan.theme || "";
    $("#plan-points").replaceChildren();
    $("#plan-queries").replaceChildren();
    for (const point of plan.investigation_points || []) addPlanInput("point", point);
    for (const query of plan.search_queries || []) addPlanInput("query", query);
  }

  function addPlanInput(kind, value = "") {
    const box = $(kind === "point" ? "#plan-points" : "#plan-queries");
    const input = el("input", `plan-${kind}`);
    input.type = "text";
    input.value = value;
    input.maxLength = kind === "point" ? 300 : 400;
    input.setAttribute("aria-label", `${kind === "point" ? "Investigation point" : "Search query"} ${box.children.length + 1}`);
    box.append(input);
    return input;
  }

  /** The draft under review, rendered as the report will be (GET .../report gives it at this gate). */
  async function fillReportPreview(view, payload) {
    $("#approval-report-status").textContent =
      `The ${payload.status || "draft"} report below waits for your sign-off.`;
    $("#report-empty").textContent = "The report appears here once you approve the draft above.";
    const preview = $("#approval-report-preview");
    try {
      const html = await api(runPath(view.id, "/report"), { accept: "text/html", signal: view.controller.signal });
      if (isCurrent(view) && view.approval === payload) showReportHtml(preview, html);
    } catch (err) {
      // Too long to render, or gone: the Markdown itself, as text.
      if (isCurrent(view) && err.name !== "AbortError") {
        preview.replaceChildren(el("pre", "markdown-preview", payload.report || ""));
      }
    }
  }

  const values = (selector) =>
    [...document.querySelectorAll(selector)].map((i) => i.value.trim()).filter(Boolean);

  async function decide(button, decision) {
    const view = state.view;
    if (!view) return;
    showText($("#approval-error"), "");
    const answered = view.approvalKey;
    await busy(button, async () => {
      try {
        await api(runPath(view.id, "/resume"), { method: "POST", body: decision() });
        // A fast run may ask its next question (the report gate) before this answer
        // returns: hide the panel only if it still shows the question just answered.
        if (isCurrent(view) && view.approvalKey === answered) hideApproval(view);
      } catch (err) {
        if (isCurrent(view)) showText($("#approval-error"), err.message);
      }
    });
  }

  // -- wiring ----------------------------------------------------------------------------------

  function init() {
    $("#key-form").addEventListener("submit", saveKey);
    $("#start-form").addEventListener("submit", startRun);
    $("#more-threads").addEventListener("click", (e) => busy(e.currentTarget, () => loadThreads(true)));
    $("#refresh-threads").addEventListener("click", (e) => busy(e.currentTarget, () => loadThreads()));
    for (const name of Object.keys(controls)) {
      $(`#${name}`).addEventListener("click", (e) => control(e.currentTarget, controls[name]));
    }
    $("#approve").addEventListener("click", (e) => decide(e.currentTarget, () => ({ decision: "approve" })));
    $("#edit-approve").addEventListener("click", (e) => decide(e.currentTarget, () => ({
      decision: "edit",
      plan: { ...state.view.approval.plan, investigation_points: values(".plan-point"), search_queries: values(".plan-query") },
    })));
    $("#reject").addEventListener("click", (e) => decide(e.currentTarget, () => ({
      decision: "reject", feedback: $("#feedback").value,
    })));
    $("#add-point").addEventListener("click", () => addPlanInput("point").focus());
    $("#add-query").addEventListener("click", () => addPlanInput("query").focus());
    $("#copy-report").addEventListener("click", copyReport);
    $("#download-report").addEventListener("click", downloadReport);
    for (const button of document.querySelectorAll(".download-as-file")) {
      button.addEventListener("click", downloadReportAs);
    }
    $("#report").addEventListener("click", followInPageLink);
    window.addEventListener("hashchange", () => route());
    loadThreads();
    collections.init();
    route(true);
  }

  const records = createRecords({
    api, runPath, el, showText, busy, isCurrent,
    currentView: () => state.view,
    openThread: (id) => {
      loadThreads();
      location.hash = `#/runs/${encodeURIComponent(id)}`;
    },
  });

  const questions = createQuestions({
    api, runPath, el, showText, busy,
    currentView: () => state.view,
    openNumbered: (view, n, link, cited) => records.openNumbered(view, n, link, cited),
    openThread: (id) => {
      loadThreads();
      location.hash = `#/runs/${encodeURIComponent(id)}`;
    },
  });
  const collections = createCollections({ api, el, showText, busy, plural });
  const watches = createWatches({ api, runPath, el, isCurrent });

  const members = createMembers({ api, runPath, el, showText, addStep, plural, numbers, isCurrent });

  init();
})();
