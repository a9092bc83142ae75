"""Researcher: run the pending queries concurrently, keep new sources, note every step."""

import asyncio
import logging
import time
from typing import Any

from langchain_core.messages import AIMessage
from langgraph.runtime import Runtime

from graph.models import ResearchNote, SearchResult
from graph.routing import RESEARCHER
from graph.state import ResearchState
from nodes.accounting import spent
from nodes.context import Deps
from tools.urls import normalize_url

logger = logging.getLogger(__name__)


async def _pending_queries(state: ResearchState, deps: Deps) -> list[str]:
    plan = state.get("task_plan")
    if plan is None:
        return []
    done = {q.casefold() for q in state.get("queries_done", [])}
    pending = [q for q in plan.search_queries if q.casefold() not in done]
    if pending:
        return pending
    return await deps.engine.refine_queries(
        plan, state.get("research_data", []), state.get("queries_done", []), state.get("review")
    )


async def researcher(state: ResearchState, runtime: Runtime[Deps]) -> dict[str, Any]:
    """Search every pending query; a failed or empty query is noted and skipped."""
    started = time.perf_counter()
    deps = runtime.context
    options = state["options"]
    queries = await _pending_queries(state, deps)
    gate = asyncio.Semaphore(deps.search_concurrency)

    async def run(query: str) -> tuple[str, list[SearchResult] | BaseException]:
        async with gate:
            try:
                hits = await deps.search.search(query, options.max_results)
            except Exception as exc:  # recorded in the note; one query never fails the run
                return query, exc
        return query, [
            SearchResult(
                title=h.title,
                url=h.url,
                content=h.content,
                source=deps.search.name,
                published_date=h.published_date,
                relevance_score=h.score,
                query=query,
            )
            for h in hits
        ]

    outcomes = await asyncio.gather(*(run(q) for q in queries))
    seen = {normalize_url(s.url) for s in state.get("research_data", [])}
    step = len(state.get("notes", []))
    new_sources: list[SearchResult] = []
    notes: list[ResearchNote] = []
    for query, outcome in outcomes:
        step += 1
        if isinstance(outcome, BaseException):
            logger.warning("search failed for %r: %s", query, type(outcome).__name__)
            notes.append(
                ResearchNote(
                    step_no=step,
                    query=query,
                    summary_md="",
                    status="failed",
                    error=f"{type(outcome).__name__}: {outcome}",
                )
            )
            continue
        if not outcome:
            notes.append(
                ResearchNote(
                    step_no=step,
                    query=query,
                    summary_md=f"No results for '{query}'.",
                    status="empty",
                )
            )
            continue
        fresh = []
        for result in outcome:
            key = normalize_url(result.url)
            if key not in seen:
                seen.add(key)
                fresh.append(result)
        new_sources.extend(fresh)
        for result in fresh:
            runtime.stream_writer(
                {"event": "source", "title": result.title, "url": result.url, "query": query}
            )
        summary = await deps.engine.summarize(query, outcome)
        note = ResearchNote(
            step_no=step, query=query, summary_md=summary, sources=[r.url for r in outcome]
        )
        notes.append(note)
        runtime.stream_writer(
            {
                "event": "note",
                "step_no": note.step_no,
                "query": query,
                "results": len(outcome),
                "new": len(fresh),
            }
        )
    failed = sum(n.status == "failed" for n in notes)
    message = f"Searched {len(queries)} queries: {len(new_sources)} new sources, {failed} failed."
    return {
        "research_data": new_sources,
        "queries_done": queries,
        "notes": notes,
        "iteration_count": state.get("iteration_count", 0) + 1,
        "messages": [AIMessage(content=message, name=RESEARCHER)],
        "usage": spent(RESEARCHER, started, requests=len(queries)),
    }
