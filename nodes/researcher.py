"""Researcher: the nodes of the research step's subgraph, one ReAct turn per checkpoint.

The run's time budget bounds the loop: what finished by then is kept.
"""

import asyncio
import functools
import time
from collections.abc import Awaitable, Mapping, Sequence
from typing import Any, TypeVar

from langchain_core.messages import AIMessage
from langgraph.runtime import Runtime

from engines.base import Investigator, LinkFollower, ModelAccessError
from engines.chat_models import text_of
from nodes.context import Deps
from nodes.members import current_team, merged
from nodes.progress import tell
from nodes.reading import ReadPage, ReadPool
from nodes.research_collect import teller
from nodes.research_state import COLLECT, MODEL, TOOLS, QueryOutcome, ResearcherState
from nodes.searching import Searcher, step_deadline
from nodes.tool_calls import run_tool_calls, tool_names
from tools.text import keyword_query

T = TypeVar("T")
OUT_OF_TIME = "The research step ran out of time; writing from what was found."


def pending_queries(state: ResearcherState) -> list[str]:
    """Return the plan's queries not run yet."""
    plan = state.get("task_plan")
    if plan is None:
        return []
    done = {q.casefold() for q in state.get("queries_done", [])}
    return [q for q in plan.search_queries if q.casefold() not in done]


def searcher(
    state: ResearcherState,
    runtime: Runtime[Deps],
    found: Sequence[QueryOutcome] = (),
    read: Mapping[str, ReadPage] | None = None,
    pool: ReadPool | None = None,
) -> Searcher:
    """Return a searcher for one node of the step; it tells each query's findings.

    `found`: what the step's members found (told by them), in the plan's order; `read`
    and `pool`: the pages they read and their reads, which it does not read again.
    """
    told = teller(state, functools.partial(tell, runtime), found)
    sources, pages = state.get("research_data", []), {**state.get("pages", {}), **(read or {})}
    deadline, wide = step_deadline(), keyword_query(state.get("topic", ""))
    return Searcher(
        runtime.context, state["options"].max_results, sources, deadline, pages, told, wide, pool
    )


async def finished_by(calls: Sequence[Awaitable[T]], deadline: float) -> tuple[list[T], bool]:
    """Return the results of the calls finished by `deadline`, in order, and whether any was not."""
    tasks = [asyncio.ensure_future(call) for call in calls]
    if not tasks:
        return [], False
    _, late = await asyncio.wait(tasks, timeout=max(0.0, deadline - time.monotonic()))
    for task in late:
        task.cancel()
    return [t.result() for t in tasks if t not in late], bool(late)


def ran_queries(state: ResearcherState) -> set[str]:
    """Return the queries run so far (casefolded): before this step, and in it."""
    done = {q.casefold() for q in state.get("queries_done", [])}
    return done | {o.query.casefold() for o in state.get("outcomes", [])}


async def queries(state: ResearcherState, runtime: Runtime[Deps]) -> dict[str, Any]:
    """Run the pending queries (and link follow-ups) or refined ones; or open the ReAct loop.

    When the step's members ran the plan's queries, their findings come first, in the
    plan's order, and the follow-ups are chosen from all of them, as if one searcher had
    run every query.
    """
    engine, plan = runtime.context.engine, state.get("task_plan")
    done, sources = state.get("queries_done", []), state.get("research_data", [])
    found, read = merged(state)
    pool = None
    if found:
        team = current_team()
        team.found_all(found)
        pool = team.pool
    ran = {o.query.casefold() for o in found}
    pending = [q for q in pending_queries(state) if q.casefold() not in ran]
    if not pending and not found and plan is not None and isinstance(engine, Investigator):
        if engine.max_cycles > 0:
            opening = engine.react_messages(plan, done, sources)
            return {"conversation": opening, "turns": 0, "max_cycles": engine.max_cycles}
    try:
        async with searcher(state, runtime, found, read, pool) as search:
            if pending or found or plan is None:
                outcomes = [*found, *await search.run_all(pending)]
                # A plan a human approved runs as approved: its queries and no others.
                if (
                    plan is not None
                    and isinstance(engine, LinkFollower)
                    and state["options"].approval == "none"
                ):
                    first = [r for o in outcomes for r in o.results]
                    asked = [o.query for o in outcomes]
                    follow = engine.follow_up(plan, [*sources, *first], [*done, *asked])
                    outcomes += await search.run_all(follow)
            else:
                refined = await engine.refine_queries(plan, sources, done, state.get("review"))
                outcomes = await search.run_all(refined)
    except ModelAccessError as exc:
        return {"halted": str(exc)}
    return {"outcomes": outcomes, "pages": {**read, **search.pages.fresh()}}


async def model(state: ResearcherState, runtime: Runtime[Deps]) -> dict[str, Any]:
    """Answer one ReAct turn: the model's Thought, and its tool calls (the Actions)."""
    deps, engine = runtime.context, runtime.context.engine
    assert isinstance(engine, Investigator)
    update: dict[str, Any] = {"turns": state.get("turns", 0) + 1, "thoughts": []}
    try:
        if engine.calls_tools():
            async with asyncio.timeout_at(step_deadline()):
                turn = await engine.react_turn(
                    state.get("conversation", []), tool_names(deps.reader)
                )
            if turn is None:  # the model failed: the loop ends with what was found
                return update
            update["conversation"] = [turn]
            if thought := text_of(turn).strip():
                update["thoughts"] = [thought]
            if turn.tool_calls or engine.calls_tools():
                return update
        # A model that does not call tools (it never searched): its gaps are still open.
        return _joined(update, await _queries_instead(state, runtime, engine))
    except TimeoutError:  # keep what the finished calls found
        return _joined(update, {"out_of_time": True, "thoughts": [OUT_OF_TIME]})
    except ModelAccessError as exc:
        return update | {"halted": str(exc)}


def _joined(update: dict[str, Any], more: dict[str, Any]) -> dict[str, Any]:
    """Return two updates of one node as one, their thoughts in order."""
    return update | more | {"thoughts": [*update["thoughts"], *more.get("thoughts", [])]}


async def _queries_instead(
    state: ResearcherState, runtime: Runtime[Deps], engine: Investigator
) -> dict[str, Any]:
    """Close the gaps by asking for queries, for a model that does not call tools."""
    plan = state.get("task_plan")
    assert plan is not None
    done, sources = state.get("queries_done", []), state.get("research_data", [])
    async with asyncio.timeout_at(step_deadline()):
        asked = await engine.queries_instead(plan, done, sources)
    seen = ran_queries(state)
    fresh: list[str] = []
    for query in asked:  # a query already run is not run again
        if query.casefold() not in seen:
            seen.add(query.casefold())
            fresh.append(query)
    async with searcher(state, runtime) as search:
        outcomes, late = await finished_by([search.run(q) for q in fresh], step_deadline())
    read = search.pages.fresh()
    if late:
        return {"outcomes": outcomes, "pages": read, "out_of_time": True, "thoughts": [OUT_OF_TIME]}
    listed = "; ".join(asked) or "it had none"
    thought = f"The model does not call tools here, so it was asked for queries instead: {listed}."
    return {"outcomes": outcomes, "pages": read, "thoughts": [thought]}


async def tools(state: ResearcherState, runtime: Runtime[Deps]) -> dict[str, Any]:
    """Run the last turn's tool calls concurrently; their answers are the Observations."""
    last = state.get("conversation", [])[-1]
    assert isinstance(last, AIMessage)
    async with searcher(state, runtime) as search:
        calls = run_tool_calls(last.tool_calls, ran_queries(state), search, runtime.context.reader)
        results, late = await finished_by(calls, step_deadline())
    update: dict[str, Any] = {
        "conversation": [r.message for r in results],
        "outcomes": [r.outcome for r in results if r.outcome is not None],
        "scraped": [r.page for r in results if r.page is not None],
        "pages": search.pages.fresh(),
    }
    if late:  # keep what the finished calls found
        update |= {"out_of_time": True, "thoughts": [OUT_OF_TIME]}
    return update


def after_model(state: ResearcherState) -> str:
    """Route to the tools while the last turn called any; else to collect."""
    conversation = state.get("conversation", [])
    last = conversation[-1] if conversation else None
    stopped = state.get("out_of_time") or state.get("halted")
    calls = isinstance(last, AIMessage) and bool(last.tool_calls)
    return TOOLS if calls and not stopped else COLLECT


def after_tools(state: ResearcherState) -> str:
    """Route back to the model while cycles and time are left; else to collect."""
    stopped = state.get("out_of_time") or state.get("halted")
    cycles_left = state.get("turns", 0) < state.get("max_cycles", 0)
    return MODEL if cycles_left and not stopped else COLLECT


def after_queries(state: ResearcherState) -> str:
    """Route to the model when the ReAct loop was opened; else to collect."""
    return MODEL if state.get("conversation") and not state.get("halted") else COLLECT
