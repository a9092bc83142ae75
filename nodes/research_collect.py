"""The research step's end: its outcomes as the update the parent graph sees, and its events."""

from typing import Any

from langchain_core.messages import AIMessage

from core.models import ResearchNote, SearchResult
from core.steps import RESEARCHER
from core.urls import normalize_url
from nodes.research_state import QueryOutcome, ResearcherState


def fullest_copies(
    outcomes: list[QueryOutcome], scraped: list[SearchResult]
) -> dict[str, SearchResult]:
    """Several queries may find one page; the copy with the most text (the page read) by URL."""
    fullest: dict[str, SearchResult] = {}
    for result in [r for o in outcomes for r in o.results] + scraped:
        key = normalize_url(result.url)
        if key not in fullest or len(result.content) > len(fullest[key].content):
            fullest[key] = result
    return fullest


def _note(step: int, outcome: QueryOutcome, fresh: int) -> tuple[ResearchNote, dict[str, Any]]:
    """One query's note, and its `note` event."""
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
    event = {
        "event": "note",
        "step_no": step,
        "query": outcome.query,
        "status": status,
        "results": len(outcome.results),
        "new": fresh,
        "pages_read": outcome.pages_read,
        "page_errors": len(outcome.page_errors),
    }
    return note, event


def collect(state: ResearcherState) -> dict[str, Any]:
    """Notes for every query, the new sources (each once), and the events that say so."""
    outcomes, scraped = state.get("outcomes", []), state.get("scraped", [])
    fullest = fullest_copies(outcomes, scraped)
    seen = {normalize_url(s.url) for s in state.get("research_data", [])}
    new_sources: list[SearchResult] = []
    notes: list[ResearchNote] = []
    events: list[dict[str, Any]] = []
    for step, outcome in enumerate(outcomes, start=state.get("first_step", 1)):
        fresh = []
        for found in outcome.results:
            key = normalize_url(found.url)
            if key not in seen:
                seen.add(key)
                fresh.append(fullest[key])
                events.append(_source_event(fullest[key], outcome.query))
        new_sources.extend(fresh)
        note, event = _note(step, outcome, len(fresh))
        notes.append(note)
        events.append(event)
    for page in scraped:  # pages the model read that no search of this step returned
        key = normalize_url(page.url)
        if key not in seen:
            seen.add(key)
            new_sources.append(fullest[key])
            events.append(_source_event(page, None))
    return {"update": _update(state, new_sources, notes), "events": events}


def _source_event(source: SearchResult, query: str | None) -> dict[str, Any]:
    return {"event": "source", "title": source.title, "url": source.url, "query": query}


def _update(
    state: ResearcherState, new_sources: list[SearchResult], notes: list[ResearchNote]
) -> dict[str, Any]:
    """The parent's update: sources, queries, notes, the step's messages, and a halt."""
    queries = [o.query for o in state.get("outcomes", [])]
    failed = sum(n.status == "failed" for n in notes)
    message = f"Searched {len(queries)} queries: {len(new_sources)} new sources, {failed} failed."
    messages = [
        AIMessage(content=t if t.startswith("Thought") else f"Thought: {t}", name=RESEARCHER)
        for t in state.get("thoughts", [])
    ]
    update: dict[str, Any] = {
        "research_data": new_sources,
        "queries_done": queries,
        "notes": notes,
        "iteration_count": state.get("iteration_count", 0) + 1,
        "messages": [*messages, AIMessage(content=message, name=RESEARCHER)],
    }
    refused = next((o.refused for o in state.get("outcomes", []) if o.refused), None)
    if halted := state.get("halted") or refused:
        update["halted"] = halted
    return update
