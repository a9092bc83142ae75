"""Whether a model's plan, though it fits the schema, has substance.

A small model fills a schema with whatever it has (a field name, a line of the prompt, no
queries): such a plan is repaired like one that does not parse, then the extractive one serves.
"""

import re
from collections.abc import Sequence

from prompts.planner import PlanOutput
from tools.text import stems, words

# Copying this many consecutive words of the prompt is echoing it, not planning.
ECHO_WORDS = 5
# A point that copies this many consecutive words of a source shown is a passage, not a
# question (a title, which a query may repeat, is shorter).
PASSAGE_WORDS = 8
# An identifier ("plan_text") is a schema's word, not a research point or a search.
_IDENTIFIER = re.compile(r"\b[A-Za-z]+_[A-Za-z_]+\b")


def _shingles(text: str, size: int = ECHO_WORDS) -> set[tuple[str, ...]]:
    tokens = [w.casefold() for w in words(text)]
    return {tuple(tokens[i : i + size]) for i in range(len(tokens) - size + 1)}


def _wordless(text: str) -> bool:
    """No word at all ("...", "1.", "-"): nothing a report could answer or a search find."""
    return not any(c.isalpha() for c in text)


def plan_problem(
    plan: PlanOutput, topic: str, prompt: Sequence[str], shown: Sequence[str] = ()
) -> str | None:
    """Say what makes `plan` unusable for `topic`, so the model can fix it; None if usable.

    `prompt` is the instructions the model was given: a point or query that copies them
    is an echo. `shown` is the text of the sources it was shown: a point that copies a
    passage of one is not a question (a query may repeat a title, which is shorter).
    """
    if not plan.search_queries:
        return "there are no search queries: give 1 to 3 short queries that name the topic"
    copied = set().union(*(_shingles(text, PASSAGE_WORDS) for text in shown))
    for point in plan.investigation_points:
        if _shingles(point, PASSAGE_WORDS) & copied:
            return (
                f"the point {point[:80]!r}... copies a source's text: write the question "
                "about the topic that a report should answer"
            )
    echoed = set().union(*(_shingles(text) for text in prompt)) - _shingles(topic)
    for field, items in (
        ("search query", plan.search_queries),
        ("point", plan.investigation_points),
    ):
        for item in items:
            if _shingles(item) & echoed:
                return f"the {field} {item!r} copies the instructions: write your own"
            if _IDENTIFIER.search(item):
                return f"the {field} {item!r} is a field name, not about the topic"
            if _wordless(item):
                return f"the {field} {item!r} has no words"
    subject = set(stems(topic))
    if subject and not any(subject & set(stems(query)) for query in plan.search_queries):
        return (
            f"no search query names the topic ({topic!r}): at least one must, "
            "in a few of its own words"
        )
    return None
