"""The research step's spending, kept node by node in its checkpointed subgraph state.

A worker killed mid-step loses the researcher's recording, but the subgraph resumes from
its last finished node: so each node keeps its own calls and time in the state, and the
step's end adds them all to the researcher's recording, each once.
"""

import functools
import time
from collections.abc import Callable, Sequence
from typing import Any

from langgraph.runtime import Runtime

from engines.recording import Recorder, current_recorder, recording
from nodes.accounting import Body, Step
from nodes.context import Deps
from nodes.research_state import NodeSpending, ResearcherState


def _step_recorder() -> Recorder:
    """Return the researcher step's recorder, which every node of its subgraph runs under."""
    recorder = current_recorder()
    if recorder is None:
        raise RuntimeError("the researcher subgraph runs inside the researcher's recording()")
    return recorder


def spending_kept(node: str) -> Callable[[Body[ResearcherState]], Step[ResearcherState]]:
    """Make `body` record its engine calls on its own and keep them in the step's state."""

    def decorate(body: Body[ResearcherState]) -> Step[ResearcherState]:
        @functools.wraps(body)
        async def run(state: ResearcherState, runtime: Runtime[Deps]) -> dict[str, Any]:
            step = _step_recorder()
            started = time.perf_counter()
            with recording(step.deadline) as recorder:
                update = await body(state, runtime)
            spent = NodeSpending(
                node=node,
                attempt=step.attempt,
                seconds=time.perf_counter() - started,
                recorded=recorder.recorded(),
            )
            return update | {"spending": [spent]}

        return run

    return decorate


def account_spending(spending: Sequence[NodeSpending]) -> None:
    """Add the nodes' spending to the step's recording, in the order the nodes ran.

    The time of nodes an earlier attempt finished counts too: this attempt's clock did not
    see it, though the run's time budget was spent on it.
    """
    step = _step_recorder()
    for spent in spending:
        step.add(spent.recorded)
        if spent.attempt != step.attempt:
            step.earlier_seconds += spent.seconds
