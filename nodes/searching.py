"""One query through the researcher's pipeline: search, read the top pages, summarise."""

import asyncio
import logging
from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager, nullcontext
from types import TracebackType

from core.models import SearchResult
from core.urls import normalize_url
from engines.base import ModelAccessError
from engines.recording import current_deadline
from nodes.context import Deps
from nodes.reading import PageReads, Reading, ReadPage, ReadPool, describe, read_top_pages
from nodes.research_state import QueryOutcome
from nodes.sources import to_sources

logger = logging.getLogger(__name__)

# How many results the topic's own keyword query asks for: the pool a run collects holds
# at least what one keyword query's top results hold, whatever the plan adds.
WIDE_RESULTS = 20


def observation(outcome: QueryOutcome) -> str:
    """Return what the ReAct loop's model sees of one query: its summary and the results."""
    if outcome.error and not outcome.results:
        return f"The search failed: {outcome.error}"
    listing = "\n".join(f"- {r.title} ({r.url})" for r in outcome.results)
    return f"{outcome.summary or 'No summary.'}\n\nResults:\n{listing or '(none)'}"


def step_deadline() -> float:
    """Return when the run's time budget ends (`time.monotonic()`), as the step records it."""
    deadline = current_deadline()
    if deadline is None:
        raise RuntimeError("the researcher subgraph runs inside the researcher's recording()")
    return deadline


class Allowance:
    """What one member may still spend of its own budget: searches it starts, model tokens.

    Once a budget is spent the member starts no further search and asks the model for no
    further summary; `spent` says which budget it was. None: no cap.
    """

    def __init__(self, searches: int | None, tokens: int | None, used: Callable[[], int]) -> None:
        """`used` returns the model tokens the member has spent so far."""
        self._searches = searches
        self._tokens = tokens
        self._used = used
        self._started = 0
        # With a token budget the model is asked one call at a time, each knowing the last's
        # cost, so a member passes its budget by one call at most.
        self._turn = asyncio.Lock() if tokens is not None else None
        self.spent: str | None = None

    def search(self) -> str | None:
        """Take one search from the budget; return why it may not start, None if it may."""
        if self._searches is not None and self._started >= self._searches:
            searches = "1 search" if self._searches == 1 else f"{self._searches} searches"
            self.spent = self.spent or f"its search budget ({searches}) was spent"
        self._started += 1
        return self.model() or self.spent

    def turn(self) -> AbstractAsyncContextManager[object]:
        """Hold the model for one call (with a token budget; without, calls overlap freely)."""
        return self._turn if self._turn is not None else nullcontext()

    def model(self) -> str | None:
        """Return why the model may not be asked any more, None if it may."""
        used = self._used()
        if self._tokens is not None and used and used >= self._tokens:
            tokens = "1 token" if self._tokens == 1 else f"{self._tokens} tokens"
            self.spent = self.spent or f"its token budget ({tokens}) was spent"
            return self.spent
        return None


class Searcher:
    """Runs queries for one node of a research step; failures are noted, never raised.

    Each outcome goes to `told` in the order the queries started, whatever order they
    finish in, so a run and its replay tell the same. Closing the searcher (an async
    context manager) cancels the page reads nobody waits for.
    """

    def __init__(
        self,
        deps: Deps,
        max_results: int,
        sources: list[SearchResult],
        deadline: float,
        read: Mapping[str, ReadPage],
        told: Callable[[QueryOutcome], None],
        wide: str,
        pool: ReadPool | None = None,
        gate: asyncio.Semaphore | None = None,
        allowance: Allowance | None = None,
    ) -> None:
        """Search with `deps`; `wide` is the query that asks for `WIDE_RESULTS`.

        `wide` is the topic's keyword query; `pool`, the page reads it shares with the
        step's member researchers (`PageReads`); `gate`, the searches they may run at once
        between them (`deps.search_concurrency`, one of its own without); `allowance`, a
        member's budget (none: no cap).
        """
        self._deps = deps
        self._wide = wide.casefold()
        self._told = told
        # Outcomes by the order their queries started; the next one to tell.
        self._started = 0
        self._finished: dict[int, QueryOutcome | None] = {}
        self._next = 0
        self._max_results = max_results
        self._gate = gate or asyncio.Semaphore(deps.search_concurrency)
        self._known = {normalize_url(s.url) for s in sources}
        self._deadline = deadline
        self._allowance = allowance
        self.pages = PageReads(deps.reader, read, pool)

    async def __aenter__(self) -> "Searcher":
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.pages.cancel()  # reads no query is waiting for any more
        for number in range(self._next, self._started):  # after any that never finished
            self._finished.setdefault(number, None)
        self._tell()

    def _tell(self) -> None:
        while self._next in self._finished:
            outcome = self._finished.pop(self._next)
            self._next += 1
            if outcome is not None:
                self._told(outcome)

    async def run_all(self, queries: list[str]) -> list[QueryOutcome]:
        """Run the queries concurrently; return their outcomes in order."""
        return list(await asyncio.gather(*(self.run(q) for q in queries)))

    async def run(self, query: str) -> QueryOutcome:
        """Search, read the top pages, summarise; one query never fails the run."""
        number, self._started = self._started, self._started + 1
        outcome = await self._run(query)
        self._finished[number] = outcome
        self._tell()
        return outcome

    async def _run(self, query: str) -> QueryOutcome:
        deps = self._deps
        limit = self._max_results
        if self._wide and query.casefold() == self._wide:
            limit = max(limit, WIDE_RESULTS)
        async with self._gate:
            refused = self._allowance.search() if self._allowance is not None else None
            if refused is not None:
                return QueryOutcome(
                    query=query, results=[], summary="", error=f"not run: {refused}"
                )
            try:
                hits = await deps.search.search(query, limit)
            except Exception as exc:  # recorded in the note
                logger.warning("search failed for %r: %s", query, type(exc).__name__)
                return QueryOutcome(query=query, results=[], summary="", error=describe(exc))
        results = to_sources(hits, deps.search.name, query)
        if not results:
            return QueryOutcome(query=query, results=[], summary=f"No results for '{query}'.")
        reading = Reading(results)
        if deps.reader is not None and deps.pages_per_query > 0:
            reading = await read_top_pages(
                results, deps.pages_per_query, self._known, self._deadline, self.pages
            )
        return await self._summarised(query, reading)

    async def _summarised(self, query: str, reading: Reading) -> QueryOutcome:
        error: str | None = None
        refused: str | None = None
        allowance = self._allowance
        try:
            async with allowance.turn() if allowance is not None else nullcontext():
                spent = allowance.model() if allowance is not None else None
                if spent is not None:
                    summary, error = "", f"no summary: {spent}"
                else:
                    summary = await self._deps.engine.summarize(query, reading.results)
        except ModelAccessError as exc:  # the results still count; the run halts after this step
            summary, error, refused = "", f"summary failed: {exc}", str(exc)
        except Exception as exc:  # the results still count; only their summary is missing
            logger.warning("summary failed for %r: %s", query, type(exc).__name__)
            summary, error = "", f"summary failed: {describe(exc)}"
        return QueryOutcome(
            query=query,
            results=reading.results,
            summary=summary,
            error=error,
            pages_read=reading.pages_read,
            page_errors=reading.errors,
            refused=refused,
        )
