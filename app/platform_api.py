"""The LangGraph Platform API, so that `langgraph_sdk` and RemoteGraph clients work unchanged.

Mounted by the same app under the paths the SDK uses, on the same run manager, event
log, registry, auth and checkpointer as `/v1/research`. One assistant, graph `research`.
A thread is a research thread: its first run's `input` is a research request
(`{"topic": ..., "options": {...}}`), and a run with `command={"resume": decision}`
answers the plan approval it waits on. A run streams `metadata`, then one event per
chunk of each stream mode asked for (`values`, `updates`, `custom`, `messages-tuple`,
`debug`), `error` if it failed, and `end`; every event has an id for `Last-Event-ID`.

This module holds what its clients send (the request bodies, checked at the edge) and
the one assistant's ids; the routes are in `platform_assistants`, `platform_threads` and
`platform_runs_api`, the JSON they answer with in `platform_json`.
"""

import re
import uuid
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    field_validator,
)
from pydantic_core import to_json

from core.models import ApprovalDecision
from core.options import ResearchRequest, json_number
from service.errors import NotFound
from service.legs import Admission, RunInput
from service.platform_runs import STREAM_MODES
from service.thread_ids import CLIENT_ID, CLIENT_ID_RULE, check_client_id

GRAPH_ID = "research"
ASSISTANT_ID = str(uuid.uuid5(uuid.NAMESPACE_URL, "research-agent/graphs/research"))


def check_assistant(assistant_id: str) -> None:
    """NotFound unless `assistant_id` names the one assistant (by its id or graph id)."""
    if assistant_id not in (ASSISTANT_ID, GRAPH_ID):
        raise NotFound(f"no assistant {assistant_id!r}: the one assistant is {GRAPH_ID!r}")


# Free-form JSON a client sends (metadata, config, filters): how deep it may nest, and how
# large a thread's or run's metadata may be (stored with every record, sent with every
# listing).
MAX_JSON_DEPTH = 16
MAX_METADATA_BYTES = 16 * 1024


def _depth(value: Any) -> int:
    """How deep `value` nests (iterative: a hostile value must not exhaust the stack)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, level)
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, level + 1) for child in children)
    return deepest


def _shallow(value: Any) -> Any:
    if _depth(value) > MAX_JSON_DEPTH:
        raise ValueError(f"nests deeper than {MAX_JSON_DEPTH} levels")
    return value


def _small(value: Any) -> Any:
    size = len(to_json(value))
    if size > MAX_METADATA_BYTES:
        raise ValueError(f"is {size} bytes as JSON; the limit is {MAX_METADATA_BYTES}")
    return value


# Checked before pydantic walks the value, so nothing deep or large reaches a store.
FreeJSON = Annotated[dict[str, Any], BeforeValidator(_shallow)]
Metadata = Annotated[dict[str, Any], AfterValidator(_small), BeforeValidator(_shallow)]


# A count in a body: an integer as JSON Schema has it (5 or 5.0; not true, not "5").
Count = Annotated[int, BeforeValidator(json_number)]


class _Lenient(BaseModel):
    """SDK bodies carry options this service has no use for: they are accepted, unused."""

    model_config = ConfigDict(extra="ignore")


class ThreadCreate(_Lenient):
    """POST /threads."""

    thread_id: str | None = Field(
        None,
        description=f"An id of your choosing: {CLIENT_ID_RULE}.",
        json_schema_extra={"pattern": f"^{CLIENT_ID.pattern}$"},
    )
    metadata: Metadata = Field(default_factory=dict)
    if_exists: Literal["raise", "do_nothing"] = "raise"

    @field_validator("thread_id")
    @classmethod
    def _client_id(cls, value: str | None) -> str | None:
        return None if value is None else check_client_id(value)


class ThreadPatch(_Lenient):
    """PATCH /threads/{id}."""

    metadata: Metadata = Field(default_factory=dict)


class ThreadSearch(_Lenient):
    """POST /threads/search."""

    metadata: Metadata | None = None
    status: Literal["idle", "busy", "interrupted", "error"] | None = None
    limit: Count = Field(10, ge=1, le=1000)
    offset: Count = Field(0, ge=0)


# The keys a checkpoint's metadata can be filtered by: what the SQLite saver takes (it
# refuses any other with a ValueError, as its guard against SQL injection).
FILTER_KEY = r"^[a-zA-Z0-9_.-]+$"


class HistoryQuery(_Lenient):
    """POST /threads/{id}/history."""

    limit: Count = Field(10, ge=1, le=1000)
    before: FreeJSON | None = None
    metadata: Metadata | None = Field(
        None, json_schema_extra={"propertyNames": {"pattern": FILTER_KEY}}
    )

    @field_validator("metadata")
    @classmethod
    def _filter_keys(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        for key in value or {}:
            if re.match(FILTER_KEY, key) is None:
                raise ValueError(
                    f"metadata filter key {key[:40]!r}: use letters, digits, '_', '.' and '-' only"
                )
        return value


class CheckpointQuery(_Lenient):
    """POST /threads/{id}/state/checkpoint."""

    checkpoint: FreeJSON = Field(default_factory=dict)


class StateUpdate(_Lenient):
    """POST /threads/{id}/state."""

    values: FreeJSON | None = None
    as_node: str | None = None
    checkpoint: FreeJSON | None = None
    checkpoint_id: str | None = None


class AssistantSearch(_Lenient):
    """POST /assistants/search."""

    graph_id: str | None = None
    limit: Count = Field(10, ge=1, le=1000)
    offset: Count = Field(0, ge=0)


# The stream modes served (`service.platform_runs.STREAM_MODES`), as the schema names them.
StreamModeName = Literal["values", "updates", "custom", "messages-tuple", "debug"]
assert set(get_args(StreamModeName)) == set(STREAM_MODES)


class Command(BaseModel):
    """A run's command: only `resume`, the answer to the question the thread waits on."""

    model_config = ConfigDict(extra="forbid")

    resume: ApprovalDecision


class RunCreate(_Lenient):
    """The body of every run-starting call.

    Its fields are checked here, at the edge, so the published schema says what is
    accepted: a research request as `input`, an approval decision as `command.resume`.
    """

    assistant_id: str
    input: ResearchRequest | None = None
    command: Command | None = None
    metadata: Metadata = Field(default_factory=dict)
    config: FreeJSON | None = None
    context: FreeJSON | None = None
    stream_mode: StreamModeName | list[StreamModeName] = "values"
    stream_subgraphs: bool = False
    interrupt_before: list[str] | Literal["*"] | None = None
    interrupt_after: list[str] | Literal["*"] | None = None
    multitask_strategy: Literal["reject", "enqueue", "interrupt"] = "reject"
    on_disconnect: Literal["cancel", "continue"] = "continue"
    on_completion: Literal["delete", "keep"] = "delete"
    if_not_exists: Literal["reject", "create"] = "reject"

    @field_validator("stream_mode", mode="before")
    @classmethod
    def _known_modes(cls, value: Any) -> Any:
        asked = [value] if isinstance(value, str) else value
        if not isinstance(asked, list):
            return value  # not a mode nor a list: the type check says so
        if unknown := [m for m in asked if not (isinstance(m, str) and m in STREAM_MODES)]:
            raise ValueError(f"stream modes {unknown} are not served; use {sorted(STREAM_MODES)}")
        return value

    @field_validator("multitask_strategy", mode="before")
    @classmethod
    def _served_strategies(cls, value: Any) -> Any:
        if value == "rollback":
            raise ValueError(
                "multitask_strategy 'rollback' is not served: research already done is kept; "
                "use reject, enqueue or interrupt"
            )
        return value

    @field_validator("command", mode="before")
    @classmethod
    def _resume_only(cls, value: Any) -> Any:
        if isinstance(value, dict) and set(value) - {"resume"}:
            raise ValueError("only command.resume (an approval decision) is served")
        return value

    @property
    def stream_modes(self) -> list[str]:
        """The modes asked for, each once, in order."""
        modes = [self.stream_mode] if isinstance(self.stream_mode, str) else self.stream_mode
        return list(dict.fromkeys(modes))

    def admission(self, run_id: str) -> Admission:
        """What the run asks of the thread."""
        run_input = RunInput(
            run_id=run_id,
            stream_modes=self.stream_modes,
            interrupt_before=self.interrupt_before,
            interrupt_after=self.interrupt_after,
        )
        decision = self.command.resume if self.command is not None else None
        return Admission(request=self.input, decision=decision, run_input=run_input)

    def recorded(self) -> dict[str, Any]:
        """What the run's record keeps of this request (the SDK's `kwargs`)."""
        return self.model_dump(mode="json", include=_KWARGS, exclude_none=True)


# What a run record keeps of its request (the SDK's `kwargs`).
_KWARGS = {
    "input",
    "command",
    "config",
    "context",
    "stream_mode",
    "interrupt_before",
    "interrupt_after",
    "on_disconnect",
}
