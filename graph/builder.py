"""Assemble the research graph: its nodes, edges and routing."""

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from core.state import ResearchState
from core.steps import APPROVE_PLAN, FINALIZE, RESEARCHER, REVIEWER, SUPERVISOR, WRITER
from graph.researcher import build_researcher, researcher_node
from graph.routing import route_reviewer, route_supervisor
from nodes.approval import approve_plan
from nodes.context import Deps
from nodes.finalize import finalize
from nodes.progress import announced
from nodes.reviewer import reviewer
from nodes.supervisor import supervisor
from nodes.writer import writer

ResearchGraph = CompiledStateGraph[ResearchState, Deps, ResearchState, ResearchState]


def build_graph(checkpointer: BaseCheckpointSaver[str] | None = None) -> ResearchGraph:
    """Compile the graph: supervisor -> (approval) -> researcher <-> supervisor -> writer -> reviewer -> ..."""
    builder = StateGraph(ResearchState, context_schema=Deps)
    # Each node tells the run when it starts and finishes (`nodes.progress`).
    builder.add_node(SUPERVISOR, announced(SUPERVISOR, supervisor))
    builder.add_node(APPROVE_PLAN, announced(APPROVE_PLAN, approve_plan))
    builder.add_node(RESEARCHER, announced(RESEARCHER, researcher_node(build_researcher())))
    builder.add_node(WRITER, announced(WRITER, writer))
    builder.add_node(REVIEWER, announced(REVIEWER, reviewer))
    builder.add_node(FINALIZE, announced(FINALIZE, finalize), destinations=(WRITER, "__end__"))
    builder.add_edge(START, SUPERVISOR)
    builder.add_conditional_edges(
        SUPERVISOR, route_supervisor, [APPROVE_PLAN, RESEARCHER, WRITER, REVIEWER, FINALIZE]
    )
    builder.add_edge(APPROVE_PLAN, SUPERVISOR)
    builder.add_edge(RESEARCHER, SUPERVISOR)
    builder.add_edge(WRITER, REVIEWER)
    builder.add_conditional_edges(REVIEWER, route_reviewer, [RESEARCHER, WRITER, FINALIZE])
    return builder.compile(checkpointer=checkpointer)
