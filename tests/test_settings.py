from pathlib import Path

import pytest
from pydantic import ValidationError

from app.composition import open_deps
from app.settings import Settings
from engines.extractive import ExtractiveEngine
from engines.simulated import SleepingEngine
from graph.builder import build_graph
from stores.checkpointer import memory_saver
from tools.local_corpus import CorpusMissingError
from tools.simulated import DelayedSearchProvider, SleepingSearchProvider

from .support import run_graph, start


@pytest.fixture
def config_file(settings_env: Path) -> Path:
    return settings_env


def test_the_environment_overrides_the_config_file(
    config_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config_file.write_text(f'data_dir = "{tmp_path / "from-file"}"\nsearch_concurrency = 3\n')
    monkeypatch.setenv("RESEARCH_SEARCH_CONCURRENCY", "7")
    settings = Settings()
    assert settings.search_concurrency == 7
    assert settings.data_dir == tmp_path / "from-file"
    assert settings.corpus_index_path == tmp_path / "from-file" / "corpus" / "index.sqlite"
    assert settings.checkpoint_path == tmp_path / "from-file" / "checkpoints.sqlite"


def test_an_empty_variable_counts_as_unset(
    config_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Deployments pass optional settings through as `KEY: ${KEY:-}`: empty means unset."""
    config_file.write_text("search_concurrency = 3\n")
    for name in ("RESEARCH_LLM_BASE_URL", "OPENAI_API_KEY", "TAVILY_API_KEY"):
        monkeypatch.setenv(name, "")
    monkeypatch.setenv("RESEARCH_SEARCH_CONCURRENCY", "")
    settings = Settings()
    assert settings.llm_base_url is None and settings.engine_in_effect == "extractive"
    assert settings.search_concurrency == 3, "the file's value, not an empty override"


def test_an_invalid_value_in_the_file_names_the_field(config_file: Path) -> None:
    config_file.write_text("search_concurrency = 0\n")
    with pytest.raises(ValidationError, match="search_concurrency"):
        Settings()


def test_an_unknown_key_in_the_file_is_refused(config_file: Path) -> None:
    config_file.write_text("serch_provider = 'local'\n")
    with pytest.raises(ValidationError, match="serch_provider"):
        Settings()


async def test_simulated_latency_swaps_in_sleeping_engine_and_provider(config_file: Path) -> None:
    async with open_deps(Settings(simulate_latency_ms=1)) as deps:
        assert isinstance(deps.engine, SleepingEngine)
        assert isinstance(deps.search, SleepingSearchProvider)
        values = await run_graph(build_graph(memory_saver()), deps, "sim", start())
    assert values["report_status"] == "final"


async def test_search_delay_wraps_the_local_corpus(config_file: Path, corpus_index: Path) -> None:
    async with open_deps(Settings(corpus_index=corpus_index, search_delay_ms=5)) as deps:
        assert isinstance(deps.engine, ExtractiveEngine)
        assert isinstance(deps.search, DelayedSearchProvider)
        assert deps.search.name == "local"


async def test_a_missing_corpus_is_reported_when_the_deps_open(
    config_file: Path, tmp_path: Path
) -> None:
    with pytest.raises(CorpusMissingError):
        async with open_deps(Settings(corpus_index=tmp_path / "none.sqlite")):
            pass


@pytest.mark.parametrize(
    ("variable", "keys"),
    [
        ("plainkey", ["plainkey"]),
        ("key1, key2,", ["key1", "key2"]),
        ('["k\\"quoted", "back\\\\slash"]', ['k"quoted', "back\\slash"]),
        ('k"quoted\\back', ['k"quoted\\back']),  # compose passes a key as it is
    ],
)
def test_api_keys_are_a_comma_list_or_a_json_list(
    config_file: Path, monkeypatch: pytest.MonkeyPatch, variable: str, keys: list[str]
) -> None:
    monkeypatch.setenv("RESEARCH_API_KEYS", variable)
    assert [k.get_secret_value() for k in Settings().api_keys] == keys


def test_a_broken_json_key_list_says_how_to_write_it(
    config_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RESEARCH_API_KEYS", '["key1"')
    with pytest.raises(ValidationError, match="key1,key2"):
        Settings()
