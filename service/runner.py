"""How a research thread is addressed in LangGraph, and what its snapshot says is left to do."""

from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.types import Interrupt, StateSnapshot

from core.state import CLIENT_THREAD_ID
from service.thread_ids import public_id


def thread_config(thread_id: str, checkpoint_id: str | None = None) -> RunnableConfig:
    """Return the LangGraph config of a thread (at a checkpoint), with its client's id for it."""
    configurable: dict[str, Any] = {"thread_id": thread_id}
    if (public := public_id(thread_id)) != thread_id:
        configurable[CLIENT_THREAD_ID] = public
    if checkpoint_id:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


def is_finished(snapshot: StateSnapshot) -> bool:
    """Return whether nothing is left to run.

    Not `snapshot.next`: a run killed between a step's writes and the next checkpoint
    has no `next` either, yet its finished task must still be applied.
    """
    return not snapshot.tasks


def remaining_steps(snapshot: StateSnapshot) -> list[str]:
    """Return the names of the tasks a resume would run or complete."""
    return [task.name for task in snapshot.tasks]


def pending_interrupt(snapshot: StateSnapshot) -> dict[str, Any] | None:
    """Return the payload of the interrupt the thread waits on, if any."""
    for task in snapshot.tasks:
        for pending in task.interrupts:
            return question_of(pending)
    return None


def question_of(pending: Interrupt) -> dict[str, Any]:
    """Return an interrupt's payload as an object (the approval question)."""
    value = pending.value
    return value if isinstance(value, dict) else {"value": value}
