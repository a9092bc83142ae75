"""The shapes of the LangGraph Platform API's answers, for `/openapi.json`.

They mirror `langgraph_sdk.schema` (Assistant, Thread, Run, ThreadState, ...) as this
service fills them. Documentation only: the routes build their JSON themselves (no
response model filters it), and the fuzz test checks the answers against these shapes.
Their schemas do not forbid other keys: the SDK's types may grow.
"""

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field


class PlatformError(BaseModel):
    """Every Platform error answer: what went wrong, in words."""

    detail: str


class Assistant(BaseModel):
    """The one assistant (graph `research`)."""

    assistant_id: str
    graph_id: str
    name: str
    description: str | None
    config: dict[str, Any]
    context: dict[str, Any]
    metadata: dict[str, Any]
    version: int
    created_at: datetime
    updated_at: datetime


class Interrupt(BaseModel):
    """A question a thread waits on (the plan to approve)."""

    value: Any
    id: str


class Thread(BaseModel):
    """A research thread."""

    thread_id: str
    created_at: datetime
    updated_at: datetime
    metadata: dict[str, Any]
    status: Literal["idle", "busy", "interrupted", "error"]
    values: dict[str, Any]
    interrupts: dict[str, list[Interrupt]]


class Run(BaseModel):  # type: ignore[no-redef]  # pydantic-mypy: the alias `kwargs` vs its **kwargs
    """One run (leg) of a thread."""

    run_id: str
    thread_id: str
    assistant_id: str
    created_at: datetime
    updated_at: datetime
    status: Literal["pending", "running", "error", "success", "timeout", "interrupted"]
    metadata: dict[str, Any]
    multitask_strategy: Literal["reject", "interrupt", "rollback", "enqueue"]
    request: dict[str, Any] = Field(alias="kwargs", description="What the run was asked to do.")


class Checkpoint(BaseModel):
    """Where a state was saved."""

    thread_id: str | None
    checkpoint_ns: str
    checkpoint_id: str | None
    checkpoint_map: dict[str, Any] | None


class Task(BaseModel):
    """A step the thread will run next, or waits in."""

    id: str
    name: str
    error: str | None
    interrupts: list[Interrupt]
    checkpoint: Checkpoint | None
    state: dict[str, Any] | None
    result: Any


class ThreadState(BaseModel):
    """A thread's state at one checkpoint."""

    values: dict[str, Any]
    next: list[str]
    checkpoint: Checkpoint | None
    metadata: dict[str, Any]
    created_at: str | None
    parent_checkpoint: Checkpoint | None
    tasks: list[Task]
    interrupts: list[Interrupt]


class StateWritten(BaseModel):
    """The checkpoint a state update wrote."""

    checkpoint: Checkpoint | None


class GraphSchemas(BaseModel):
    """What a run's input and a resume take."""

    graph_id: str
    input_schema: dict[str, Any] | None
    output_schema: dict[str, Any] | None
    state_schema: dict[str, Any] | None
    config_schema: dict[str, Any] | None
    context_schema: dict[str, Any] | None
    resume_schema: dict[str, Any] | None


def _error(description: str) -> dict[str, Any]:
    return {"model": PlatformError, "description": description}


# The error answers every Platform route may give.
PLATFORM_ERRORS: dict[int | str, dict[str, Any]] = {
    401: _error("no valid API key"),
    404: _error("no such assistant, thread, run or checkpoint for this key"),
    409: _error("the thread's state does not allow this (busy, already there)"),
    413: _error("the body is over the size limit"),
    415: _error("the body is not sent as JSON"),
    422: _error("the request is malformed"),
    429: _error("the run queue is full"),
    503: _error("a store does not answer, or too many streams are open"),
}


def doc(model: Any, description: str = "Success") -> dict[str, Any]:
    """A route's decorator arguments: its 200 answer documented as `model`, not filtered."""
    return {
        "response_model": None,
        "responses": {200: {"model": model, "description": description}},
    }


# A run's stream: Server-Sent Events named by stream mode (`metadata` first, `end` last).
STREAMED: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "Server-Sent Events: metadata, a chunk per stream mode, end",
        "content": {"text/event-stream": {}},
    }
}
