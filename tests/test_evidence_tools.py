"""Recording and replaying a run's tools, and finding the passage a sentence cites."""

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from app.retention import prune_once
from app.settings import Settings
from core.models import Rerun
from engines.extractive import ExtractiveEngine
from nodes.context import Deps
from nodes.reading import describe
from service.citations import closest_passage
from service.evidence import run_deps
from stores.evidence import PageRead, RunHeader, SearchCall, load
from stores.sqlite_evidence import SqliteEvidenceStore
from stores.sqlite_writer import open_sqlite
from tools.errors import ProviderError, ScrapeError
from tools.extraction import Page
from tools.search import Depth, SearchError, SearchHit


class Web:
    """A search provider and page reader whose answers change between calls."""

    name = "web"

    def __init__(self) -> None:
        self.calls = 0

    async def search(
        self, query: str, max_results: int = 5, depth: Depth = "basic"
    ) -> list[SearchHit]:
        self.calls += 1
        if query == "broken":
            raise ProviderError("the provider is down", "NETWORK_ERROR")
        return [
            SearchHit(
                title=f"{query} {self.calls}",
                url=f"https://x.test/{query}/{i}",
                content=f"{query} result {i}, call {self.calls}.",
                score=0.5,
            )
            for i in range(max_results)
        ]

    async def fetch(self, url: str) -> Page:
        self.calls += 1
        if url.endswith("/1"):
            raise ScrapeError(f"HTTP 404 for {url}")
        return Page(url=url, final_url=url, title="T", text=f"  Page {url}, call {self.calls}.  ")


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteEvidenceStore]:
    async with open_sqlite(tmp_path / "service.sqlite", SqliteEvidenceStore) as opened:
        yield opened


async def record_a_run(store: SqliteEvidenceStore, web: Web) -> None:
    deps = await run_deps(
        Deps(engine=ExtractiveEngine(), search=web, reader=web, pages_per_query=3),
        store,
        "original",
        None,
    )
    assert deps.reader is not None
    await deps.search.search("alpha", 2)
    await deps.search.search("alpha", 2)  # asked twice: answered differently each time
    with pytest.raises(ProviderError):
        await deps.search.search("broken", 2)
    await deps.reader.fetch("https://x.test/alpha/0")
    with pytest.raises(ScrapeError):
        await deps.reader.fetch("https://x.test/alpha/1")
    await store.flush()


async def replaying(store: SqliteEvidenceStore) -> Deps:
    source = await load(store, "original")
    assert source.header is not None
    script = [r for r in source.records if isinstance(r, SearchCall | PageRead)]
    header = source.header.model_copy(update={"mode": "replay", "script": script})
    await store.put("replay", source.model_copy(update={"header": header, "records": []}))
    live = Deps(engine=ExtractiveEngine(), search=Web(), reader=None, pages_per_query=0)
    return await run_deps(live, store, "replay", Rerun(of="original", mode="replay"))


async def test_a_recorded_run_keeps_every_answer_and_failure_in_order(
    store: SqliteEvidenceStore,
) -> None:
    await record_a_run(store, Web())
    evidence = await load(store, "original")
    assert evidence.header is not None
    assert (evidence.header.mode, evidence.header.provider) == ("live", "web")
    assert (evidence.header.pages_per_query, evidence.header.reads_pages) == (3, True)
    kinds = [(r.kind, getattr(r, "query", None) or getattr(r, "url", "")) for r in evidence.records]
    assert kinds == [
        ("search", "alpha"),
        ("search", "alpha"),
        ("search", "broken"),
        ("page", "https://x.test/alpha/0"),
        ("page", "https://x.test/alpha/1"),
    ]
    broken = evidence.records[2]
    assert (
        isinstance(broken, SearchCall)
        and broken.error == "ProviderError: NETWORK_ERROR: the provider is down"
    )
    page = evidence.records[3]
    assert isinstance(page, PageRead) and page.content_hash is not None
    # a page's text is kept as the run keeps it: stripped
    assert evidence.contents[page.content_hash].startswith("Page https://x.test/alpha/0")


async def test_a_replay_answers_each_call_as_the_original_was_answered(
    store: SqliteEvidenceStore,
) -> None:
    web = Web()
    await record_a_run(store, web)
    original = await load(store, "original")
    deps = await replaying(store)
    assert deps.search.name == "web" and deps.pages_per_query == 3 and deps.reader is not None
    first, second = await deps.search.search("alpha", 2), await deps.search.search("alpha", 2)
    recorded = [r for r in original.records if isinstance(r, SearchCall)]
    assert [h.title for h in first] == [h.title for h in recorded[0].hits]
    assert [h.title for h in second] == [h.title for h in recorded[1].hits]
    assert first != second
    with pytest.raises(SearchError) as failed:  # the failure comes back as it was noted
        await deps.search.search("broken", 2)
    assert describe(failed.value) == "ProviderError: NETWORK_ERROR: the provider is down"
    page = await deps.reader.fetch("https://x.test/alpha/0")
    assert page.text.startswith("Page https://x.test/alpha/0")
    with pytest.raises(ScrapeError) as missing:
        await deps.reader.fetch("https://x.test/alpha/1")
    assert describe(missing.value) == "ScrapeError: HTTP 404 for https://x.test/alpha/1"
    with pytest.raises(Exception, match="never searched"):
        await deps.search.search("something new", 2)
    calls = web.calls
    assert web.calls == calls  # nothing reached the live tools
    await store.flush()
    replayed = await load(store, "replay")
    assert [r.kind for r in replayed.records] == [
        "search",
        "search",
        "search",
        "page",
        "page",
        "search",
    ]


def test_the_closest_passage_is_the_sentence_holding_the_claim() -> None:
    text = (
        "Paris is the capital of France. The Seine flows through Paris. "
        "Gutenberg printed his Bible in Mainz around 1455. Mainz lies on the Rhine."
    )
    quote = closest_passage("Gutenberg printed the Bible in Mainz in about 1455", text)
    assert text[quote.start : quote.end] == "Gutenberg printed his Bible in Mainz around 1455."
    assert quote.support > 0.7
    spread = closest_passage("Paris lies on the Seine, the capital of France", text)
    assert text[spread.start : spread.end] == (
        "Paris is the capital of France. The Seine flows through Paris."
    )


async def test_the_retention_settings_prune_old_runs_and_keep_the_rest(
    store: SqliteEvidenceStore, tmp_path: Path
) -> None:
    now = datetime.now(UTC)
    for thread, age in (("old", 40), ("recent", 5)):
        header = RunHeader(created_at=now - timedelta(days=age))
        store.add(thread, header, SearchCall(provider="p", query="q", max_results=1), [])
    await store.flush()
    keep_all = Settings(data_dir=tmp_path, evidence_retention_days=0, evidence_max_mb=0)
    assert await prune_once(store, keep_all) == 0
    month = Settings(data_dir=tmp_path, evidence_retention_days=30)
    assert await prune_once(store, month) == 1
    assert await store.header("old") is None
    assert await store.header("recent") is not None
