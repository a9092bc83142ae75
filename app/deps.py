"""Build a run's collaborators from the settings."""

from collections.abc import Iterator
from contextlib import contextmanager

from app.settings import Settings
from engines.extractive import ExtractiveEngine
from engines.simulated import SleepingEngine
from nodes.context import Deps
from tools.local_corpus import LocalCorpus
from tools.search import SearchProvider
from tools.simulated import DelayedSearchProvider, SleepingSearchProvider


@contextmanager
def open_deps(settings: Settings) -> Iterator[Deps]:
    """Open the engine and provider the settings choose; close them afterwards.

    Raises `CorpusMissingError` when the local provider has no index yet.
    """
    if settings.simulate_latency_ms:
        latency = settings.simulate_latency_ms / 1000
        yield Deps(
            engine=SleepingEngine(latency),
            search=SleepingSearchProvider(latency),
            search_concurrency=settings.search_concurrency,
        )
        return
    corpus = LocalCorpus(settings.corpus_index_path)
    search: SearchProvider = corpus
    if settings.search_delay_ms:
        search = DelayedSearchProvider(corpus, settings.search_delay_ms / 1000)
    try:
        yield Deps(
            engine=ExtractiveEngine(), search=search, search_concurrency=settings.search_concurrency
        )
    finally:
        corpus.close()
