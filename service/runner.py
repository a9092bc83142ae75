"""Drive one research thread: stream its progress, stop at interrupts, resume with answers."""

from collections.abc import Awaitable, Callable
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.types import Command, Interrupt, StateSnapshot

from core.models import ApprovalDecision
from core.state import CLIENT_THREAD_ID
from graph.builder import ResearchGraph
from nodes.context import Deps
from service.thread_ids import public_id

EventSink = Callable[[str, Any], None]
Approver = Callable[[dict[str, Any]], Awaitable[ApprovalDecision | None]]


def thread_config(thread_id: str) -> RunnableConfig:
    """The LangGraph config that addresses one research thread.

    A thread stored under a key's scope (`service.thread_ids`) also carries the id its client
    knows it by, which is what the graph writes into its records (`CLIENT_THREAD_ID`).
    """
    configurable: dict[str, Any] = {"thread_id": thread_id}
    if (public := public_id(thread_id)) != thread_id:
        configurable[CLIENT_THREAD_ID] = public
    return {"configurable": configurable}


def is_finished(snapshot: StateSnapshot) -> bool:
    """True when nothing is left to run.

    Not `snapshot.next`: a run killed after a step saved its writes but before the next
    checkpoint has no `next` either, yet its finished task still has to be applied.
    """
    return not snapshot.tasks


def remaining_steps(snapshot: StateSnapshot) -> list[str]:
    """Names of the tasks a resume would run or complete."""
    return [task.name for task in snapshot.tasks]


def pending_interrupt(snapshot: StateSnapshot) -> dict[str, Any] | None:
    """The payload of the interrupt the thread waits on, if any."""
    for task in snapshot.tasks:
        for pending in task.interrupts:
            return question_of(pending)
    return None


def question_of(pending: Interrupt) -> dict[str, Any]:
    """An interrupt's payload as an object (the approval question)."""
    value = pending.value
    return value if isinstance(value, dict) else {"value": value}


async def drive(
    graph: ResearchGraph,
    deps: Deps,
    thread_id: str,
    first_input: Any,
    on_event: EventSink,
    approver: Approver | None = None,
) -> StateSnapshot:
    """Run until the graph ends, or waits for a human that `approver` does not answer.

    `first_input` is the initial state of a new thread, None to continue an
    interrupted one, or a `Command(resume=...)` answering a pending approval.
    """
    config = thread_config(thread_id)
    payload = first_input
    while True:
        async for mode, chunk in graph.astream(
            payload, config, context=deps, stream_mode=["updates", "custom"]
        ):
            on_event(str(mode), chunk)
        snapshot = await graph.aget_state(config)
        question = pending_interrupt(snapshot)
        if question is None or approver is None:
            return snapshot
        answer = await approver(question)
        if answer is None:
            return snapshot
        payload = Command(resume=answer.model_dump(mode="json"))
