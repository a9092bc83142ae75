"""Writer: a new draft from every source collected so far."""

import time
from typing import Any

from langchain_core.messages import AIMessage
from langgraph.runtime import Runtime

from graph.models import Draft
from graph.routing import WRITER
from graph.state import ResearchState
from nodes.accounting import spent
from nodes.context import Deps


async def writer(state: ResearchState, runtime: Runtime[Deps]) -> dict[str, Any]:
    """Write the report; the last review and any human feedback steer a rewrite."""
    started = time.perf_counter()
    plan = state.get("task_plan")
    if plan is None:
        raise ValueError("the writer needs a plan")
    sources = state.get("research_data", [])
    markdown = await runtime.context.engine.write(
        plan, sources, state.get("review"), state.get("feedback")
    )
    version = len(state.get("drafts", [])) + 1
    runtime.stream_writer({"event": "draft", "version": version, "chars": len(markdown)})
    return {
        "current_draft": markdown,
        "drafts": [Draft(version=version, markdown=markdown, source_count=len(sources))],
        "iteration_count": state.get("iteration_count", 0) + 1,
        "messages": [
            AIMessage(content=f"Draft {version} written ({len(markdown)} characters).", name=WRITER)
        ],
        "usage": spent(WRITER, started, requests=1),
    }
