"""The LangGraph Platform API, so that `langgraph_sdk` and RemoteGraph clients work unchanged.

Mounted by the same app under the paths the SDK uses, on the same run manager, event
log, registry, auth and checkpointer as `/v1/research`. One assistant, graph `research`.
A thread is a research thread: its first run's `input` is a research request
(`{"topic": ..., "options": {...}}`), and a run with `command={"resume": decision}`
answers the plan approval it waits on. A run streams `metadata`, then one event per
chunk of each stream mode asked for (`values`, `updates`, `custom`, `messages-tuple`,
`debug`), `error` if it failed, and `end`; every event has an id for `Last-Event-ID`.
"""

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Annotated, Any, Literal, get_args

from fastapi import APIRouter, Depends, Header, Query, Response
from langchain_core.runnables import RunnableConfig
from langgraph.types import PregelTask, StateSnapshot
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    field_validator,
)
from pydantic_core import to_json
from sse_starlette import EventSourceResponse

from app.auth import stored_id_dependency
from app.edge import StreamSlots, StrictJSONRoute
from app.platform_schema import (
    PLATFORM_ERRORS,
    STREAMED,
    Assistant,
    GraphSchemas,
    Run,
    StateWritten,
    Thread,
    ThreadState,
    doc,
)
from core.models import ApprovalDecision
from core.options import ResearchRequest
from service.errors import InvalidState, NotFound
from service.legs import Admission, RunInput
from service.platform_runs import (
    END_EVENT,
    STREAM_MODES,
    PlatformRun,
    jsonable,
    stream_key,
    thread_status,
)
from service.runner import thread_config
from service.runs import RunManager
from service.thread_ids import (
    CLIENT_ID,
    CLIENT_ID_RULE,
    check_client_id,
    is_client_id,
    public_id,
)
from stores.events import EventLog, event_id, resume_point
from stores.registry import ThreadRecord

GRAPH_ID = "research"
ASSISTANT_ID = str(uuid.uuid5(uuid.NAMESPACE_URL, "research-agent/graphs/research"))
_CREATED = datetime(2026, 1, 1, tzinfo=UTC)
HEARTBEAT_S = 15
# How far `threads/search` reads the registry, page by page, for its filters.
_SEARCH_PAGE = 100

ManagerGetter = Callable[[], RunManager]
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
    limit: int = Field(10, ge=1, le=1000)
    offset: int = Field(0, ge=0)


class HistoryQuery(_Lenient):
    """POST /threads/{id}/history."""

    limit: int = Field(10, ge=1, le=1000)
    before: FreeJSON | None = None
    metadata: Metadata | None = None


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
    limit: int = Field(10, ge=1, le=1000)
    offset: int = Field(0, ge=0)


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


def assistant_json() -> dict[str, Any]:
    """The one assistant, as the SDK reads it."""
    return {
        "assistant_id": ASSISTANT_ID,
        "graph_id": GRAPH_ID,
        "name": GRAPH_ID,
        "description": "Deep research: plan, search, write a cited report, review it.",
        "config": {},
        "context": {},
        "metadata": {},
        "version": 1,
        "created_at": _CREATED.isoformat(),
        "updated_at": _CREATED.isoformat(),
    }


def _checkpoint(config: Any) -> dict[str, Any] | None:
    if not config:
        return None
    configurable = config.get("configurable", {})
    thread_id = configurable.get("thread_id")
    return {
        "thread_id": public_id(thread_id) if thread_id else thread_id,
        "checkpoint_ns": configurable.get("checkpoint_ns", ""),
        "checkpoint_id": configurable.get("checkpoint_id"),
        "checkpoint_map": configurable.get("checkpoint_map"),
    }


def _task_interrupts(task: PregelTask) -> list[dict[str, Any]]:
    """A task's pending interrupts as the SDK reads them."""
    return [{"value": jsonable(i.value), "id": i.id} for i in task.interrupts]


def _interrupts(snapshot: StateSnapshot) -> list[dict[str, Any]]:
    return [i for task in snapshot.tasks for i in _task_interrupts(task)]


def state_json(snapshot: StateSnapshot) -> dict[str, Any]:
    """A checkpoint as the SDK's ThreadState."""
    return {
        "values": jsonable(snapshot.values or {}),
        "next": list(snapshot.next),
        "checkpoint": _checkpoint(snapshot.config),
        "metadata": jsonable(snapshot.metadata or {}),
        "created_at": snapshot.created_at,
        "parent_checkpoint": _checkpoint(snapshot.parent_config),
        "tasks": [
            {
                "id": task.id,
                "name": task.name,
                "error": repr(task.error) if task.error else None,
                "interrupts": _task_interrupts(task),
                "checkpoint": None,
                "state": None,
                "result": jsonable(task.result) if task.result is not None else None,
            }
            for task in snapshot.tasks
        ],
        "interrupts": _interrupts(snapshot),
    }


def run_json(run: PlatformRun) -> dict[str, Any]:
    """A run as the SDK reads it."""
    body = run.model_dump(mode="json", exclude={"request", "enqueued"})
    return body | {"thread_id": public_id(run.thread_id), "kwargs": run.request}


def _matches(metadata: dict[str, Any], wanted: dict[str, Any] | None) -> bool:
    return not wanted or all(metadata.get(k) == v for k, v in wanted.items())


def platform_router(
    manager: ManagerGetter, owner_dependency: Any, streams: StreamSlots
) -> APIRouter:
    """The Platform API's routes, bound to the app's run manager and auth."""
    router = APIRouter(
        tags=["langgraph platform"], responses=PLATFORM_ERRORS, route_class=StrictJSONRoute
    )
    Owner = Annotated[str, Depends(owner_dependency)]
    # A path's thread id, as the caller's stored thread (NotFound for any other).
    ThreadKey = Annotated[str, Depends(stored_id_dependency(manager, owner_dependency))]

    async def thread_json(record: ThreadRecord) -> dict[str, Any]:
        snapshot = await manager().graph.aget_state(thread_config(record.thread_id))
        interrupts = {t.id: _task_interrupts(t) for t in snapshot.tasks if t.interrupts}
        return {
            "thread_id": public_id(record.thread_id),
            "created_at": record.created_at.isoformat(),
            "updated_at": record.updated_at.isoformat(),
            "metadata": record.metadata,
            "status": thread_status(record.status),
            "values": jsonable(snapshot.values or {}),
            "interrupts": interrupts,
        }

    def check_assistant(assistant_id: str) -> None:
        if assistant_id not in (ASSISTANT_ID, GRAPH_ID):
            raise NotFound(f"no assistant {assistant_id!r}: the one assistant is {GRAPH_ID!r}")

    # -- assistants ----------------------------------------------------------------------

    @router.post("/assistants/search", **doc(list[Assistant]))
    async def search_assistants(body: AssistantSearch, owner: Owner) -> list[dict[str, Any]]:
        """The one assistant (graph `research`), if it matches."""
        found = [assistant_json()] if body.graph_id in (None, GRAPH_ID) else []
        return found[body.offset : body.offset + body.limit]

    @router.get("/assistants/{assistant_id}", **doc(Assistant))
    async def get_assistant(assistant_id: str, owner: Owner) -> dict[str, Any]:
        """The assistant, by its id or its graph id."""
        check_assistant(assistant_id)
        return assistant_json()

    @router.get("/assistants/{assistant_id}/graph", **doc(dict[str, Any]))
    async def get_assistant_graph(assistant_id: str, owner: Owner) -> dict[str, Any]:
        """The graph's nodes and edges."""
        check_assistant(assistant_id)
        drawable: dict[str, Any] = manager().graph.get_graph().to_json()
        return drawable

    @router.get("/assistants/{assistant_id}/schemas", **doc(GraphSchemas))
    async def get_assistant_schemas(assistant_id: str, owner: Owner) -> dict[str, Any]:
        """What a run's input takes (a research request) and what a decision looks like."""
        check_assistant(assistant_id)
        return {
            "graph_id": GRAPH_ID,
            "input_schema": ResearchRequest.model_json_schema(),
            "output_schema": None,
            "state_schema": None,
            "config_schema": None,
            "context_schema": None,
            "resume_schema": ApprovalDecision.model_json_schema(),
        }

    # -- threads -------------------------------------------------------------------------

    @router.post("/threads", **doc(Thread))
    async def create_thread(body: ThreadCreate, owner: Owner) -> dict[str, Any]:
        """A new thread, waiting for its first run."""
        record = await manager().create_thread(owner, body.thread_id, body.metadata, body.if_exists)
        return await thread_json(record)

    @router.get("/threads/{thread_id}", **doc(Thread))
    async def get_thread(thread_id: ThreadKey, owner: Owner) -> dict[str, Any]:
        """The thread: status, metadata, values, pending interrupts."""
        return await thread_json(await manager().get(owner, thread_id))

    @router.patch("/threads/{thread_id}", **doc(Thread))
    async def patch_thread(thread_id: ThreadKey, body: ThreadPatch, owner: Owner) -> dict[str, Any]:
        """Merge metadata into the thread's."""
        return await thread_json(await manager().merge_metadata(owner, thread_id, body.metadata))

    @router.delete("/threads/{thread_id}", status_code=204)
    async def delete_thread(thread_id: ThreadKey, owner: Owner) -> Response:
        """Remove the thread, its runs, checkpoints and events."""
        await manager().delete(owner, thread_id)
        return Response(status_code=204)

    @router.post("/threads/search", **doc(list[Thread]))
    async def search_threads(body: ThreadSearch, owner: Owner) -> list[dict[str, Any]]:
        """The caller's threads, newest first, filtered by status and metadata."""
        wanted: list[ThreadRecord] = []
        cursor: str | None = None
        while len(wanted) < body.offset + body.limit:
            page, cursor = await manager().registry.list(owner, _SEARCH_PAGE, cursor)
            wanted += [
                r
                for r in page
                if _matches(r.metadata, body.metadata)
                and (body.status is None or thread_status(r.status) == body.status)
            ]
            if cursor is None:
                break
        chosen = wanted[body.offset : body.offset + body.limit]
        return list(await asyncio.gather(*(thread_json(r) for r in chosen)))

    @router.get("/threads/{thread_id}/state", **doc(ThreadState))
    async def get_state(thread_id: ThreadKey, owner: Owner) -> dict[str, Any]:
        """The thread's latest checkpoint."""
        return state_json(await manager().graph.aget_state(thread_config(thread_id)))

    @router.post("/threads/{thread_id}/state", **doc(StateWritten))
    async def update_state(thread_id: ThreadKey, body: StateUpdate, owner: Owner) -> dict[str, Any]:
        """Edit an idle thread's state (as node `as_node`); answers the new checkpoint."""
        at = body.checkpoint_id or (body.checkpoint or {}).get("checkpoint_id")
        written = await manager().update_state(owner, thread_id, body.values, body.as_node, at)
        return {"checkpoint": _checkpoint(written)}

    async def state_at(thread_id: str, checkpoint_id: str | None) -> dict[str, Any]:
        config = thread_config(thread_id)
        if checkpoint_id:
            config["configurable"]["checkpoint_id"] = checkpoint_id
        snapshot = await manager().graph.aget_state(config)
        if (
            checkpoint_id
            and snapshot.config.get("configurable", {}).get("checkpoint_id") != checkpoint_id
        ):
            raise NotFound(f"no checkpoint {checkpoint_id!r} on thread {public_id(thread_id)!r}")
        return state_json(snapshot)

    @router.get("/threads/{thread_id}/state/{checkpoint_id}", **doc(ThreadState))
    async def get_state_at(
        thread_id: ThreadKey, checkpoint_id: str, owner: Owner
    ) -> dict[str, Any]:
        """The thread's state at one checkpoint."""
        return await state_at(thread_id, checkpoint_id)

    @router.post("/threads/{thread_id}/state/checkpoint", **doc(ThreadState))
    async def post_state_at(
        thread_id: ThreadKey, body: CheckpointQuery, owner: Owner
    ) -> dict[str, Any]:
        """The thread's state at the checkpoint given (the latest without an id)."""
        return await state_at(thread_id, body.checkpoint.get("checkpoint_id"))

    @router.post("/threads/{thread_id}/history", **doc(list[ThreadState]))
    async def get_history(
        thread_id: ThreadKey, body: HistoryQuery, owner: Owner
    ) -> list[dict[str, Any]]:
        """The thread's checkpoints, newest first."""
        before: RunnableConfig | None = {"configurable": body.before} if body.before else None
        snapshots = manager().graph.aget_state_history(
            thread_config(thread_id), limit=body.limit, before=before, filter=body.metadata
        )
        return [state_json(s) async for s in snapshots]

    # -- runs ----------------------------------------------------------------------------

    async def start_run(owner: str, thread_id: str, body: RunCreate) -> PlatformRun:
        check_assistant(body.assistant_id)
        run_id = str(uuid.uuid4())
        admission = body.admission(run_id)
        now = datetime.now(UTC)
        run = PlatformRun(
            run_id=run_id,
            thread_id=thread_id,
            assistant_id=ASSISTANT_ID,
            created_at=now,
            updated_at=now,
            metadata=body.metadata,
            multitask_strategy=body.multitask_strategy,
            request=body.model_dump(mode="json", include=_KWARGS, exclude_none=True),
        )
        await manager().start_platform_run(owner, run, admission)
        return run

    async def own_run(thread_id: str, run_id: str) -> PlatformRun:
        """The run of a thread already resolved as the caller's (`ThreadKey`)."""
        run = await manager().executor.platform.get(thread_id, run_id)
        if run is None:
            raise NotFound(f"no run {run_id!r} on thread {public_id(thread_id)!r}")
        return run

    def stream_response(
        owner: str,
        run: PlatformRun,
        after: int | None = 0,
        on_disconnect: str = "continue",
        then_delete: bool = False,
    ) -> EventSourceResponse:
        async def frames() -> AsyncIterator[dict[str, str]]:
            if after is None:  # the run's stream ended before the client's position
                return
            ended = False
            try:
                async for event in manager().events.follow(stream_key(run.run_id), after):
                    yield {"id": str(event.id), "event": event.name, "data": event.text}
                    if event.name == END_EVENT:
                        ended = True
                        return
            finally:
                if not ended and on_disconnect == "cancel":
                    _background(_cancel_quietly(manager(), owner, run))
                if then_delete:
                    _background(_delete_after(manager(), owner, run))

        headers = {"Content-Location": f"/threads/{public_id(run.thread_id)}/runs/{run.run_id}"}
        streams.check()
        return EventSourceResponse(streams.counted(frames()), ping=HEARTBEAT_S, headers=headers)

    async def values_of(thread_id: str) -> dict[str, Any]:
        snapshot = await manager().graph.aget_state(thread_config(thread_id))
        result: dict[str, Any] = jsonable(snapshot.values or {})
        if interrupts := _interrupts(snapshot):
            result["__interrupt__"] = interrupts
        return result

    async def thread_for(owner: str, thread_id: str, body: RunCreate) -> str:
        """The stored id of the path's thread, created first if the run asks for that."""
        if body.if_not_exists == "create" and is_client_id(thread_id):
            record = await manager().create_thread(owner, thread_id, {}, "do_nothing")
            return record.thread_id
        return await manager().resolve(owner, thread_id)

    @router.post("/threads/{thread_id}/runs", **doc(Run))
    async def create_run(thread_id: str, body: RunCreate, owner: Owner) -> dict[str, Any]:
        """Start a run in the background."""
        return run_json(await start_run(owner, await thread_for(owner, thread_id, body), body))

    @router.post(
        "/threads/{thread_id}/runs/stream", response_class=EventSourceResponse, responses=STREAMED
    )
    async def stream_run(thread_id: str, body: RunCreate, owner: Owner) -> EventSourceResponse:
        """Start a run and stream it."""
        streams.check()  # before the run starts: a refused stream starts nothing
        run = await start_run(owner, await thread_for(owner, thread_id, body), body)
        return stream_response(owner, run, on_disconnect=body.on_disconnect)

    @router.post("/threads/{thread_id}/runs/wait", **doc(dict[str, Any], "The thread's values"))
    async def wait_run(thread_id: str, body: RunCreate, owner: Owner) -> dict[str, Any]:
        """Start a run and answer with the thread's values once it ends."""
        stored = await thread_for(owner, thread_id, body)
        run = await start_run(owner, stored, body)
        await until_end(manager().events, run.run_id)
        return await values_of(stored)

    @router.post("/runs/stream", response_class=EventSourceResponse, responses=STREAMED)
    async def stream_stateless(body: RunCreate, owner: Owner) -> EventSourceResponse:
        """A run on a thread of its own, removed once the run ends (`on_completion`)."""
        streams.check()
        record = await manager().create_thread(owner, None, {}, "raise")
        run = await start_run(owner, record.thread_id, body)
        return stream_response(
            owner, run, on_disconnect=body.on_disconnect, then_delete=body.on_completion == "delete"
        )

    @router.post("/runs/wait", **doc(dict[str, Any], "The thread's values"))
    async def wait_stateless(body: RunCreate, owner: Owner) -> dict[str, Any]:
        """A run on a thread of its own; answers with its final values."""
        record = await manager().create_thread(owner, None, {}, "raise")
        run = await start_run(owner, record.thread_id, body)
        await until_end(manager().events, run.run_id)
        values = await values_of(record.thread_id)
        if body.on_completion == "delete":
            await manager().delete(owner, record.thread_id)
        return values

    @router.get("/threads/{thread_id}/runs", **doc(list[Run]))
    async def list_runs(
        thread_id: ThreadKey,
        owner: Owner,
        limit: Annotated[int, Query(ge=1, le=1000)] = 10,
        offset: Annotated[int, Query(ge=0)] = 0,
    ) -> list[dict[str, Any]]:
        """The thread's runs, newest first."""
        runs = await manager().executor.platform.list(thread_id)
        return [run_json(r) for r in runs[offset : offset + limit]]

    @router.get("/threads/{thread_id}/runs/{run_id}", **doc(Run))
    async def get_run(thread_id: ThreadKey, run_id: str, owner: Owner) -> dict[str, Any]:
        """One run."""
        return run_json(await own_run(thread_id, run_id))

    @router.post(
        "/threads/{thread_id}/runs/{run_id}/cancel",
        status_code=202,
        responses={202: {"description": "Cancelled"}, 204: {"description": "Cancelled (wait)"}},
    )
    async def cancel_run(
        thread_id: ThreadKey, run_id: str, owner: Owner, wait: bool = False
    ) -> Response:
        """Cancel the run (the thread's research stops where it is); drop it if it waits."""
        await manager().cancel_platform_run(owner, run_id, thread_id)
        return Response(status_code=202 if not wait else 204)

    @router.get(
        "/threads/{thread_id}/runs/{run_id}/join", **doc(dict[str, Any], "The thread's values")
    )
    async def join_run(thread_id: ThreadKey, run_id: str, owner: Owner) -> dict[str, Any]:
        """Wait for the run to end; answer with the thread's values."""
        await own_run(thread_id, run_id)
        await until_end(manager().events, run_id)
        return await values_of(thread_id)

    @router.get(
        "/threads/{thread_id}/runs/{run_id}/stream",
        response_class=EventSourceResponse,
        responses=STREAMED,
    )
    async def join_stream(
        thread_id: ThreadKey,
        run_id: str,
        owner: Owner,
        last_event_id: Annotated[str | None, Header()] = None,
    ) -> EventSourceResponse:
        """The run's stream from the start, or after `Last-Event-ID`."""
        run = await own_run(thread_id, run_id)
        after = await resume_point(
            manager().events, stream_key(run.run_id), event_id(last_event_id), {END_EVENT}
        )
        return stream_response(owner, run, after)

    return router


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

_tasks: set["asyncio.Task[Any]"] = set()


def _background(work: Any) -> None:
    """Run `work` to its end though the request that started it is gone."""
    task = asyncio.ensure_future(work)
    _tasks.add(task)
    task.add_done_callback(_tasks.discard)


async def until_end(events: EventLog, run_id: str) -> None:
    """Wait until the run's stream has its `end` event."""
    async for event in events.follow(stream_key(run_id)):
        if event.name == END_EVENT:
            return


async def _cancel_quietly(manager: RunManager, owner: str, run: PlatformRun) -> None:
    """Cancel the run its client left, unless it has ended (or gone) meanwhile."""
    with contextlib.suppress(InvalidState, NotFound):
        await manager.cancel_platform_run(owner, run.run_id, run.thread_id)


async def _delete_after(manager: RunManager, owner: str, run: PlatformRun) -> None:
    """Remove a stateless run's thread once the run has ended (its client may be gone)."""
    await until_end(manager.events, run.run_id)
    await manager.delete(owner, run.thread_id)
