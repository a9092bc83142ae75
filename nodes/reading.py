"""Read the best result pages of a query, so sources hold page text instead of snippets."""

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from core.models import SearchResult
from core.urls import normalize_url
from nodes.context import PageReader
from tools.extraction import Page

# Sources are checkpointed with the state: keep a page to the size of a long article.
MAX_PAGE_CHARS = 20_000


@dataclass
class Reading:
    """The results with page text where it could be read, and what went wrong elsewhere."""

    results: list[SearchResult]
    pages_read: int = 0
    errors: list[str] = field(default_factory=list)


async def read_top_pages(
    results: Sequence[SearchResult],
    reader: PageReader,
    count: int,
    known: set[str],
    deadline: float,
    shared: dict[str, asyncio.Task[Page]],
) -> Reading:
    """Fetch the top `count` results not already known, concurrently, until `deadline`.

    `shared` maps normalised URLs to fetches already started in this research step, so
    queries that find the same page read it once. `deadline` is a `time.monotonic()`
    value: reads still running then are cancelled and noted, so reading pages never
    spends more than the run's time budget.
    """
    reading = Reading(list(results))
    targets = [i for i, r in enumerate(results) if normalize_url(r.url) not in known][:count]
    if not targets:
        return reading
    tasks: dict[int, asyncio.Task[Page]] = {}
    for i in targets:
        key = normalize_url(results[i].url)
        if key not in shared:
            shared[key] = asyncio.create_task(reader.fetch(results[i].url))
        tasks[i] = shared[key]
    await asyncio.wait(tasks.values(), timeout=max(0.0, deadline - time.monotonic()))
    for i, task in tasks.items():
        source = results[i]
        if not task.done() or task.cancelled():
            task.cancel()
            reading.errors.append(f"{source.url}: not read, the time budget ran out")
            continue
        error = task.exception()
        if error is not None:
            reading.errors.append(f"{source.url}: {type(error).__name__}: {error}")
            continue
        page = task.result()
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
