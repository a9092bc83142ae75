"""What a leg of a research run is: its input (small enough for a queue job) and its stop."""

from dataclasses import dataclass
from typing import Any, Literal

from langgraph.types import StateSnapshot
from pydantic import BaseModel, Field

from core.models import ApprovalDecision
from core.options import ResearchRequest
from core.state import ReportStatus


class RunInput(BaseModel):
    """What a leg starts with, small enough to travel in a queue job.

    `decision` answers the approval the thread waited on at checkpoint `after`. Once the
    thread has moved past that checkpoint the answer is already applied, and a second
    delivery of the same leg only continues.
    """

    decision: dict[str, Any] | None = None
    after: str | None = None
    # Taken up after its executor stopped or died: said so in the run's status event.
    recovered: bool = False
    # A LangGraph Platform run: its id, the stream modes it asked for, where to stop.
    run_id: str | None = None
    stream_modes: list[str] = Field(default_factory=list)
    interrupt_before: list[str] | Literal["*"] | None = None
    interrupt_after: list[str] | Literal["*"] | None = None


class Admission(BaseModel):
    """A Platform run's work: a new thread's topic, an answer, or (neither) a continuation."""

    request: ResearchRequest | None = None
    decision: ApprovalDecision | None = None
    run_input: RunInput = Field(default_factory=RunInput)


@dataclass
class LegStop:
    """How a leg's stream ended; none of these set: the graph finished."""

    paused: bool = False  # by a pause request, at a node boundary
    interrupted: bool = False  # by an interrupt (a question, or interrupt_before/after)
    question: dict[str, Any] | None = None  # what the thread waits to have answered
    report: ReportStatus | None = None  # the status of the report finalize wrote, if it did


def checkpoint_id(snapshot: StateSnapshot) -> str | None:
    """The id of the checkpoint a snapshot was read from; None for a thread never run."""
    value = snapshot.config.get("configurable", {}).get("checkpoint_id")
    return str(value) if value else None


# Stream modes whose chunks carry the thread's config (debug checkpoints, message
# metadata): the client knows its thread by its own id, not the stored one.
CONFIG_MODES = frozenset({"debug", "messages"})


def renamed(value: Any, stored: str, public: str) -> Any:
    """`value` with every string `stored` in its dicts, lists and tuples replaced by `public`."""
    if isinstance(value, str):
        return public if value == stored else value
    if isinstance(value, dict):
        return {key: renamed(item, stored, public) for key, item in value.items()}
    if isinstance(value, list | tuple):
        items = [renamed(item, stored, public) for item in value]
        if hasattr(value, "_fields"):  # a named tuple takes its fields one by one
            return type(value)(*items)
        return type(value)(items)
    return value
