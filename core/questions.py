"""Follow-up questions on a finished thread, and their answers from the run's own evidence.

An answer is kept on the thread's state (`ResearchState.questions`), so it lives, is
exported and is deleted with the thread on every store. Every sentence of an answer cites
a source of the run: a footnote of the report, or a source the run collected but the
report did not cite, numbered after the report's footnotes.
"""

import re
from datetime import datetime
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, WithJsonSchema

from core.models import non_blank, utcnow

QUESTION_MAX_CHARS = 500
# A letter or a digit in any script, as a topic must hold (`core.options`).
_WORDS = r"[^\W_]"
# At most this many questions are kept on one thread: a state is checkpointed whole.
MAX_QUESTIONS = 100


def _has_words(question: str) -> str:
    if re.search(_WORDS, question) is None:
        raise ValueError("the question has no words: ask it in words")
    return question


Question = Annotated[
    str,
    non_blank(QUESTION_MAX_CHARS),
    AfterValidator(_has_words),
    WithJsonSchema(
        {"type": "string", "minLength": 1, "maxLength": QUESTION_MAX_CHARS, "pattern": _WORDS}
    ),
]

AnswerStatus = Literal["answered", "not_in_evidence"]


class QuestionRequest(BaseModel):
    """A follow-up question on a finished thread."""

    model_config = ConfigDict(extra="forbid")

    question: Question = Field(description="What to ask of the run's evidence.")


class CitedPassage(BaseModel):
    """Where a sentence of the answer stands in a source: offsets into its stored text.

    The same offsets `GET /v1/research/{id}/sources/{n}` gives a report sentence's quote.
    """

    n: int = Field(description="The source's number: a report footnote, or one after them.")
    start: int = Field(description="Where the passage starts in the source's text (characters).")
    end: int = Field(description="Where it ends (exclusive).")
    support: float = Field(description="Share of the sentence's words the passage holds, 0..1.")


class AnswerSentence(BaseModel):
    """One sentence of an answer and the passages it cites."""

    text: str
    citations: list[CitedPassage]


class AnswerSource(BaseModel):
    """A source an answer cites: `GET .../sources/{n}` gives its text."""

    n: int
    title: str
    url: str
    in_report: bool = Field(description="Whether the report cites it as footnote `n`.")


class QuestionAnswer(BaseModel):
    """A question asked of a finished thread, and its answer."""

    id: int = Field(description="The question's number on the thread, from 1.")
    question: str
    asked_at: datetime = Field(default_factory=utcnow)
    status: AnswerStatus = Field(
        description="answered, or not_in_evidence when the run's evidence holds no answer."
    )
    answer: str = Field(description="The answer as Markdown, each sentence ending in `[^n]`.")
    sentences: list[AnswerSentence] = Field(default_factory=list)
    sources: list[AnswerSource] = Field(default_factory=list)
    match: float = Field(
        description="How much of the question's own words the best passage holds "
        "(idf-weighted, 0..1): below the threshold the evidence holds no answer."
    )
    engine: str = Field(description="What answered: extractive, or the LLM engine's model.")
    dropped: int = Field(
        0,
        description="Sentences of the model's answer dropped as uncited or unsupported by "
        "the source they cite (LLM engine).",
    )
    research: str | None = Field(
        None,
        description="Not in the evidence: POST here to start a new run on the question, "
        "seeded with the thread's sources.",
    )
    research_thread: str | None = Field(
        None, description="The run started on the question, once one was."
    )
