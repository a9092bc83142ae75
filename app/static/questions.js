// Follow-up questions under a finished report: a question box, the answers asked so far,
// each sentence's footnote opening the same source dialog as the report's footnotes
// (`GET .../sources/{n}`: a report footnote, or a source the run collected after them).

const $ = (selector) => document.querySelector(selector);
const TERMINAL = new Set(["completed", "failed", "cancelled"]);

/** The question box and its answers, wired to the page; `ctx` holds app.js's helpers. */
export function createQuestions(ctx) {
  const { api, runPath, el, showText, busy, currentView, openNumbered } = ctx;
  let shownFor = null; // the thread whose questions are listed

  /** One answer: the question, its sentences with their footnote marks, its sources. */
  function answerItem(view, answer) {
    const body = el("p", "answer");
    if (answer.status === "not_in_evidence") {
      body.append(el("span", "muted", answer.answer));
    }
    for (const sentence of answer.sentences || []) {
      body.append(sentence.text);
      for (const cited of sentence.citations) {
        const mark = el("a", "answer-ref", `[${cited.n}]`);
        mark.href = `#source-${cited.n}`;
        mark.addEventListener("click", (event) => {
          event.preventDefault();
          openNumbered(view, cited.n, mark);
        });
        body.append(el("sup", "footnote-ref", mark));
      }
      body.append(" ");
    }
    return el("li", "question-item", el("strong", "", answer.question), body);
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
    const done = TERMINAL.has(view.status);
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
