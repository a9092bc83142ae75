import asyncio

from engines.extractive import ExtractiveEngine
from graph.builder import ResearchGraph
from nodes.context import Deps
from tools.errors import ScrapeError, UnsafeURLError
from tools.extraction import Page
from tools.local_corpus import LocalCorpus

from .support import run_graph, start


class FakeReader:
    """Serves a long page for most URLs, refuses Wikipedia-like 'Paper', can be slow."""

    def __init__(self, delay_s: float = 0.0) -> None:
        self.delay_s = delay_s
        self.fetched: list[str] = []

    async def fetch(self, url: str) -> Page:
        self.fetched.append(url)
        await asyncio.sleep(self.delay_s)
        if "Paper" in url:
            raise UnsafeURLError("refused: the address is private")
        if "Reformation" in url:
            raise ScrapeError("HTTP 404")
        text = (
            f"Full article at {url}. "
            + "The printing press changed how books were made across Europe. " * 20
        )
        return Page(url=url, final_url=url, title="t", text=text)


async def test_the_top_pages_replace_snippets_and_failures_are_noted(
    graph: ResearchGraph, corpus: LocalCorpus
) -> None:
    reader = FakeReader()
    deps = Deps(engine=ExtractiveEngine(), search=corpus, reader=reader, pages_per_query=2)
    values = await run_graph(graph, deps, "pages", start())
    read = [s for s in values["research_data"] if s.content.startswith("Full article at")]
    assert read, "page text replaced some snippets"
    readable = {u for u in reader.fetched if "Paper" not in u and "Reformation" not in u}
    by_url = {s.url: s for s in values["research_data"]}
    assert all(by_url[u].content.startswith("Full article at") for u in readable if u in by_url)
    assert sum(n.pages_read for n in values["notes"]) >= len(read)
    errors = [e for n in values["notes"] for e in n.page_errors]
    assert any("UnsafeURLError" in e for e in errors) or any("ScrapeError" in e for e in errors)
    assert len(reader.fetched) == len(set(reader.fetched)), "a page is read once per run"
    assert values["final_report"]


async def test_page_reads_stop_when_the_time_budget_runs_out(
    graph: ResearchGraph, corpus: LocalCorpus
) -> None:
    deps = Deps(
        engine=ExtractiveEngine(), search=corpus, reader=FakeReader(delay_s=60), pages_per_query=1
    )
    values = await run_graph(graph, deps, "slow-pages", start(time_budget_s=1, max_iterations=3))
    errors = [e for n in values["notes"] for e in n.page_errors]
    assert errors and all("time budget" in e for e in errors)
    assert values["final_report"], "the run still ends with a report"
