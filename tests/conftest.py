import compileall
import importlib
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from engines.extractive import ExtractiveEngine
from graph.builder import ResearchGraph, build_graph
from nodes.context import Deps
from stores.checkpointer import memory_saver
from tools.api_client import RetryPolicy
from tools.brave import BraveProvider
from tools.corpus_files import iter_documents
from tools.local_corpus import LocalCorpus, build_index
from tools.tavily import TavilyProvider

from .fake_apis import FakeAPIs
from .fake_llm import llm_fixture, llm_server_fixture  # noqa: F401
from .redis_server import redis_server
from .servers import serve
from .support import BRAVE_KEY, FIXTURE_CORPUS, TAVILY_KEY, Sleeps

# The project's own packages (the installed ones come compiled).
PACKAGES = ("app", "service", "stores", "graph", "nodes", "engines", "tools", "prompts", "core")


def pytest_sessionstart(session: pytest.Session) -> None:
    """Compile the project's modules once, for the many processes the tests start.

    Under PYTHONDONTWRITEBYTECODE (set in the CI image) no interpreter writes bytecode, so
    each `research-agent` process the tests start compiled every module it imports again;
    it still reads bytecode that is there (checked against the source's time, as always).
    """
    for name in PACKAGES:
        for folder in importlib.import_module(name).__path__:
            compileall.compile_dir(folder, quiet=1)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run the `slow` tests (real processes, tens of seconds each) before the rest.

    Under pytest-xdist (`-n`) the long ones then overlap with the many short ones, rather
    than ending the run on one worker while the other sits idle. A stable sort: the order
    within each group is the one collected.
    """
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.fixture(scope="session")
def corpus_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    index = tmp_path_factory.mktemp("corpus") / "index.sqlite"
    build_index(iter_documents(FIXTURE_CORPUS), index)
    return index


@pytest.fixture
def corpus(corpus_index: Path) -> Iterator[LocalCorpus]:
    local = LocalCorpus(corpus_index)
    yield local
    local.close()


@pytest.fixture
def deps(corpus: LocalCorpus) -> Deps:
    return Deps(engine=ExtractiveEngine(), search=corpus)


@pytest.fixture
def graph() -> ResearchGraph:
    return build_graph(memory_saver())


@pytest.fixture(params=["sqlite", "redis"])
def stores(request: pytest.FixtureRequest) -> dict[str, Any]:
    """Settings for each behaviour on the embedded stores, and on Redis with its run queue."""
    if request.param == "redis":
        return {"redis_url": request.getfixturevalue("redis_url")}
    return {}


@pytest.fixture(scope="session")
def fake_server() -> Iterator[tuple[FakeAPIs, str]]:
    apis = FakeAPIs()
    with serve(apis.app) as url:
        yield apis, url


@pytest.fixture
def apis(fake_server: tuple[FakeAPIs, str]) -> FakeAPIs:
    apis, _ = fake_server
    apis.requests.clear()
    apis.faults.clear()
    return apis


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


@pytest.fixture
async def tavily(
    fake_server: tuple[FakeAPIs, str], sleeps: Sleeps
) -> AsyncIterator[TavilyProvider]:
    _, url = fake_server
    retry = RetryPolicy(base_delay_s=0.01, sleep=sleeps)
    provider = TavilyProvider(TAVILY_KEY, url, timeout_s=0.5, retry=retry)
    yield provider
    await provider.aclose()


@pytest.fixture
async def brave(fake_server: tuple[FakeAPIs, str], sleeps: Sleeps) -> AsyncIterator[BraveProvider]:
    _, url = fake_server
    retry = RetryPolicy(base_delay_s=0.01, sleep=sleeps)
    provider = BraveProvider(BRAVE_KEY, f"{url}/res/v1", timeout_s=0.5, retry=retry)
    yield provider
    await provider.aclose()


@pytest.fixture
def settings_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An environment with no RESEARCH_* settings nor provider keys; returns the config path."""
    for name in [n for n in os.environ if n.startswith("RESEARCH_")]:
        monkeypatch.delenv(name)
    for name in ("TAVILY_API_KEY", "BRAVE_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    config = tmp_path / "config.toml"
    monkeypatch.setenv("RESEARCH_CONFIG", str(config))
    return config


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """A real server (no module loaded), for the whole session."""
    with redis_server() as url:
        yield url
