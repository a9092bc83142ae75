"""A run's progress events, sent as nodes work (to the custom stream and the event log).

A step's events are queued ahead of its checkpoint writes, so no store holds the writes
without the events; each is keyed by its task and place, so a retry stores none twice.
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
    """`Deps.progress` for one execution of a run: numbers each task's events, then publishes.

    `execution` tells its tasks from the same tasks run by another execution (one that
    answers a node's question); a retry of an execution has the same name.
    """

    def __init__(self, publish: Publish, execution: str = "") -> None:
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
    """Send a progress event now, to the custom stream and the run's event log."""
    runtime.stream_writer(event)
    progress = runtime.context.progress
    if progress is not None:
        progress(str(event["event"]), {k: v for k, v in event.items() if k != "event"})


def announced(name: str, node: Callable[..., Any]) -> Callable[..., Awaitable[Any]]:
    """Return `node` (sync or async, with or without the runtime) telling when it starts and ends.

    A node that asks a question has not finished. A finished step's event carries the
    iteration its update reaches, when it has one.
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
