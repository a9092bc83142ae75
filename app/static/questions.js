// Follow-up questions under a finished report: a question box, the answers asked so far,
// each sentence's footnote opening the same source dialog as the report's footnotes
// (`GET .../sources/{n}`: a report footnote, or a source the run collected after them).

const $ = (selector) => document.querySelector(selector);
const TERMINAL = new Set(["completed", "failed", "cancelled"]);

/** The question box and its answers, wired to the page; `ctx` holds app.js's helpers. */
export function createQuestions(ctx) {
  const { api, runPath, el, showText, busy, currentView, openNumbered, openThread } = ctx;
  let shownFor = null; // the thread whose questions are listed

  /** One answer: the question, its sentences with their footnote marks, its sources. */
  function answerItem(view, answer) {
    const body = el("p", "answer");
    if (answer.status === "not_in_evidence") {
      const share = Math.round((answer.match || 0) * 100);
      const closest = share
        ? `the closest passage holds ${share}% of what it asks`
        : "no passage holds any of what it asks";
      body.append(el("span", "muted", `The run's sources do not answer this question: ${closest}.`));
    }
    for (const sentence of answer.sentences || []) {
      body.append(sentence.text);
      for (const cited of sentence.citations) {
        const mark = el("a", "answer-ref", `[${cited.n}]`);
        mark.href = `#source-${cited.n}`;
        mark.title = `Source ${cited.n}: the passage this sentence stands on`;
        mark.addEventListener("click", (event) => {
          event.preventDefault();
          openNumbered(view, cited.n, mark, { ...cited, sentence: sentence.text });
        });
        body.append(el("sup", "footnote-ref", mark));
      }
      body.append(" ");
    }
    const item = el("li", "question-item", el("p", "question", answer.question), body);
    if (answer.status === "not_in_evidence") item.append(researchOffer(view, answer));
    return item;
  }

  /** A new run on a question the evidence does not answer: a button, or the run it started. */
  function researchOffer(view, answer) {
    const box = el("p", "question-offer");
    if (answer.research_thread) {
      const link = el("a", "question-run", "Open the research started on this question");
      link.href = `#/runs/${encodeURIComponent(answer.research_thread)}`;
      box.append(link);
      return box;
    }
    if (!answer.research) return box;
    const button = el("button", "small primary question-research", "Research this question");
    button.type = "button";
    const error = el("span", "error");
    error.hidden = true;
    button.addEventListener("click", () => busy(button, async () => {
      showText(error, "");
      try {
        const started = await api(answer.research, { method: "POST" });
        openThread(started.thread_id);
      } catch (err) {
        showText(error, err.message);
      }
    }));
    box.append(button, " ", error);
    return box;
  }

  async function load(view) {
    shownFor = view.id;
    try {
      const answers = await api(runPath(view.id, "/questions"));
      if (currentView()?.id !== view.id) return;
      $("#question-list").replaceChildren(...answers.map((a) => answerItem(view, a)));
    } catch (err) {
      showText($("#question-error"), err.message);
    }
  }

  /** Show the box under a finished run's report, and its questions once per thread. */
  function update(view) {
    const done = TERMINAL.has(view.status) && Boolean(view.hasReport);
    $("#questions").hidden = !done;
    if (done && shownFor !== view.id) load(view);
  }

  function reset() {
    shownFor = null;
    $("#questions").hidden = true;
    $("#question-list").replaceChildren();
    showText($("#question-error"), "");
  }

  async function ask(event) {
    event.preventDefault();
    const view = currentView();
    const input = $("#question-input");
    if (!view || !input.value.trim()) return;
    showText($("#question-error"), "");
    await busy($("#question-ask"), async () => {
      try {
        const answer = await api(runPath(view.id, "/questions"), {
          method: "POST",
          body: { question: input.value },
        });
        if (currentView()?.id !== view.id) return;
        $("#question-list").append(answerItem(view, answer));
        input.value = "";
      } catch (err) {
        showText($("#question-error"), err.message);
      }
    });
  }

  $("#question-form").addEventListener("submit", ask);
  return { update, reset };
}
