"""Follow-up questions answered from a run's sources: the passages, how well they match, the answer.

Retrieval is the extractive writer's own: the sentences it may quote, ranked for the
question as a report section's sentences are for its point. How well the best passage
matches is the idf-weighted share of the question's own words (those not in the topic)
that it and its source's title hold; below `MATCH_THRESHOLD` the evidence holds no
answer. Offline the answer is those passages, each cited; a model (`Answerer`) answers
from them only, and the service holds its sentences to the citation check.
"""

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from core.models import SearchResult
from engines.extractive_candidates import quotable
from engines.extractive_writer import answering_sentences
from engines.naming import FORM_STEMS
from engines.relevance import Relevance
from tools.text import stems

# Passages an offline answer joins, and those a model is given to answer from.
ANSWER_PASSAGES = 3
MODEL_PASSAGES = 6
# Below this match the evidence holds no answer; a passage below it is left out of the answer.
# Chosen on 50 questions on 10 dev topics (`bench/ask.py --set dev`): the passages that
# answered matched 0.53 or more but for two (0.32, 0.42), those that did not 0.43 or less but
# for three (0.61 to 0.72); 0.5 sits in that gap. Measured, not tuned, on 30 held-out
# questions (`--set heldout`): 24 statuses of 30 agree with their labels (docs/benchmarks.md).
MATCH_THRESHOLD = 0.5


@dataclass(frozen=True, slots=True)
class Passage:
    """A sentence of a source that may answer the question, as the writer would quote it."""

    text: str
    source: SearchResult
    match: float  # share of the question's own words it and its source's title hold


@dataclass(frozen=True, slots=True)
class Retrieval:
    """The passages for a question, best first, and whether they hold an answer."""

    passages: list[Passage]
    match: float  # the best passage's

    @property
    def answers(self) -> bool:
        """Return whether the best passage matches the question well enough to answer it."""
        return bool(self.passages) and self.match >= MATCH_THRESHOLD

    @property
    def answering(self) -> list["Passage"]:
        """Return the passages that match well enough to answer, best first."""
        return [p for p in self.passages if p.match >= MATCH_THRESHOLD]


# The document frequency a word no source holds is counted at: below the one source of the
# rarest word held, as a continuity correction counts an unseen event.
UNSEEN_DF = 0.5


def unseen_idf(documents: int) -> float:
    """Return the idf of a word in none of `documents`, on the writer's scale (log(1 + n/df)).

    It weighs more than any word a source holds: what the evidence lacks is the rarest. At
    df 1 (the old weight) it tied with a word one source holds, so with few sources a passage
    holding only that word matched half of a two-word question ("many" of "how many chambers",
    none of the sources naming a chamber) and was given as the answer.
    """
    return math.log(1 + max(documents, 1) / UNSEEN_DF)


def _own_words(question: str, topic: str) -> set[str]:
    """Return the words that say what the question asks beyond the topic (else all of them)."""
    asked = set(stems(question))
    for narrowed in (asked - FORM_STEMS - set(stems(topic)), asked - FORM_STEMS):
        if narrowed:
            return narrowed
    return asked


def retrieve(
    question: str, topic: str, sources: Sequence[SearchResult], count: int = ANSWER_PASSAGES
) -> Retrieval:
    """Return the passages of `sources` that best answer `question` about `topic`."""
    candidates, idf = quotable(sources, Relevance.of_topic(topic, sources))
    own = _own_words(question, topic)
    weight = {w: idf.get(w, unseen_idf(len(sources))) for w in own}
    total = sum(weight.values()) or 1.0

    def match(text: str, source: SearchResult) -> float:
        held = own & set(stems(f"{source.title} {text}"))
        return round(sum(weight[w] for w in held) / total, 4)

    picks = answering_sentences(question, topic, candidates, idf, count)
    passages = [Passage(c.text, c.source, match(c.text, c.source)) for c in picks]
    return Retrieval(passages, max((p.match for p in passages), default=0.0))


@runtime_checkable
class Answerer(Protocol):
    """An engine that answers a question from numbered passages with a model (the LLM engine)."""

    @property
    def models(self) -> dict[str, str]:
        """The model each role uses."""
        ...

    async def answer_question(
        self,
        question: str,
        passages: Sequence[tuple[int, str, str]],
        on_token: Callable[[str], None] | None = None,
    ) -> str:
        """Answer from `passages` (number, title, text) only, each sentence ending in `[^n]`."""
        ...


def extractive_answer(cited: Sequence[tuple[str, int]]) -> str:
    """Return the passages (text, source number) joined as Markdown, each sentence cited."""
    return " ".join(f"{text.rstrip()}[^{n}]" for text, n in cited)
