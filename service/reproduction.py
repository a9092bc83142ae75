"""Re-runs and run archives: what a re-run starts from, and a run whole as JSON.

A re-run is a new thread seeded with the topic, options and approved plan of the run it
re-runs; `replay` answers its searches and reads from that run's records, `refresh`
searches and reads again. An archive holds a run's record, state, events and evidence.
"""

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, Literal

from langchain_core.messages import messages_from_dict, messages_to_dict
from pydantic import BaseModel, Field, field_validator, model_validator
from pydantic_core import to_json, to_jsonable_python

from core.models import REPORT_MAX_CHARS, Rerun
from core.options import ResearchRequest, RunOptions, Topic
from core.state import ReportStatus, coerce_update, initial_state
from graph.builder import ResearchGraph
from service.errors import InvalidState
from service.runner import thread_config
from service.thread_ids import public_id
from stores.events import TERMINAL_EVENT, EventLog
from stores.evidence import Evidence, EvidenceStore, PageRead, RunHeader, SearchCall, load
from stores.registry import Registry, RunStatus, ThreadExists, ThreadRecord

ARCHIVE_VERSION = 1
# The node an imported state is written as: the graph's last, so the thread is finished.
_LAST_NODE = "finalize"
# What an archive may hold, as the API holds a run to it: the events a thread's log keeps
# (the Redis event stream's cap), and an event's data as JSON (a report's approval
# carries the report, of at most REPORT_MAX_CHARS).
MAX_ARCHIVE_EVENTS = 10_000
MAX_EVENT_BYTES = 4 * REPORT_MAX_CHARS


class ArchivedThread(BaseModel):
    """The thread's record as an archive keeps it: a topic and options the API would take."""

    thread_id: str
    topic: Topic
    status: RunStatus
    created_at: datetime
    updated_at: datetime
    options: dict[str, Any] = Field(default_factory=dict)
    report: ReportStatus | None = None

    @field_validator("options")
    @classmethod
    def _run_options(cls, value: dict[str, Any]) -> dict[str, Any]:
        RunOptions.model_validate(value)  # raises what is wrong with them
        return value


class ArchivedEvent(BaseModel):
    """One event of the thread's log."""

    id: int
    name: str = Field(max_length=64)
    data: Any
    created_at: datetime

    @field_validator("data")
    @classmethod
    def _small(cls, value: Any) -> Any:
        size = len(to_json(value))
        if size > MAX_EVENT_BYTES:
            raise ValueError(f"is {size} bytes as JSON; the limit is {MAX_EVENT_BYTES}")
        return value


class RunArchive(BaseModel):
    """A run, whole: what `research-agent import` (or the API) reads back anywhere."""

    format: Literal["research-agent/run"] = "research-agent/run"
    version: int = ARCHIVE_VERSION
    exported_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    thread: ArchivedThread
    state: dict[str, Any]
    events: list[ArchivedEvent] = Field(default_factory=list, max_length=MAX_ARCHIVE_EVENTS)
    evidence: Evidence

    @model_validator(mode="after")
    def _finished_log_and_reports_in_bounds(self) -> "RunArchive":
        ends = [i for i, e in enumerate(self.events) if e.name == TERMINAL_EVENT]
        if ends and ends != [len(self.events) - 1]:
            raise ValueError(
                f"events: {TERMINAL_EVENT!r} may only be the last event; it is event "
                f"{', '.join(str(i + 1) for i in ends)} of {len(self.events)}"
            )
        drafts = self.state.get("drafts") or []
        reports = [self.state.get("final_report")] + [
            d.get("markdown") for d in drafts if isinstance(d, dict)
        ]
        for report in reports:
            if isinstance(report, str) and len(report) > REPORT_MAX_CHARS:
                raise ValueError(
                    f"state: a report of {len(report)} characters; the limit is {REPORT_MAX_CHARS}"
                )
        return self


async def rerun_of(
    graph: ResearchGraph, store: EvidenceStore, thread_id: str, mode: Literal["replay", "refresh"]
) -> tuple[ResearchRequest, Callable[[str], Awaitable[None]]]:
    """Return what a re-run of `thread_id` starts from: its request, and its new thread's seed.

    The seed writes the new thread's evidence header and its first state, plan approved.
    """
    values = await _values(graph, thread_id)
    plan = values.get("task_plan")
    if plan is None or "options" not in values:
        raise InvalidState("this run has no plan yet: re-run it once it has one")
    header = RunHeader(mode=mode, of=public_id(thread_id))
    evidence = Evidence(header=header)
    if mode == "replay":
        source = await load(store, thread_id)
        if source.header is None:
            raise InvalidState("this run kept no evidence to replay: re-run it with 'refresh'")
        script = [r for r in source.records if isinstance(r, SearchCall | PageRead)]
        header = source.header.model_copy(
            update={
                "mode": mode,
                "of": header.of,
                "script": script,
                "created_at": datetime.now(UTC),
            }
        )
        evidence = Evidence(header=header, contents=source.contents)
    options: RunOptions = values["options"]
    seeded = initial_state(values["topic"], options) | {
        "task_plan": plan,
        "plan_approved": True,
        "rerun": Rerun(of=public_id(thread_id), mode=mode),
    }

    async def seed(new_id: str) -> None:
        await store.put(new_id, evidence)
        await graph.aupdate_state(thread_config(new_id), seeded, as_node="__start__")

    return ResearchRequest(topic=values["topic"], options=options), seed


async def _values(graph: ResearchGraph, thread_id: str) -> dict[str, Any]:
    snapshot = await graph.aget_state(thread_config(thread_id))
    return dict(snapshot.values or {})


async def export_archive(
    graph: ResearchGraph, events: EventLog, store: EvidenceStore, record: ThreadRecord
) -> RunArchive:
    """Return the thread of `record` whole: its record, state, events and evidence."""
    snapshot = await graph.aget_state(thread_config(record.thread_id))
    logged = await events.read(record.thread_id)
    return RunArchive(
        thread=ArchivedThread(
            thread_id=public_id(record.thread_id),
            **record.model_dump(
                include={"topic", "status", "created_at", "updated_at", "options", "report"}
            ),
        ),
        state=_state_json(dict(snapshot.values or {})),
        events=[
            ArchivedEvent(id=e.id, name=e.name, data=e.data, created_at=e.created_at)
            for e in logged
        ],
        evidence=await load(store, record.thread_id),
    )


def _state_json(values: dict[str, Any]) -> dict[str, Any]:
    """Return a thread's state as JSON; its messages as LangChain's own dicts."""
    messages = messages_to_dict(values.pop("messages", []))
    state: dict[str, Any] = to_jsonable_python(values)
    return state | {"messages": messages}


async def import_archive(
    stores: tuple[ResearchGraph, EventLog, Registry, EvidenceStore],
    owner: str,
    archive: RunArchive,
    thread_id: str,
) -> ThreadRecord:
    """Register the archived run as the owner's finished thread `thread_id` (a stored id).

    Raise ThreadExists when the id is taken, InvalidState for a run that had not
    finished, ValueError for a state this version cannot read.
    """
    graph, events, registry, store = stores
    if archive.thread.status not in ("completed", "failed", "cancelled"):
        raise InvalidState(
            f"only a finished run can be imported; this one was {archive.thread.status}"
        )
    config = thread_config(thread_id)
    if (await graph.aget_state(config)).values or await registry.get(thread_id):
        raise ThreadExists(thread_id)
    state = dict(archive.state)
    if "messages" in state:  # as LangChain writes them: a union of message types cannot
        state["messages"] = messages_from_dict(state["messages"])
    values = coerce_update(state)
    record = ThreadRecord(
        thread_id=thread_id,
        owner=owner,
        topic=archive.thread.topic,
        status=archive.thread.status,
        created_at=archive.thread.created_at,
        updated_at=datetime.now(UTC),
        options=archive.thread.options,
        report=archive.thread.report,
    )
    logged = [(e.name, e.data) for e in archive.events]
    if not logged or logged[-1][0] != TERMINAL_EVENT:  # a finished thread's log closes
        logged.append((TERMINAL_EVENT, {"status": archive.thread.status}))
    await store.put(thread_id, archive.evidence)
    await graph.aupdate_state(config, values, as_node=_LAST_NODE)
    await asyncio.gather(*(events.emit(thread_id, name, data) for name, data in logged))
    await registry.create(record)
    return record
