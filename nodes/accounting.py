"""Usage and round records of one node step, from what the engine recorded while it ran."""

import functools
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

from langchain_core.messages import AIMessage
from langgraph.config import get_config
from langgraph.runtime import Runtime

from core.state import CLIENT_THREAD_ID, ResearchState
from core.usage import NodeSubmission, NodeUsage, RoundRecord, TokenUsage, Usage
from engines.base import ModelAccessError
from engines.recording import Recorder, record_fallback, recording
from nodes.context import Deps
from nodes.progress import tell

T = TypeVar("T")


async def unless_refused(
    step: str, call: Awaitable[T], fallback: Callable[[], Awaitable[T]]
) -> tuple[T, str | None]:
    """`call`'s result; if the model refuses to serve the run, `fallback`'s and the reason.

    The reason halts the run (state `halted`); the fallback is recorded for the step.
    """
    try:
        return await call, None
    except ModelAccessError as exc:
        record_fallback(step, str(exc))
        return await fallback(), str(exc)


def run_deadline(state: ResearchState) -> float:
    """When the run's time budget ends, as a `time.monotonic()` value (active time counts)."""
    spent_s = state["usage"].seconds if "usage" in state else 0.0
    return time.monotonic() + max(0.0, state["options"].time_budget_s - spent_s)


def spent(node: str, started: float, recorder: Recorder | None = None) -> Usage:
    """Usage of one call of `node` that began at `started` (a `time.perf_counter()` value).

    The model calls in `recorder` add their requests, tokens and cost to the node, and to
    their model: a node's requests are its model requests, so both views add up alike.
    A resumed step's time includes what its earlier attempt spent on the work it kept.
    """
    models: dict[str, NodeUsage] = {}
    for call in recorder.calls if recorder else []:
        models[call.model] = models.get(call.model, NodeUsage()) + NodeUsage(
            calls=call.first,
            requests=1,
            seconds=call.seconds,
            prompt_tokens=call.input_tokens,
            completion_tokens=call.output_tokens,
            cost_usd=call.cost_usd,
            errors=call.error is not None,
            estimated=call.estimated,
        )
    total = sum(models.values(), NodeUsage())
    earlier = recorder.earlier_seconds if recorder else 0.0  # of a resumed step's first try
    own = NodeUsage(
        calls=1,
        seconds=time.perf_counter() - started + earlier,
        requests=total.requests,
        prompt_tokens=total.prompt_tokens,
        completion_tokens=total.completion_tokens,
        cost_usd=total.cost_usd,
        errors=total.errors,
        estimated=total.estimated,
    )
    return Usage(nodes={node: own}, models=models)


def _thread_id() -> str:
    """The thread's id as its client knows it (`CLIENT_THREAD_ID`, else the config's)."""
    try:
        configurable = get_config().get("configurable", {})
        return str(configurable.get(CLIENT_THREAD_ID) or configurable.get("thread_id", ""))
    except RuntimeError:  # called outside a graph run (unit tests of a node)
        return ""


def _submission(node: str, kind: str, recorder: Recorder, mine: NodeUsage) -> NodeSubmission:
    """The step's entry in its round's record."""
    problems = [f"{f.step}: {f.reason}" for f in recorder.fallbacks]
    return NodeSubmission(
        name=node,
        type=kind if kind in ("llm", "extractive", "simulated") else "tools",
        status="ERROR" if problems else "SUCCESS",
        error_message="; ".join(problems) or None,
        usage=TokenUsage(
            requests=len(recorder.calls),
            input_tokens=mine.prompt_tokens,
            output_tokens=mine.completion_tokens,
            cost_usd=mine.cost_usd,
        ),
        execution_time_ms=round(mine.seconds * 1000, 3),
    )


def _stream_records(node: str, runtime: Runtime[Deps], recorder: Recorder) -> list[AIMessage]:
    """Stream the step's fallbacks, repairs and structured-output methods; the fallbacks' notes."""
    notes = []
    for fallback in recorder.fallbacks:
        tell(runtime, {"event": "fallback", "step": fallback.step, "reason": fallback.reason})
        notes.append(
            AIMessage(
                content=f"Fell back to the extractive engine for {fallback.step}: {fallback.reason}",
                name=node,
            )
        )
    for repair in recorder.repairs:
        tell(runtime, {"event": "repair", "step": repair.step, "error": repair.error})
    for chosen in recorder.structured.values():
        tell(
            runtime,
            {
                "event": "structured_output",
                "model": chosen.model,
                "method": chosen.method,
                "refused": chosen.refused,
            },
        )
    return notes


def account(
    node: str,
    state: ResearchState,
    runtime: Runtime[Deps],
    started: float,
    recorder: Recorder,
    *,
    engine_used: bool = True,
) -> dict[str, Any]:
    """The `usage` and `rounds` updates of a node step; streams the run's new totals.

    The step joins the record of round `iteration_count + 1` (the iteration it works on).
    """
    usage = spent(node, started, recorder)
    mine = usage.nodes[node]
    kind = "llm" if recorder.calls else runtime.context.engine.name if engine_used else "tools"
    submission = _submission(node, kind, recorder, mine)
    notes = _stream_records(node, runtime, recorder)
    total = state.get("usage", Usage()) + usage
    # Plain dicts, dumped only where there is something to say: this runs at every step.
    tell(
        runtime,
        {
            "event": "usage",
            "node": node,
            "step": mine.model_dump(),
            "total": {
                "tokens": total.total_tokens,
                "cost_usd": round(total.cost_usd, 6),
                "seconds": round(total.seconds, 3),
                "models": {name: m.model_dump() for name, m in total.models.items()},
            },
        },
    )
    if runtime.context.evidence is not None and recorder.calls:
        runtime.context.evidence.model_calls(node, recorder.calls)
    record = RoundRecord(
        thread_id=_thread_id(),
        round_number=state.get("iteration_count", 0) + 1,
        submissions=[submission],
    )
    accounting: dict[str, Any] = {"usage": usage, "rounds": [record]}
    if notes:
        accounting["messages"] = notes
    return accounting


def merge_updates(update: dict[str, Any], accounting: dict[str, Any]) -> dict[str, Any]:
    """A node's own update with its accounting; messages from both are kept."""
    merged = {**update, **accounting}
    if "messages" in update and "messages" in accounting:
        merged["messages"] = [*update["messages"], *accounting["messages"]]
    return merged


NodeBody = Callable[[ResearchState, Runtime[Deps]], Awaitable[dict[str, Any]]]


class Node(Protocol):
    """A node function as LangGraph calls it: the state, and the runtime by keyword."""

    def __call__(
        self, state: ResearchState, *, runtime: Runtime[Deps]
    ) -> Awaitable[dict[str, Any]]:
        """Run the step; its state update."""
        ...


def accounted(node: str) -> Callable[[NodeBody], Node]:
    """Make `body` a node whose engine calls are recorded and accounted as `node`'s step.

    The recording carries the run's deadline, so every model call of the step is bounded
    by what is left of its time budget; the update gets the step's usage and round record.
    """

    def decorate(body: NodeBody) -> Node:
        @functools.wraps(body)
        async def step(state: ResearchState, runtime: Runtime[Deps]) -> dict[str, Any]:
            started = time.perf_counter()
            with recording(run_deadline(state)) as recorder:
                update = await body(state, runtime)
            return merge_updates(update, account(node, state, runtime, started, recorder))

        return step

    return decorate
