"""A run's progress events, sent while its nodes work.

A node tells (`tell`) what it does as it happens: the event goes to LangGraph's custom
stream (what a Platform client's `custom` mode reads) and, through `Deps.progress`, into
the run's event log at once. Every node of the graph announces its start and end
(`announced`). All of a step's events are thus queued before the step returns, ahead of
its checkpoint writes: a store that keeps that order (the SQLite file's one writer; the
Redis checkpointer waits for the log, `FlatRedisSaver.ordered_by`) never has a step's
writes without its events.

`ExecutionProgress` keys each event by the task that emits it (its checkpoint namespace, which
names the task's deterministic id) and its place among that task's events. A task run
again, by a retried execution after a worker died or Redis stalled, emits the same keys, and
the event log stores none of them twice.
"""

import inspect
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

from langgraph.config import get_config
from langgraph.runtime import Runtime
from langgraph.types import Command

from nodes.context import Deps

# Where an execution's events go: name, payload, key.
Publish = Callable[[str, dict[str, Any], str], None]


class ExecutionProgress:
    """`Deps.progress` for one execution of a run: numbers each task's events, then publishes."""

    def __init__(self, publish: Publish, execution: str = "") -> None:
        """`execution`: what tells its tasks from the same tasks run by another execution.

        A node that asked a question runs again, as the same task, in the execution that
        answers: that one is named by the checkpoint it answers, and its events are new.
        A retry of an execution has the same name, and repeats nothing.
        """
        self._publish = publish
        self._execution = execution
        self._counts: Counter[str] = Counter()

    def __call__(self, name: str, data: dict[str, Any]) -> None:
        """Publish one event of the task that runs now, under its key."""
        try:
            task = str(get_config()["configurable"].get("checkpoint_ns", ""))
        except RuntimeError:  # called outside a node (a test's direct call)
            task = ""
        number = self._counts[task]
        self._counts[task] += 1
        self._publish(name, data, f"{self._execution}/{task}#{number}")


def tell(runtime: Runtime[Deps], event: dict[str, Any]) -> None:
    """Send a progress event now: `{"event": name, ...payload}`."""
    runtime.stream_writer(event)
    progress = runtime.context.progress
    if progress is not None:
        progress(str(event["event"]), {k: v for k, v in event.items() if k != "event"})


def announced(name: str, node: Callable[..., Any]) -> Callable[..., Awaitable[Any]]:
    """`node` telling the run when it starts and when it has finished (not when it asks).

    `node` may be sync or async and take the runtime or not. A finished step's event
    carries the iteration its update reaches, when it has one.
    """
    takes_runtime = "runtime" in inspect.signature(node).parameters

    async def step(state: Any, runtime: Runtime[Deps]) -> Any:
        progress = runtime.context.progress
        if progress is not None:
            progress("node_started", {"node": name})
        result = node(state, runtime) if takes_runtime else node(state)
        if inspect.isawaitable(result):
            result = await result
        if progress is not None:
            update = result.update if isinstance(result, Command) else result
            data: dict[str, Any] = {"node": name}
            if isinstance(update, dict) and "iteration_count" in update:
                data["iteration"] = update["iteration_count"]
            progress("node_finished", data)
        return result

    step.__name__ = step.__qualname__ = getattr(node, "__name__", name)
    step.__doc__ = node.__doc__
    return step
