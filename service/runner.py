"""How a research thread is addressed in LangGraph, and what its snapshot says is left to do."""

from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.types import Interrupt, StateSnapshot

from core.state import CLIENT_THREAD_ID
from service.thread_ids import public_id


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
