"""Researcher: run the pending queries concurrently, keep new sources, note every step."""

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage
from langgraph.runtime import Runtime

from graph.models import ResearchNote, SearchResult
from graph.routing import RESEARCHER
from graph.state import ResearchState
from nodes.accounting import spent
from nodes.context import Deps
from nodes.sources import to_sources
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


@dataclass(frozen=True, slots=True)
class _Outcome:
    """What one query gave: its results and their summary, or the error that stopped it."""

    query: str
    results: list[SearchResult]
    summary: str
    error: str | None = None


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


async def researcher(state: ResearchState, runtime: Runtime[Deps]) -> dict[str, Any]:
    """Search and summarise every pending query concurrently; failures are noted, not fatal."""
    started = time.perf_counter()
    deps = runtime.context
    options = state["options"]
    queries = await _pending_queries(state, deps)
    gate = asyncio.Semaphore(deps.search_concurrency)

    async def investigate(query: str) -> _Outcome:
        async with gate:
            try:
                hits = await deps.search.search(query, options.max_results)
            except Exception as exc:  # recorded in the note; one query never fails the run
                logger.warning("search failed for %r: %s", query, type(exc).__name__)
                return _Outcome(query, [], "", _describe(exc))
        results = to_sources(hits, deps.search.name, query)
        if not results:
            return _Outcome(query, [], f"No results for '{query}'.")
        try:
            summary = await deps.engine.summarize(query, results)
        except Exception as exc:  # the results still count; only their summary is missing
            logger.warning("summary failed for %r: %s", query, type(exc).__name__)
            return _Outcome(query, results, "", f"summary failed: {_describe(exc)}")
        return _Outcome(query, results, summary)

    outcomes = await asyncio.gather(*(investigate(q) for q in queries))
    seen = {normalize_url(s.url) for s in state.get("research_data", [])}
    first_step = len(state.get("notes", [])) + 1
    new_sources: list[SearchResult] = []
    notes: list[ResearchNote] = []
    for step, outcome in enumerate(outcomes, start=first_step):
        fresh = []
        for result in outcome.results:
            key = normalize_url(result.url)
            if key not in seen:
                seen.add(key)
                fresh.append(result)
                runtime.stream_writer(
                    {
                        "event": "source",
                        "title": result.title,
                        "url": result.url,
                        "query": outcome.query,
                    }
                )
        new_sources.extend(fresh)
        status = "ok" if outcome.results else "failed" if outcome.error else "empty"
        note = ResearchNote(
            step_no=step,
            query=outcome.query,
            summary_md=outcome.summary,
            sources=[r.url for r in outcome.results],
            status=status,
            error=outcome.error,
        )
        notes.append(note)
        runtime.stream_writer(
            {
                "event": "note",
                "step_no": step,
                "query": outcome.query,
                "status": status,
                "results": len(outcome.results),
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
