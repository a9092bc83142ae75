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
S = TypeVar("S", contravariant=True)


async def unless_refused(
    step: str, call: Awaitable[T], fallback: Callable[[], Awaitable[T]]
) -> tuple[T, str | None]:
    """Return `call`'s result and None; if the model refuses the run, `fallback`'s and why.

    The reason halts the run; the fallback is recorded for the step.
    """
    try:
        return await call, None
    except ModelAccessError as exc:
        record_fallback(step, str(exc))
        return await fallback(), str(exc)


def run_deadline(state: ResearchState) -> float:
    """Return when the run's time budget ends (`time.monotonic()`); active time counts."""
    spent_s = state["usage"].seconds if "usage" in state else 0.0
    return time.monotonic() + max(0.0, state["options"].time_budget_s - spent_s)


def spent(node: str, started: float, recorder: Recorder) -> Usage:
    """Return the usage of one call of `node` that began at `started` (`time.perf_counter()`).

    The recorded model calls count for the node and for their model alike. A resumed
    step's time includes what its earlier attempt spent on the work it kept.
    """
    models: dict[str, NodeUsage] = {}
    for call in recorder.calls:
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
    seconds = time.perf_counter() - started + recorder.earlier_seconds
    own = sum(models.values(), NodeUsage()).model_copy(update={"calls": 1, "seconds": seconds})
    return Usage(nodes={node: own}, models=models)


def client_thread_id() -> str:
    """Return the thread's id as its client knows it (`CLIENT_THREAD_ID`, else the config's)."""
    try:
        configurable = get_config().get("configurable", {})
        return str(configurable.get(CLIENT_THREAD_ID) or configurable.get("thread_id", ""))
    except RuntimeError:  # called outside a graph run (unit tests of a node)
        return ""


def _submission(node: str, engine_name: str, recorder: Recorder, mine: NodeUsage) -> NodeSubmission:
    """Return the step's entry in its round's record."""
    kind = "llm" if recorder.calls else engine_name
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
    """Stream the step's fallbacks, repairs and structured-output methods; return the notes."""
    for fallback in recorder.fallbacks:
        tell(runtime, {"event": "fallback", **fallback.model_dump()})
    for repair in recorder.repairs:
        tell(runtime, {"event": "repair", **repair.model_dump()})
    for chosen in recorder.structured.values():
        tell(runtime, {"event": "structured_output", **chosen.model_dump()})
    return [
        AIMessage(content=f"Fell back to the extractive engine for {f.step}: {f.reason}", name=node)
        for f in recorder.fallbacks
    ]


def account(
    node: str,
    state: ResearchState,
    runtime: Runtime[Deps],
    started: float,
    recorder: Recorder,
    update: dict[str, Any],
) -> dict[str, Any]:
    """Return the step's `update` with its `usage`, `rounds` and notes; stream the new totals.

    The step joins the record of round `iteration_count + 1` (the iteration it works on),
    after any record the update holds already (a research step's members').
    """
    usage = spent(node, started, recorder)
    mine = usage.nodes[node]
    submission = _submission(node, runtime.context.engine.name, recorder, mine)
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
        thread_id=client_thread_id(),
        round_number=state.get("iteration_count", 0) + 1,
        submissions=[submission],
    )
    merged = {**update, "usage": usage, "rounds": [*update.get("rounds", []), record]}
    if notes:
        merged["messages"] = [*update.get("messages", []), *notes]
    return merged


class Step(Protocol[S]):
    """A node function as LangGraph calls it: the state, and the runtime by keyword."""

    def __call__(self, state: S, *, runtime: Runtime[Deps]) -> Awaitable[dict[str, Any]]:
        """Run the step; return its state update."""
        ...


Node = Step[ResearchState]
# A node's own work, before it is wrapped.
Body = Callable[[S, Runtime[Deps]], Awaitable[dict[str, Any]]]


def accounted(node: str) -> Callable[[Body[ResearchState]], Node]:
    """Make `body` a node whose engine calls are recorded and accounted as `node`'s step.

    Every model call of the step is bounded by what is left of the run's time budget.
    """

    def decorate(body: Body[ResearchState]) -> Node:
        @functools.wraps(body)
        async def step(state: ResearchState, runtime: Runtime[Deps]) -> dict[str, Any]:
            started = time.perf_counter()
            with recording(run_deadline(state)) as recorder:
                update = await body(state, runtime)
            return account(node, state, runtime, started, recorder, update)

        return step

    return decorate
