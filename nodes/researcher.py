"""Researcher: run the pending queries concurrently, keep new sources, note every step."""

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage
from langgraph.runtime import Runtime

from core.models import ResearchNote, SearchResult
from core.state import ResearchState
from core.steps import RESEARCHER
from core.urls import normalize_url
from engines.base import Investigator, LinkFollower, ModelAccessError
from engines.recording import recording
from nodes.accounting import account, merge_updates, run_deadline
from nodes.context import Deps
from nodes.reading import Reading, read_top_pages
from nodes.sources import to_sources
from tools.extraction import Page

logger = logging.getLogger(__name__)


def _pending_queries(state: ResearchState) -> list[str]:
    """The plan's queries not run yet."""
    plan = state.get("task_plan")
    if plan is None:
        return []
    done = {q.casefold() for q in state.get("queries_done", [])}
    return [q for q in plan.search_queries if q.casefold() not in done]


@dataclass(frozen=True, slots=True)
class _Outcome:
    """What one query gave: its results and their summary, or the error that stopped it."""

    query: str
    results: list[SearchResult]
    summary: str
    error: str | None = None
    pages_read: int = 0
    page_errors: list[str] = field(default_factory=list)
    refused: str | None = None  # the model refused to serve (ModelAccessError): the run halts


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


async def researcher(state: ResearchState, runtime: Runtime[Deps]) -> dict[str, Any]:
    """Search and summarise every pending query concurrently; failures are noted, not fatal."""
    started = time.perf_counter()
    with recording(run_deadline(state)) as recorder:
        update = await _research(state, runtime)
    return merge_updates(
        update,
        account(RESEARCHER, state, runtime, started, recorder),
    )


def _observation(outcome: _Outcome) -> str:
    """What the ReAct loop's model sees of one query: its summary and the results' names."""
    if outcome.error and not outcome.results:
        return f"The search failed: {outcome.error}"
    listing = "\n".join(f"- {r.title} ({r.url})" for r in outcome.results)
    return f"{outcome.summary or 'No summary.'}\n\nResults:\n{listing or '(none)'}"


async def _research(state: ResearchState, runtime: Runtime[Deps]) -> dict[str, Any]:
    deps = runtime.context
    options = state["options"]
    plan = state.get("task_plan")
    done = state.get("queries_done", [])
    gate = asyncio.Semaphore(deps.search_concurrency)
    known = {normalize_url(s.url) for s in state.get("research_data", [])}
    deadline = run_deadline(state)
    pages: dict[str, asyncio.Task[Page]] = {}

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
        reading = Reading(results)
        if deps.reader is not None and deps.pages_per_query > 0:
            reading = await read_top_pages(
                results, deps.reader, deps.pages_per_query, known, deadline, pages
            )
        error: str | None = None
        refused: str | None = None
        try:
            summary = await deps.engine.summarize(query, reading.results)
        except ModelAccessError as exc:  # the results still count; the run halts after this step
            summary, error, refused = "", f"summary failed: {exc}", str(exc)
        except Exception as exc:  # the results still count; only their summary is missing
            logger.warning("summary failed for %r: %s", query, type(exc).__name__)
            summary, error = "", f"summary failed: {_describe(exc)}"
        return _Outcome(
            query, reading.results, summary, error, reading.pages_read, reading.errors, refused
        )

    outcomes: list[_Outcome] = []
    scraped: list[SearchResult] = []
    thoughts: list[str] = []
    halted: str | None = None
    pending = _pending_queries(state)
    try:
        if pending or plan is None:
            outcomes = list(await asyncio.gather(*(investigate(q) for q in pending)))
            # A plan a human approved runs as approved: its queries and no others.
            if (
                plan is not None
                and isinstance(deps.engine, LinkFollower)
                and options.approval == "none"
            ):
                first = [r for o in outcomes for r in o.results]
                follow = deps.engine.follow_up(
                    plan, [*state.get("research_data", []), *first], [*done, *pending]
                )
                outcomes += await asyncio.gather(*(investigate(q) for q in follow))
        elif isinstance(deps.engine, Investigator) and deps.engine.max_cycles > 0:
            ran = {q.casefold() for q in done}

            async def search(query: str) -> str:
                if query.casefold() in ran:
                    return f"'{query}' was searched already: try other words."
                ran.add(query.casefold())
                outcome = await investigate(query)
                outcomes.append(outcome)
                return _observation(outcome)

            async def read(url: str) -> str:
                assert deps.reader is not None
                try:
                    page = await deps.reader.fetch(url)
                except Exception as exc:  # the model is told, and may read another page
                    return f"The page could not be read: {_describe(exc)}"
                scraped.append(
                    SearchResult(
                        title=page.title or url,
                        url=page.final_url or url,
                        content=page.text,
                        source="scraper",
                    )
                )
                return page.text[:6_000]

            try:
                async with asyncio.timeout_at(deadline):
                    thoughts = await deps.engine.investigate(
                        plan,
                        done,
                        state.get("research_data", []),
                        search,
                        read if deps.reader is not None else None,
                    )
            except TimeoutError:  # keep what the finished tool calls found
                thoughts.append("The research step ran out of time; writing from what was found.")
        else:
            queries = await deps.engine.refine_queries(
                plan, state.get("research_data", []), done, state.get("review")
            )
            outcomes = list(await asyncio.gather(*(investigate(q) for q in queries)))
    except ModelAccessError as exc:
        halted = str(exc)
    finally:
        for task in pages.values():
            task.cancel()  # a read no query is waiting for any more
    queries = [o.query for o in outcomes]
    # Several queries may find one page; keep the copy with the most text (the page read).
    fullest: dict[str, SearchResult] = {}
    for result in [r for o in outcomes for r in o.results] + scraped:
        key = normalize_url(result.url)
        if key not in fullest or len(result.content) > len(fullest[key].content):
            fullest[key] = result
    seen = set(known)
    first_step = len(state.get("notes", [])) + 1
    new_sources: list[SearchResult] = []
    notes: list[ResearchNote] = []
    for step, outcome in enumerate(outcomes, start=first_step):
        fresh = []
        for found in outcome.results:
            key = normalize_url(found.url)
            if key not in seen:
                seen.add(key)
                result = fullest[key]
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
            pages_read=outcome.pages_read,
            page_errors=outcome.page_errors,
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
                "pages_read": outcome.pages_read,
                "page_errors": len(outcome.page_errors),
            }
        )
    for page in scraped:  # pages the model read that no search of this step returned
        key = normalize_url(page.url)
        if key not in seen:
            seen.add(key)
            new_sources.append(fullest[key])
            runtime.stream_writer(
                {"event": "source", "title": page.title, "url": page.url, "query": None}
            )
    failed = sum(n.status == "failed" for n in notes)
    message = f"Searched {len(queries)} queries: {len(new_sources)} new sources, {failed} failed."
    messages = [
        AIMessage(content=t if t.startswith("Thought") else f"Thought: {t}", name=RESEARCHER)
        for t in thoughts
    ]
    update: dict[str, Any] = {
        "research_data": new_sources,
        "queries_done": queries,
        "notes": notes,
        "iteration_count": state.get("iteration_count", 0) + 1,
        "messages": [*messages, AIMessage(content=message, name=RESEARCHER)],
        # Nothing left to search: the supervisor writes instead of asking again.
        "research_exhausted": not queries,
    }
    halted = halted or next((o.refused for o in outcomes if o.refused), None)
    if halted:
        update["halted"] = halted
    return update
