"""A research step reads a page once, though several of its ReAct turns find (or scrape) it."""

import time
from collections import Counter
from pathlib import Path
from typing import Any

from core.models import ResearchPlan
from core.options import RunOptions
from engines.recording import recording
from graph.researcher import build_researcher
from nodes.context import Deps
from nodes.research_state import ResearcherState
from tools.errors import ScrapeError
from tools.extraction import Page
from tools.local_corpus import LocalCorpus

from .fake_llm import FakeLLM, ToolCall
from .llm_script import ResearchModel
from .test_llm_engine import engine_for

PRINTING_PRESS = "https://example.org/wiki/Printing_press"


class CountingReader:
    """Serves every page with a long text, counting its fetches; can fail some once."""

    def __init__(self, fail_once: frozenset[str] = frozenset()) -> None:
        self.fetched: Counter[str] = Counter()
        self.fail_once = fail_once

    async def fetch(self, url: str) -> Page:
        self.fetched[url] += 1
        if url in self.fail_once and self.fetched[url] == 1:
            raise ScrapeError("HTTP 503")
        text = f"The full page at {url}. " + "Printing spread across Europe after 1450. " * 20
        return Page(url=url, final_url=url, title="A page", text=text)


async def _investigate(
    llm: FakeLLM, corpus: LocalCorpus, reader: CountingReader, *actions: ToolCall
) -> dict[str, Any]:
    """One research step whose ReAct loop makes `actions`, one a turn: its update."""
    llm.responder = ResearchModel(actions=list(actions))
    # One turn more than there are actions: the model concludes from every observation.
    engine = engine_for(llm, react_max_cycles=len(actions) + 1)
    deps = Deps(engine=engine, search=corpus, reader=reader, pages_per_query=2)
    plan = ResearchPlan(theme="The printing press", investigation_points=["Origins"])
    step = ResearcherState(options=RunOptions(), task_plan=plan, research_data=[])
    with recording(time.monotonic() + 60):
        result = await build_researcher(checkpointed=False).ainvoke(step, context=deps)
    update: dict[str, Any] = result["update"]
    return update


async def test_a_page_found_again_in_a_later_turn_is_not_fetched_again(
    llm: FakeLLM, settings_env: Path, corpus: LocalCorpus
) -> None:
    reader = CountingReader()
    # Both searches find the Gutenberg page among their top two; the first also finds the
    # printing press page, which the third turn scrapes.
    update = await _investigate(
        llm,
        corpus,
        reader,
        ToolCall("search", {"query": "Gutenberg Bible"}),
        ToolCall("search", {"query": "Mainz printing workshop"}),
        ToolCall("scrape", {"url": PRINTING_PRESS}),
    )

    first, second = update["notes"]
    shared = first.sources[0]
    assert shared == second.sources[0] and "gutenberg" in shared, "the turns found one page"
    assert first.sources[1] == PRINTING_PRESS
    assert first.pages_read == second.pages_read == 2
    # Three pages were wanted five times (by two searches each, and a scrape): each was
    # fetched once.
    assert reader.fetched == Counter({shared: 1, PRINTING_PRESS: 1, second.sources[1]: 1})
    by_url = {s.url: s for s in update["research_data"]}
    assert by_url[shared].content.startswith(f"The full page at {shared}.")
    # The scrape was answered from the page the first turn read.
    last_turn = [c for c in llm.calls if c.tools][-1]
    observed = [str(m["content"]) for m in last_turn.messages if m.get("role") == "tool"]
    assert len(observed) == 3 and observed[-1].startswith(f"The full page at {PRINTING_PRESS}.")


async def test_a_page_that_could_not_be_read_is_tried_again_in_a_later_turn(
    llm: FakeLLM, settings_env: Path, corpus: LocalCorpus
) -> None:
    reader = CountingReader(fail_once=frozenset({PRINTING_PRESS}))
    update = await _investigate(
        llm,
        corpus,
        reader,
        ToolCall("search", {"query": "Gutenberg Bible"}),
        ToolCall("scrape", {"url": PRINTING_PRESS}),
    )

    (note,) = update["notes"]
    assert note.page_errors == [f"{PRINTING_PRESS}: ScrapeError: HTTP 503"]
    assert reader.fetched[PRINTING_PRESS] == 2  # the scrape read it
    by_url = {s.url: s for s in update["research_data"]}
    assert by_url[PRINTING_PRESS].source == "scraper"
