"""Read the best result pages of a query, so sources hold page text instead of snippets.

A research step reads each page once, across its queries, tool calls and turns.
"""

import asyncio
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from pydantic import BaseModel

from core.models import SearchResult
from core.urls import normalize_url
from nodes.context import PageReader

# Sources are checkpointed with the state: keep a page to the size of a long article.
MAX_PAGE_CHARS = 20_000


def describe(exc: BaseException) -> str:
    """Return an exception as the notes and the model see it."""
    return f"{type(exc).__name__}: {exc}"


def kept_text(text: str) -> str:
    """Return a page's text as a run keeps it: stripped, to the size of a long article."""
    return text.strip()[:MAX_PAGE_CHARS]


class ReadPage(BaseModel):
    """A page fetched in this research step, or why it could not be read (`error`)."""

    url: str
    final_url: str = ""
    title: str = ""
    text: str = ""
    published_date: str | None = None
    error: str | None = None

    def kept(self) -> "ReadPage":
        """Return the page as the step's state keeps it: its text to a long article's size."""
        if len(self.text) <= MAX_PAGE_CHARS:
            return self
        return self.model_copy(update={"text": kept_text(self.text)})


# A research step's page reads by normalised URL, shared by its member researchers.
ReadPool = dict[str, "asyncio.Task[ReadPage]"]


class PageReads:
    """The page reads of one node of a research step: each page is fetched at most once.

    `earlier` holds the pages earlier nodes of the step read (kept in its checkpointed
    state); the pages this node read are `fresh`, and `cancel` stops the unfinished reads.
    With a `pool`, the reads of the step's members running at once: a page one of them
    reads is not fetched again by another, and the pool's owner cancels what is left.
    """

    def __init__(
        self,
        reader: PageReader | None,
        earlier: Mapping[str, ReadPage],
        pool: ReadPool | None = None,
    ) -> None:
        self._reader = reader
        self._earlier = earlier
        self._shared = pool is not None
        self._pool: ReadPool = pool if pool is not None else {}
        self._tasks: ReadPool = {}  # the reads this node wanted

    def read(self, url: str) -> "asyncio.Future[ReadPage]":
        """Return the page at `url`: read already, being read, or fetched now."""
        key = normalize_url(url)
        if key in self._earlier:
            done: asyncio.Future[ReadPage] = asyncio.get_running_loop().create_future()
            done.set_result(self._earlier[key])
            return done
        if key not in self._pool:
            self._pool[key] = asyncio.create_task(self._fetch(url))
        self._tasks[key] = self._pool[key]
        return self._tasks[key]

    async def _fetch(self, url: str) -> ReadPage:
        assert self._reader is not None, "pages are read only in a run with a page reader"
        try:
            page = await self._reader.fetch(url)
        except Exception as exc:  # noted where the page was wanted
            return ReadPage(url=url, error=describe(exc))
        fields = {"final_url", "title", "text", "published_date"}
        return ReadPage(url=url, **page.model_dump(include=fields))

    def fresh(self) -> dict[str, ReadPage]:
        """Return the pages this node read, by normalised URL, as the step's state keeps them.

        A page that could not be read is not kept: a later turn may try it again.
        """
        finished = [
            (k, t.result()) for k, t in self._tasks.items() if t.done() and not t.cancelled()
        ]
        return {key: page.kept() for key, page in finished if page.error is None}

    def cancel(self) -> None:
        """Cancel the reads nobody waits for any more (a shared pool's owner cancels its own)."""
        if not self._shared:
            cancel_reads(self._pool)


def cancel_reads(pool: ReadPool) -> None:
    """Cancel the pool's reads still running."""
    for task in pool.values():
        task.cancel()


@dataclass
class Reading:
    """The results with page text where it could be read, and what went wrong elsewhere."""

    results: list[SearchResult]
    pages_read: int = 0
    errors: list[str] = field(default_factory=list)


async def read_top_pages(
    results: Sequence[SearchResult],
    count: int,
    known: set[str],
    deadline: float,
    reads: PageReads,
) -> Reading:
    """Fetch the top `count` results not already known, concurrently, until `deadline`.

    Reads still running at `deadline` (`time.monotonic()`) are cancelled and noted, so
    reading never spends more than the run's time budget.
    """
    reading = Reading(list(results))
    # An uploaded document's passage (`service.collections`) is whole: there is no page to read.
    targets = [
        i
        for i, r in enumerate(results)
        if not r.url.startswith("collection://") and normalize_url(r.url) not in known
    ][:count]
    if not targets:
        return reading
    tasks = {i: reads.read(results[i].url) for i in targets}
    await asyncio.wait(tasks.values(), timeout=max(0.0, deadline - time.monotonic()))
    for i, task in tasks.items():
        source = results[i]
        if not task.done() or task.cancelled():
            task.cancel()
            reading.errors.append(f"{source.url}: not read, the time budget ran out")
            continue
        page = task.result()
        if page.error is not None:
            reading.errors.append(f"{source.url}: {page.error}")
            continue
        text = page.text.strip()
        if len(text) <= len(source.content.strip()):
            continue  # extraction found less than the search snippet: keep the snippet
        reading.results[i] = source.model_copy(
            update={
                "content": text[:MAX_PAGE_CHARS],
                "title": source.title or page.title,
                "published_date": source.published_date or page.published_date,
            }
        )
        reading.pages_read += 1
    return reading
