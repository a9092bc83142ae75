"""What a caller may choose for a run: the topic, the limits and where a human approves."""

import re
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    WithJsonSchema,
    field_validator,
)

from core.models import non_blank

TOPIC_MAX_CHARS = 2000
# The most collections a run may search, and how a collection is named (an id or a name).
MAX_RUN_COLLECTIONS = 10
COLLECTION_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9 _.-]{0,63}$"
CollectionRef = Annotated[str, Field(pattern=COLLECTION_NAME_PATTERN)]
# A letter or a digit in any script (Python's `re`, as the schema's generators read it).
_WORDS = r"[^\W_]"


def _has_words(topic: str) -> str:
    if re.search(_WORDS, topic) is None:
        raise ValueError("the topic has no words to research: say what to research in words")
    return topic


Topic = Annotated[
    str,
    non_blank(TOPIC_MAX_CHARS),
    AfterValidator(_has_words),
    WithJsonSchema(
        {"type": "string", "minLength": 1, "maxLength": TOPIC_MAX_CHARS, "pattern": _WORDS}
    ),
]
Approval = Literal["none", "plan", "plan_and_report"]


def json_number(value: object) -> object:
    """Return `value` if JSON Schema calls it a number (5 and 5.0, not true or "5"): a before-validator."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError("must be a number")
    return value


class RunOptions(BaseModel):
    """Per-run limits a caller may choose, within the server's bounds."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_iterations: int = Field(
        5, ge=1, le=20, description="Researcher, writer and reviewer steps, each counts one."
    )
    min_sources: int = Field(
        5, ge=1, le=100, description="Sources to collect before the first draft."
    )
    max_results: int = Field(5, ge=1, le=20, description="Search results per query.")
    approval: Approval = Field(
        "none", description="Where a human must approve: nowhere, the plan, or plan and report."
    )
    time_budget_s: float = Field(
        600.0, ge=1, le=86_400, description="Active time budget in seconds."
    )
    max_tokens: int | None = Field(
        None, ge=1, description="Model token budget of the run (input + output); none: no cap."
    )
    max_cost_usd: float | None = Field(
        None, gt=0, description="Estimated model cost budget of the run in US dollars."
    )
    collections: list[CollectionRef] = Field(
        default_factory=list,
        max_length=MAX_RUN_COLLECTIONS,
        description="The caller's document collections (ids or names) the run searches, "
        "beside the server's search providers (`/v1/collections`).",
    )
    collections_only: bool = Field(
        False,
        description="Search only `collections`, not the server's search providers "
        "(without collections it changes nothing).",
    )

    @field_validator(
        "max_iterations",
        "min_sources",
        "max_results",
        "time_budget_s",
        "max_tokens",
        "max_cost_usd",
        mode="before",
    )
    @classmethod
    def _json_number(cls, value: object) -> object:
        return value if value is None else json_number(value)


class ResearchRequest(BaseModel):
    """What a caller asks for: validated at the edge, before anything is written."""

    model_config = ConfigDict(extra="forbid")

    topic: Topic
    options: RunOptions = Field(default_factory=RunOptions)
