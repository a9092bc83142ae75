"""Follow-up questions on finished runs: which share is answered, and whether every citation resolves.

Two sets of questions, each labelled answerable or not by reading the sources the topic's
offline run collected: `dev` (`bench/ask_questions.json`, 10 dev-set topics x 5, on which
the 0.5 match threshold was chosen; labelled after the first measure) and `heldout`
(`bench/ask_heldout.json`, 6 topics outside the dev sets x 5, labelled before any measure;
not to tune on). Runs each topic offline with the CLI (`research-agent run`, thread `ask-N`
or `heldout-N`, skipped when the thread exists), then asks its questions through the
service's own path (`service.questions.Questions`), and checks every cited passage against
`GET .../sources/{n}`'s view of the source: offsets inside the stored text, not empty.

    RESEARCH_DATA_DIR=/tmp/ask RESEARCH_CORPUS_INDEX=.../index.sqlite \
        python bench/ask.py [--set dev|heldout] [--show 5]

Prints one line per question (status, whether it agrees with its label, match, sources
cited), the share answered and the share "not in the evidence", how many statuses agree
with the labels (answered where answerable, not in the evidence where not), the citations
checked, and `--show` answers whole. Whether an answer's passages do answer is read, not
measured.
"""

import argparse
import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from app.runtime import open_runtime
from app.settings import Settings
from core.questions import QuestionAnswer
from service.questions import Questions
from service.thread_ids import LOCAL_OWNER

# Each set: its questions file and the thread prefix its runs are kept under.
SETS = {
    "dev": (Path(__file__).with_name("ask_questions.json"), "ask"),
    "heldout": (Path(__file__).with_name("ask_heldout.json"), "heldout"),
}


def _run_topics(topics: list[str], prefix: str) -> None:
    """Run each topic offline with the CLI as thread PREFIX-N, unless that thread exists."""
    for i, topic in enumerate(topics, 1):
        done = subprocess.run(
            ["research-agent", "show", f"{prefix}-{i}"], capture_output=True, check=False
        )
        if done.returncode == 0:
            continue
        subprocess.run(
            ["research-agent", "run", topic, "--thread", f"{prefix}-{i}"],
            capture_output=True,
            check=True,
        )


async def _ask_all(
    asked: dict[str, list[str]], prefix: str, settings: Settings
) -> list[tuple[str, QuestionAnswer, int, int]]:
    """Ask every question; return (topic, answer, citations checked, citations that resolve)."""
    results = []
    async with open_runtime(settings) as runtime:
        manager = runtime.manager
        questions = Questions(manager)
        for i, (topic, wanted) in enumerate(asked.items(), 1):
            thread = await manager.resolve(LOCAL_OWNER, f"{prefix}-{i}")
            for question in wanted:
                answer = await questions.ask(LOCAL_OWNER, thread, question)
                checked = resolved = 0
                for sentence in answer.sentences:
                    for cited in sentence.citations:
                        view = await manager.source(thread, cited.n)
                        checked += 1
                        resolved += 0 <= cited.start < cited.end <= len(view.text)
                results.append((topic, answer, checked, resolved))
        await manager.shutdown()
    return results


def main() -> None:
    """Run the topics, ask the questions, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", choices=sorted(SETS), default="dev", help="questions to ask")
    parser.add_argument("--show", type=int, default=5, help="answers to print whole")
    args = parser.parse_args()
    path, prefix = SETS[args.set]
    labelled: dict[str, list[dict[str, Any]]] = json.loads(path.read_text(encoding="utf-8"))
    asked = {topic: [q["question"] for q in qs] for topic, qs in labelled.items()}
    answerable = {q["question"]: bool(q["answerable"]) for qs in labelled.values() for q in qs}
    settings = Settings()
    _run_topics(list(asked), prefix)
    results = asyncio.run(_ask_all(asked, prefix, settings))
    agree = 0
    for topic, answer, checked, resolved in results:
        cited = ",".join(str(s.n) for s in answer.sources)
        agrees = (answer.status == "answered") == answerable[answer.question]
        agree += agrees
        print(
            f"{answer.status:16} {'agrees' if agrees else 'DIFFERS'}  match {answer.match:.2f}  "
            f"{resolved}/{checked} resolve  [{cited}]  {topic[:32]:32} | {answer.question}"
        )
    total = len(results)
    labelled_yes = sum(answerable.values())
    answered = sum(a.status == "answered" for _, a, _, _ in results)
    checked = sum(c for _, _, c, _ in results)
    resolved = sum(r for _, _, _, r in results)
    print(
        f"\n{args.set}: {total} questions on {len(asked)} runs: answered {answered} ({answered / total:.0%}), "
        f"not in the evidence {total - answered} ({(total - answered) / total:.0%}); "
        f"agreeing with the labels ({labelled_yes} answerable) {agree}/{total}; "
        f"cited passages resolving {resolved}/{checked}"
    )
    shown = [a for _, a, _, _ in results if a.status == "answered"][: args.show]
    for answer in shown:
        print(f"\nQ: {answer.question}\nA: {answer.answer}")
    sys.exit(0 if resolved == checked else 1)


if __name__ == "__main__":
    main()
