"""Follow-up questions on finished runs: which share is answered, and whether every citation resolves.

Runs each topic of `bench/ask_questions.json` offline with the CLI (`research-agent run`,
thread `ask-N`, skipped when the thread exists), then asks its five questions through the
service's own path (`service.questions.Questions`), and checks every cited passage against
`GET .../sources/{n}`'s view of the source: offsets inside the stored text, not empty.

    RESEARCH_DATA_DIR=/tmp/ask RESEARCH_CORPUS_INDEX=.../index.sqlite python bench/ask.py [--show 5]

Prints one line per question (status, match, sources cited), the share answered and the
share "not in the evidence", the citations checked, and `--show` answers whole.
"""

import argparse
import asyncio
import json
import subprocess
import sys
from pathlib import Path

from app.runtime import open_runtime
from app.settings import Settings
from core.questions import QuestionAnswer
from service.questions import Questions
from service.thread_ids import LOCAL_OWNER

QUESTIONS = Path(__file__).with_name("ask_questions.json")


def _run_topics(topics: list[str], settings: Settings) -> None:
    """Run each topic offline with the CLI as thread ask-N, unless that thread exists."""
    for i, topic in enumerate(topics, 1):
        done = subprocess.run(
            ["research-agent", "show", f"ask-{i}"], capture_output=True, check=False
        )
        if done.returncode == 0:
            continue
        subprocess.run(
            ["research-agent", "run", topic, "--thread", f"ask-{i}"],
            capture_output=True,
            check=True,
        )


async def _ask_all(
    asked: dict[str, list[str]], settings: Settings
) -> list[tuple[str, QuestionAnswer, int, int]]:
    """Ask every question; return (topic, answer, citations checked, citations that resolve)."""
    results = []
    async with open_runtime(settings) as runtime:
        manager = runtime.manager
        questions = Questions(manager)
        for i, (topic, wanted) in enumerate(asked.items(), 1):
            thread = await manager.resolve(LOCAL_OWNER, f"ask-{i}")
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
    parser.add_argument("--show", type=int, default=5, help="answers to print whole")
    args = parser.parse_args()
    asked: dict[str, list[str]] = json.loads(QUESTIONS.read_text(encoding="utf-8"))
    settings = Settings()
    _run_topics(list(asked), settings)
    results = asyncio.run(_ask_all(asked, settings))
    for topic, answer, checked, resolved in results:
        cited = ",".join(str(s.n) for s in answer.sources)
        print(
            f"{answer.status:16} match {answer.match:.2f}  {resolved}/{checked} resolve  "
            f"[{cited}]  {topic[:32]:32} | {answer.question}"
        )
    total = len(results)
    answered = sum(a.status == "answered" for _, a, _, _ in results)
    checked = sum(c for _, _, c, _ in results)
    resolved = sum(r for _, _, _, r in results)
    print(
        f"\n{total} questions on {len(asked)} runs: answered {answered} ({answered / total:.0%}), "
        f"not in the evidence {total - answered} ({(total - answered) / total:.0%}); "
        f"cited passages resolving {resolved}/{checked}"
    )
    shown = [a for _, a, _, _ in results if a.status == "answered"][: args.show]
    for answer in shown:
        print(f"\nQ: {answer.question}\nA: {answer.answer}")
    sys.exit(0 if resolved == checked else 1)


if __name__ == "__main__":
    main()
