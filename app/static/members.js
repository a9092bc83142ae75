// A research step's member researchers on the run's timeline: one lane per member, side by
// side, filled live from `member_started` / `member_finished` (and each query's `note`),
// and, once the run is done, from the thread's rounds (GET .../rounds: the record itself,
// which also stands in for member events a capped event log no longer holds). The DOM is
// the state, as for the timeline's other steps: a reload rebuilds it from the replay.
// app.js hands over its helpers; everything from the server goes in as text.

// A lane's status, with the badge colour of the run status it resembles.
const BADGES = { running: "running", SUCCESS: "completed", ERROR: "failed", stopped: "cancelled" };
const WORDS = { running: "running", SUCCESS: "SUCCESS", ERROR: "ERROR", stopped: "not finished" };

/** How long a member worked: milliseconds under a second, else seconds. */
export function took(ms) {
  return ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(1)} s`;
}

/** The member lanes, wired to the page; `ctx` holds app.js's helpers. */
export function createMembers(ctx) {
  const { api, runPath, el, showText, addStep, plural, numbers, isCurrent } = ctx;

  /** The timeline step of round `round`'s members, made where the timeline is on first need. */
  function roundStep(round) {
    const found = document.querySelector(`#timeline li.step[data-kind="members"][data-round="${Number(round)}"]`);
    if (found) return found;
    const li = addStep("members", `Members, round ${round}`, null,
      " ", el("span", "step-text members-summary", ""), el("div", "member-lanes"));
    li.dataset.round = String(round);
    return li;
  }

  /** Member `name`'s lane in `step`, kept in member order whatever order members start in. */
  function lane(step, name, index) {
    const lanes = step.querySelector(".member-lanes");
    const known = [...lanes.children].find((l) => l.dataset.member === name);
    if (known) return known;
    const badge = el("span", "badge member-status");
    const made = el("section", "member-lane",
      el("div", "member-head", el("span", "member-name", name), " ", badge),
      el("p", "member-type"), el("p", "member-point"), el("ul", "member-queries"), el("p", "member-outcome"),
      el("p", "member-error"));
    made.dataset.member = name;
    made.dataset.index = String(index);
    made.setAttribute("aria-label", `Member ${name}`);
    for (const part of made.querySelectorAll("p")) part.hidden = true;
    lanes.insertBefore(made, [...lanes.children].find((l) => Number(l.dataset.index) > index) || null);
    return made;
  }

  function setLaneStatus(member, status) {
    member.dataset.status = status;
    const badge = member.querySelector(".member-status");
    badge.textContent = WORDS[status] || status;
    badge.dataset.status = BADGES[status] || "";
  }

  /** The step's line: how many members, and how many work, succeeded and failed. */
  function summarize(step) {
    const lanes = [...step.querySelectorAll(".member-lane")];
    const count = (status) => lanes.filter((l) => l.dataset.status === status).length;
    const parts = [
      [count("running"), "working"], [count("SUCCESS"), "succeeded"],
      [count("ERROR"), "failed"], [count("stopped"), "not finished"],
    ].filter(([n]) => n).map(([n, word]) => `${numbers.format(n)} ${word}`);
    step.querySelector(".members-summary").textContent =
      `${plural(lanes.length, "member")}${parts.length ? ` (${parts.join(", ")})` : ""}`;
  }

  /** Results, time and model usage of a finished member (what is known of them). */
  function outcome(member, ms, usage) {
    const parts = [];
    if (member.dataset.results) parts.push(plural(Number(member.dataset.results), "result"));
    if (typeof ms === "number") parts.push(took(ms));
    if (usage) {
      const tokens = (usage.input_tokens || 0) + (usage.output_tokens || 0);
      parts.push(tokens
        ? `${plural(tokens, "token")} in ${plural(usage.requests || 0, "request")}`
        : "no model tokens");
    }
    showText(member.querySelector(".member-outcome"), parts.join(" · "));
  }

  function finish(member, status, errorMessage, ms, usage) {
    setLaneStatus(member, status);
    outcome(member, ms, usage);
    showText(member.querySelector(".member-error"), errorMessage || "");
  }

  /** `member_started`: the member's lane, running, with its point and queries. */
  function started(data) {
    const step = roundStep(data.round);
    const member = lane(step, String(data.member), Number(data.index));
    showText(member.querySelector(".member-point"), data.point ? `Point: ${data.point}` : "");
    member.querySelector(".member-queries").replaceChildren(
      ...(data.queries || []).map((q) => {
        const li = el("li", "", el("q", "query", q));
        li.dataset.query = q;
        return li;
      }));
    if (!member.dataset.status) setLaneStatus(member, "running");
    summarize(step);
  }

  /** `member_finished`: its status, error, results, time and model usage. */
  function finished(data) {
    const step = roundStep(data.round);
    const member = lane(step, String(data.member), Number(data.index));
    member.dataset.results = String(data.results ?? "");
    finish(member, data.status, data.error_message, data.execution_time_ms, data.usage);
    summarize(step);
  }

  /** A query's `note`: its outcome beside it, in the lane of the member that ran it. */
  function noted(note) {
    for (const li of document.querySelectorAll("#timeline .member-queries li")) {
      if (li.dataset.query !== note.query || li.dataset.status) continue;
      li.dataset.status = note.status;
      li.append(` ${note.status === "ok" ? plural(note.results || 0, "result") : note.status}`);
      return;
    }
  }

  /** The run is done: each round's lanes as its record says; a lane that never finished says so. */
  async function settle(view) {
    let rounds = [];
    try {
      rounds = await api(runPath(view.id, "/rounds"), { signal: view.controller.signal });
    } catch (err) {
      if (err.name !== "AbortError") console.warn("could not load the rounds", err);
    }
    if (!isCurrent(view)) return;
    for (const round of rounds) {
      const record = round.members;
      if (!record?.submissions?.length) continue;
      const step = roundStep(round.round_number);
      record.submissions.forEach((s, i) => {
        const member = lane(step, s.agent_name, i);
        showText(member.querySelector(".member-type"), s.agent_type);
        finish(member, s.status, s.error_message, s.execution_time_ms, s.usage);
      });
    }
    for (const step of document.querySelectorAll("#timeline li.step[data-kind='members']")) {
      for (const member of step.querySelectorAll(".member-lane[data-status='running']")) {
        setLaneStatus(member, "stopped");
      }
      summarize(step);
    }
  }

  return { started, finished, noted, settle };
}
