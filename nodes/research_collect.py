"""The research step's findings: told as each query finishes, collected at the step's end.

Both go through `Findings`, query by query in the order they ran, so they agree.
"""

from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.messages import AIMessage

from core.models import ResearchNote, SearchResult
from core.steps import RESEARCHER
from core.urls import normalize_url
from core.usage import MemberSubmissionsRecord, RoundRecord
from nodes.accounting import client_thread_id
from nodes.research_state import QueryOutcome, ResearcherState


def fullest_copies(
    outcomes: list[QueryOutcome], scraped: list[SearchResult]
) -> dict[str, SearchResult]:
    """Return each page's copy with the most text (the page read), by URL."""
    fullest: dict[str, SearchResult] = {}
    for result in [r for o in outcomes for r in o.results] + scraped:
        key = normalize_url(result.url)
        if key not in fullest or len(result.content) > len(fullest[key].content):
            fullest[key] = result
    return fullest


def _note(step: int, outcome: QueryOutcome, fresh: int) -> tuple[ResearchNote, dict[str, Any]]:
    """Return one query's note, and its `note` event."""
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


class Findings:
    """Which sources are new, query by query, and each query's note and events."""

    def __init__(self, state: ResearcherState) -> None:
        self._seen = {normalize_url(s.url) for s in state.get("research_data", [])}
        self._step = state.get("first_step", 1)

    def is_new(self, source: SearchResult) -> bool:
        """Return whether `source` is new to the run, and count it as seen."""
        key = normalize_url(source.url)
        new = key not in self._seen
        self._seen.add(key)
        return new

    def add(
        self, outcome: QueryOutcome
    ) -> tuple[list[SearchResult], ResearchNote, list[dict[str, Any]]]:
        """Return the next query's new sources, its note, and its events."""
        fresh = [found for found in outcome.results if self.is_new(found)]
        note, event = _note(self._step, outcome, len(fresh))
        self._step += 1
        return fresh, note, [*(_source_event(found, outcome.query) for found in fresh), event]


def teller(
    state: ResearcherState,
    tell: Callable[[dict[str, Any], str], None],
    earlier: Sequence[QueryOutcome] = (),
) -> Callable[[QueryOutcome], None]:
    """Return a function that tells each further query's findings (event, lane).

    It tells them after those in `state` and the `earlier` ones (told already, the
    step's members'), numbered on from them. Each query's events are a lane of their
    own, named by its step number (`nodes.progress`): a step resumed from its checkpoint
    may not tell them again, and its later events keep their places.
    """
    findings = Findings(state)
    for outcome in [*state.get("outcomes", []), *earlier]:
        findings.add(outcome)

    def told(outcome: QueryOutcome) -> None:
        _, note, events = findings.add(outcome)
        for event in events:
            tell(event, f"query{note.step_no}")

    return told


def collect(state: ResearcherState) -> dict[str, Any]:
    """Return the parent's update (notes, new sources) and the events of pages read.

    The queries' events were told as they finished; the pages the model read that no
    search returned are told at the end (`events`).
    """
    outcomes, scraped = state.get("outcomes", []), state.get("scraped", [])
    fullest = fullest_copies(outcomes, scraped)
    findings = Findings(state)
    new_sources: list[SearchResult] = []
    notes: list[ResearchNote] = []
    events: list[dict[str, Any]] = []
    for outcome in outcomes:
        fresh, note, _ = findings.add(outcome)
        new_sources.extend(fullest[normalize_url(found.url)] for found in fresh)
        notes.append(note)
    for page in scraped:
        if findings.is_new(page):
            new_sources.append(fullest[normalize_url(page.url)])
            events.append(_source_event(page, None))
    return {"update": _update(state, new_sources, notes), "events": events}


def _source_event(source: SearchResult, query: str | None) -> dict[str, Any]:
    return {"event": "source", "title": source.title, "url": source.url, "query": query}


def _update(
    state: ResearcherState, new_sources: list[SearchResult], notes: list[ResearchNote]
) -> dict[str, Any]:
    """Return the parent's update: sources, queries, notes, messages, members' record, a halt."""
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
    if (members := members_record(state)) is not None:
        number = members.round_number
        update["rounds"] = [
            RoundRecord(thread_id=client_thread_id(), round_number=number, members=members)
        ]
    refused = next((o.refused for o in state.get("outcomes", []) if o.refused), None)
    if halted := state.get("halted") or refused:
        update["halted"] = halted
    return update


def members_record(state: ResearcherState) -> MemberSubmissionsRecord | None:
    """Return the round's record of its members' submissions, in member order (None: no members)."""
    reports = sorted(state.get("members", []), key=lambda r: r.share.index)
    if not reports:
        return None
    return MemberSubmissionsRecord(
        round_number=state.get("iteration_count", 0) + 1,
        submissions=[r.submission for r in reports],
    )
