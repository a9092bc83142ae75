"""The comparison graph `langgraph dev` serves in bench/sdk_load.py.

The same shape as the research graph's critical path under RESEARCH_SIMULATE_LATENCY_MS:
four sequential async nodes, each sleeping SDK_BENCH_LATENCY_MS (default 50), emitting
one custom event through `get_stream_writer()` and returning a state update of a few KB
(a plan, five search hits of 1,200 characters each, a draft, a review). Standalone: it
imports only langgraph, so that the separate venv of `langgraph dev` can load it.
"""

import asyncio
import operator
import os
from typing import Annotated, Any, TypedDict

from langgraph.config import get_stream_writer
from langgraph.graph import END, START, StateGraph

LATENCY_S = float(os.environ.get("SDK_BENCH_LATENCY_MS", "50")) / 1000
CONTENT_CHARS = 1200  # a search snippet, as tools/simulated.py sizes it
HITS = 5


class State(TypedDict, total=False):
    """What a run carries from node to node."""

    topic: str
    plan: dict[str, Any]
    sources: Annotated[list[dict[str, Any]], operator.add]
    draft: str
    review: dict[str, Any]


def _filler(sentence: str, chars: int) -> str:
    return " ".join([sentence] * (chars // (len(sentence) + 1) + 1))[:chars]


async def plan(state: State) -> State:
    """Sleep, then a plan of about 1 KB."""
    await asyncio.sleep(LATENCY_S)
    topic = state.get("topic", "")
    update = {
        "theme": topic,
        "investigation_points": [topic],
        "search_queries": [topic],
        "plan_text": _filler(f"Plan for {topic}.", 800),
    }
    get_stream_writer()({"event": "plan", "plan": {"theme": topic}})
    return {"plan": update}


async def research(state: State) -> State:
    """Sleep, then five hits of 1,200 characters (about 6 KB)."""
    await asyncio.sleep(LATENCY_S)
    topic = state.get("topic", "")
    hits = [
        {
            "title": f"Result {i} for {topic}",
            "url": f"https://simulated.invalid/{i}",
            "content": _filler(f"Simulated finding {i} about {topic}.", CONTENT_CHARS),
            "score": 1.0 / (i + 1),
        }
        for i in range(HITS)
    ]
    get_stream_writer()({"event": "note", "query": topic, "results": len(hits)})
    return {"sources": hits}


async def write(state: State) -> State:
    """Sleep, then a draft citing every source (about 4 KB)."""
    await asyncio.sleep(LATENCY_S)
    sources = state.get("sources", [])
    claims = " ".join(f"{s['content'][:600]}[^{i}]" for i, s in enumerate(sources, start=1))
    draft = f"# {state.get('topic', '')}\n\n## Key Findings\n\n{claims}\n"
    get_stream_writer()({"event": "draft", "version": 1, "chars": len(draft)})
    return {"draft": draft}


async def review(state: State) -> State:
    """Sleep, then an approving review of about 1 KB."""
    await asyncio.sleep(LATENCY_S)
    verdict = {
        "approved": True,
        "overall_score": 1.0,
        "scores": {"fact_check": 1.0, "completeness": 1.0, "logic": 1.0, "format": 1.0},
        "feedback": _filler("The draft is well sourced.", 800),
    }
    get_stream_writer()({"event": "review", "version": 1, "approved": True})
    return {"review": verdict}


builder = StateGraph(State)
builder.add_node("plan", plan)
builder.add_node("research", research)
builder.add_node("write", write)
builder.add_node("review", review)
builder.add_edge(START, "plan")
builder.add_edge("plan", "research")
builder.add_edge("research", "write")
builder.add_edge("write", "review")
builder.add_edge("review", END)
graph = builder.compile()
