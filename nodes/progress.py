"""A run's progress events, sent as nodes work (to the custom stream and the event log).

A step's events are queued ahead of its checkpoint writes, so no store holds the writes
without the events; each is keyed by its task and place, so a retry stores none twice.

An event's place is its number among its task's events, counted in its lane. A task run
again tells each lane's events again in the same order, so its keys name the same events
as before. What a task tells about work it may not do again is told in a lane of its own:
the research step resumes its subgraph from its checkpoint, and the findings its members
told (`nodes.members.Team`) are not told again by an attempt that finds them checkpointed;
counted with the step's own events, the step's later ones (its usage, its end) would get
the keys of findings told before, and a store that keeps one event per key would drop them.
"""

import inspect
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from langgraph.config import get_config
from langgraph.runtime import Runtime
from langgraph.types import Command

from nodes.context import Deps

# Where an execution's events go: name, payload, key.
Publish = Callable[[str, dict[str, Any], str], None]

# The lane of the events told now ("": the task's own sequence); see the module docstring.
_lane: ContextVar[str] = ContextVar("event_lane", default="")


@contextmanager
def _in_lane(lane: str | None) -> Iterator[None]:
    if not lane:
        yield
        return
    token = _lane.set(lane)
    try:
        yield
    finally:
        _lane.reset(token)


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
        """Publish one event of the task that runs now, under its key (its place in its lane)."""
        try:
            task = str(get_config()["configurable"].get("checkpoint_ns", ""))
        except RuntimeError:  # called outside a node (a test's direct call)
            task = ""
        lane = _lane.get()
        sequence = f"{task}#{lane}:" if lane else f"{task}#"
        number = self._counts[sequence]
        self._counts[sequence] += 1
        self._publish(name, data, f"{self._execution}/{sequence}{number}")


def tell(runtime: Runtime[Deps], event: dict[str, Any], lane: str | None = None) -> None:
    """Send a progress event now, to the custom stream and the run's event log.

    `lane`: the sequence of the task's events it is counted in (the module docstring),
    when not the task's own.
    """
    runtime.stream_writer(event)
    progress = runtime.context.progress
    if progress is not None:
        with _in_lane(lane):
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
