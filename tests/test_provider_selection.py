from pathlib import Path

import pytest
from pydantic import ValidationError

from app.composition import open_deps
from app.settings import Settings
from tools.brave import BraveProvider
from tools.combined import CombinedProvider
from tools.errors import ProviderError
from tools.scraper import Scraper
from tools.search import Depth, SearchHit
from tools.tavily import TavilyProvider


@pytest.fixture(autouse=True)
def clean_env(settings_env: Path) -> Path:
    return settings_env


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, ["local"]),
        ({"TAVILY_API_KEY": "t"}, ["tavily"]),
        ({"BRAVE_API_KEY": "b"}, ["brave"]),
        ({"TAVILY_API_KEY": "t", "BRAVE_API_KEY": "b"}, ["tavily"]),
        ({"TAVILY_API_KEY": "  "}, ["local"]),
        (
            {"RESEARCH_SEARCH_PROVIDER": "brave", "TAVILY_API_KEY": "t", "BRAVE_API_KEY": "b"},
            ["brave"],
        ),
        ({"RESEARCH_SEARCH_PROVIDER": "local", "TAVILY_API_KEY": "t"}, ["local"]),
        ({"RESEARCH_SEARCH_PROVIDER": "Tavily, local", "TAVILY_API_KEY": "t"}, ["tavily", "local"]),
    ],
)
def test_provider_selection_order(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], expected: list[str]
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert Settings().search_providers == expected


@pytest.mark.parametrize(
    ("provider", "variable"), [("tavily", "TAVILY_API_KEY"), ("brave", "BRAVE_API_KEY")]
)
def test_a_chosen_provider_without_a_key_names_the_variable_to_set(
    monkeypatch: pytest.MonkeyPatch, provider: str, variable: str
) -> None:
    monkeypatch.setenv("RESEARCH_SEARCH_PROVIDER", provider)
    with pytest.raises(ValidationError, match=variable):
        Settings()


def test_an_unknown_provider_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RESEARCH_SEARCH_PROVIDER", "bing")
    with pytest.raises(ValidationError, match="unknown search provider bing"):
        Settings()


def test_keys_come_from_the_environment_before_the_config_file(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clean_env.write_text('tavily_api_key = "from-file"\nbrave_api_key = "brave-from-file"\n')
    monkeypatch.setenv("TAVILY_API_KEY", "from-env")
    settings = Settings()
    assert settings.api_key("tavily") == "from-env"
    assert settings.api_key("brave") == "brave-from-file"
    assert "from-env" not in repr(settings), "keys are secrets, never printed"


async def test_deps_combine_several_providers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RESEARCH_SEARCH_PROVIDER", "tavily,brave")
    monkeypatch.setenv("TAVILY_API_KEY", "t")
    monkeypatch.setenv("BRAVE_API_KEY", "b")
    async with open_deps(Settings()) as deps:
        assert isinstance(deps.search, CombinedProvider)
        assert [type(p) for p in deps.search.providers] == [TavilyProvider, BraveProvider]
        assert deps.search.name == "tavily+brave"


class Fixed:
    def __init__(self, name: str, urls: list[str], error: Exception | None = None) -> None:
        self.name, self.urls, self.error = name, urls, error

    async def search(
        self, query: str, max_results: int = 5, depth: Depth = "basic"
    ) -> list[SearchHit]:
        if self.error:
            raise self.error
        return [SearchHit(title=u, url=u, content=u) for u in self.urls[:max_results]]


async def test_combined_results_interleave_by_rank_without_duplicates() -> None:
    combined = CombinedProvider(
        [
            Fixed("a", ["https://x.org/1", "https://x.org/2"]),
            Fixed("b", ["https://X.org/1/", "https://y.org/3"]),
        ]
    )
    hits = await combined.search("q", max_results=5)
    assert [h.url for h in hits] == ["https://x.org/1", "https://x.org/2", "https://y.org/3"]


async def test_one_failing_provider_only_loses_its_own_results() -> None:
    down = ProviderError("down", "SERVICE_UNAVAILABLE", 503)
    combined = CombinedProvider([Fixed("a", [], down), Fixed("b", ["https://y.org/1"])])
    assert [h.url for h in await combined.search("q")] == ["https://y.org/1"]
    with pytest.raises(ProviderError):
        await CombinedProvider([Fixed("a", [], down), Fixed("b", [], down)]).search("q")


@pytest.mark.parametrize(
    ("env", "reads"),
    [
        ({"TAVILY_API_KEY": "t"}, True),
        ({"TAVILY_API_KEY": "t", "RESEARCH_PAGES_PER_QUERY": "0"}, False),
        ({"RESEARCH_SEARCH_PROVIDER": "local", "RESEARCH_CORPUS_INDEX": "{index}"}, False),
    ],
)
async def test_pages_are_read_only_for_web_results(
    monkeypatch: pytest.MonkeyPatch, corpus_index: Path, env: dict[str, str], reads: bool
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value.format(index=corpus_index))
    async with open_deps(Settings()) as deps:
        assert isinstance(deps.reader, Scraper) is reads
