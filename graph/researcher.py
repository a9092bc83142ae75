"""The research step as a subgraph: members, queries, then ReAct turns (model <-> tools), collect.

A step with plan queries to run first shares them out to member researchers working in
parallel (`nodes.members`), whose findings the queries node merges in the plan's order.
Checkpointed after every node, so a worker killed mid-step resumes from its last turn,
with the answers of the members that finished.
"""

from typing import Any, cast

from langgraph.graph import START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime
from langgraph.types import Send

from core.state import ResearchState
from core.steps import RESEARCHER
from engines.base import Investigator
from nodes.accounting import Node, accounted
from nodes.context import Deps
from nodes.members import member, member_sends, member_shares, member_team
from nodes.progress import tell
from nodes.research_collect import collect
from nodes.research_spending import account_spending, spending_kept
from nodes.research_state import COLLECT, MEMBER, MODEL, QUERIES, TOOLS, ResearcherState
from nodes.researcher import (
    after_model,
    after_queries,
    after_tools,
    model,
    pending_queries,
    queries,
    tools,
)

ResearcherGraph = CompiledStateGraph[ResearcherState, Deps, ResearcherState, ResearcherState]


def build_researcher(*, checkpointed: bool = True) -> ResearcherGraph:
    """Compile the research step; `checkpointed=False` keeps no checkpoint between its nodes."""
    builder = StateGraph(ResearcherState, context_schema=Deps)
    # Each node keeps its model calls in the checkpointed state: a resumed step counts them.
    builder.add_node(MEMBER, spending_kept(MEMBER)(member))
    builder.add_node(QUERIES, spending_kept(QUERIES)(queries))
    builder.add_node(MODEL, spending_kept(MODEL)(model))
    builder.add_node(TOOLS, spending_kept(TOOLS)(tools))
    builder.add_node(COLLECT, collect)
    builder.add_conditional_edges(START, to_members, [MEMBER, QUERIES])
    builder.add_edge(MEMBER, QUERIES)
    builder.add_conditional_edges(QUERIES, after_queries, [MODEL, COLLECT])
    builder.add_conditional_edges(MODEL, after_model, [TOOLS, COLLECT])
    builder.add_conditional_edges(TOOLS, after_tools, [MODEL, COLLECT])
    builder.add_edge(COLLECT, "__end__")
    # None: the parent's checkpointer, under this task's namespace; False: none at all.
    return builder.compile(checkpointer=None if checkpointed else False, name=RESEARCHER)


def to_members(state: ResearcherState) -> list[Send] | str:
    """Send each member its share of the plan's pending queries; with none, start at queries."""
    kinds = state.get("kinds") or ["member"]  # a step run on its own: one kind
    shares = member_shares(state.get("task_plan"), pending_queries(state), kinds)
    return member_sends(state, shares) if shares else QUERIES


def researcher_node(subgraph: ResearcherGraph) -> Node:
    """Return the parent's `researcher` node: the subgraph's run, accounted as one step.

    A step with members runs the subgraph, at most `Deps.max_parallel_members` of them at
    once. An engine that runs no ReAct loop has no turns to resume: its other steps call
    queries then collect directly, without the subgraph's own checkpoints.
    """

    @accounted(RESEARCHER)
    async def researcher(state: ResearchState, runtime: Runtime[Deps]) -> dict[str, Any]:
        """Search and summarise what the step finds; failures are noted, not fatal."""
        step = ResearcherState(
            topic=state["topic"],
            options=state["options"],
            task_plan=state.get("task_plan"),
            queries_done=state.get("queries_done", []),
            research_data=state.get("research_data", []),
            review=state.get("review"),
            iteration_count=state.get("iteration_count", 0),
            first_step=len(state.get("notes", [])) + 1,
            kinds=[kind.name for kind in runtime.context.kinds()],
            tokens_left=_tokens_left(state),
        )
        engine = runtime.context.engine
        members = bool(member_shares(step.get("task_plan"), pending_queries(step), step["kinds"]))
        if members or (isinstance(engine, Investigator) and engine.max_cycles > 0):
            with member_team(step, runtime):
                result = await _investigated(subgraph, step, runtime)
        else:  # nothing in `step` has a reducer yet: a plain merge is the subgraph's
            found = await queries(step, runtime)
            result = collect(cast(ResearcherState, {**step, **found}))
        account_spending(result.get("spending", []))
        for event in result["events"]:
            tell(runtime, event)
        update: dict[str, Any] = result["update"]
        return update

    return researcher


def _tokens_left(state: ResearchState) -> int | None:
    """Return what is left of the run's token budget (None: the run has none)."""
    budget = state["options"].max_tokens
    if budget is None:
        return None
    usage = state.get("usage")
    return budget - (usage.total_tokens if usage is not None else 0)


async def _investigated(
    subgraph: ResearcherGraph, step: ResearcherState, runtime: Runtime[Deps]
) -> dict[str, Any]:
    """Run the subgraph and return its final state; what its nodes tell goes to the parent's custom stream."""
    result: dict[str, Any] = {}
    async for mode, chunk in subgraph.astream(
        step, context=runtime.context, stream_mode=["custom", "values"]
    ):
        if mode == "custom":
            runtime.stream_writer(chunk)
        elif isinstance(chunk, dict):
            result = chunk
    return result
