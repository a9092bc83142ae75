"""What an engine spent and where it fell back, collected for the node that called it.

A context variable carries the recorder (and the run's deadline), so concurrent nodes and
runs never see each other's figures and the Engine protocol needs no bookkeeping parameters.
"""

import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


class ModelCall(_Frozen):
    """One request to a model: each attempt of a retried call, each round of a repaired one."""

    role: str
    model: str
    input_tokens: int = 0
    output_tokens: int = 0
    seconds: float = 0.0
    cost_usd: float = 0.0
    error: str | None = None
    first: bool = True  # the first attempt of a call (retries are requests, not calls)
    estimated: bool = False  # the server sent no usage: tokens counted from the text's length
    reported_model: str | None = None  # the model id the server answered with
    template: str | None = None  # the prompt template's name (`prompts.template_of`)
    template_version: str | None = None
    params: dict[str, Any] = Field(default_factory=dict)  # temperature, max_tokens, ...


class Fallback(_Frozen):
    """A step the engine could not do with its model and did deterministically instead."""

    step: str
    reason: str


class Repair(_Frozen):
    """A structured answer that did not fit and was asked for again, with what was wrong."""

    step: str
    error: str


class StructuredOutput(_Frozen):
    """How a model was asked for structured answers, and which ways its server refused."""

    model: str
    method: str
    refused: dict[str, str]


class Recorded(BaseModel):
    """What a recorder collected, as data: a step checkpointed part by part sums these."""

    calls: list[ModelCall] = Field(default_factory=list)
    fallbacks: list[Fallback] = Field(default_factory=list)
    repairs: list[Repair] = Field(default_factory=list)
    structured: list[StructuredOutput] = Field(default_factory=list)


@dataclass(slots=True)
class Recorder:
    """The model calls, fallbacks, repairs and structured-output methods of one node step."""

    calls: list[ModelCall] = field(default_factory=list)
    fallbacks: list[Fallback] = field(default_factory=list)
    structured: dict[str, StructuredOutput] = field(default_factory=dict)
    repairs: list[Repair] = field(default_factory=list)
    deadline: float | None = None  # time.monotonic() when the run's time budget ends
    # Time spent on the step by an earlier attempt (a worker that died) whose work it kept.
    earlier_seconds: float = 0.0
    # Tells this attempt at the step from earlier ones, whose records a checkpoint kept.
    attempt: str = field(default_factory=lambda: uuid.uuid4().hex)

    def recorded(self) -> Recorded:
        """Return what was recorded so far, as data."""
        return Recorded(
            calls=list(self.calls),
            fallbacks=list(self.fallbacks),
            repairs=list(self.repairs),
            structured=list(self.structured.values()),
        )

    def add(self, recorded: Recorded) -> None:
        """Add what a part of the step recorded on its own, in the order it happened."""
        self.calls.extend(recorded.calls)
        self.fallbacks.extend(recorded.fallbacks)
        self.repairs.extend(recorded.repairs)
        for chosen in recorded.structured:  # the last one counts, as with record_structured
            self.structured[chosen.model] = chosen


_current: ContextVar[Recorder | None] = ContextVar("engine_recorder", default=None)


@contextmanager
def recording(deadline: float | None = None) -> Iterator[Recorder]:
    """Collect what the engine reports inside the block (tasks started inside share it)."""
    recorder = Recorder(deadline=deadline)
    token = _current.set(recorder)
    try:
        yield recorder
    finally:
        _current.reset(token)


def time_left() -> float | None:
    """Seconds until the run's time budget ends (None: no budget known here)."""
    deadline = current_deadline()
    return None if deadline is None else deadline - time.monotonic()


def record_call(call: ModelCall) -> None:
    """Report a model call to the node's recorder (dropped when nobody records)."""
    if recorder := _current.get():
        recorder.calls.append(call)


def record_fallback(step: str, reason: str) -> None:
    """Report that `step` fell back to the deterministic engine, and why."""
    if recorder := _current.get():
        recorder.fallbacks.append(Fallback(step=step, reason=reason))


def record_structured(model: str, method: str, refused: dict[str, str]) -> None:
    """Report which way `model` was asked for a structured answer (the last one counts)."""
    if recorder := _current.get():
        recorder.structured[model] = StructuredOutput(
            model=model, method=method, refused=dict(refused)
        )


def record_repair(step: str, error: str) -> None:
    """Report that `step`'s structured answer did not fit and gets its repair round."""
    if recorder := _current.get():
        recorder.repairs.append(Repair(step=step, error=error))


def current_deadline() -> float | None:
    """Return when the run's time budget ends (`time.monotonic()`); None if nobody records."""
    recorder = _current.get()
    return recorder.deadline if recorder is not None else None


def current_recorder() -> Recorder | None:
    """Return the recorder of the node step running here (None: nobody records)."""
    return _current.get()
