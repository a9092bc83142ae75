"""Build a run's collaborators from the settings, and close them afterwards."""

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

from app.settings import ProviderName, Settings
from engines.extractive import ExtractiveEngine
from engines.simulated import SleepingEngine
from nodes.context import Deps
from tools.api_client import RetryPolicy
from tools.brave import BraveProvider
from tools.combined import CombinedProvider
from tools.local_corpus import LocalCorpus
from tools.search import SearchProvider
from tools.simulated import DelayedSearchProvider, SleepingSearchProvider
from tools.tavily import TavilyProvider


async def _provider(
    name: ProviderName, settings: Settings, stack: AsyncExitStack
) -> SearchProvider:
    retry = RetryPolicy(
        max_retries=settings.search_max_retries,
        base_delay_s=settings.retry_base_delay_s,
        max_delay_s=settings.retry_max_delay_s,
    )
    if name == "tavily":
        tavily = TavilyProvider(
            settings.api_key("tavily"), settings.tavily_base_url, settings.search_timeout_s, retry
        )
        stack.push_async_callback(tavily.aclose)
        return tavily
    if name == "brave":
        brave = BraveProvider(
            settings.api_key("brave"), settings.brave_base_url, settings.search_timeout_s, retry
        )
        stack.push_async_callback(brave.aclose)
        return brave
    corpus = LocalCorpus(settings.corpus_index_path)
    stack.callback(corpus.close)
    return corpus


@asynccontextmanager
async def open_deps(settings: Settings) -> AsyncIterator[Deps]:
    """Open the engine and the providers the settings choose.

    Raises `CorpusMissingError` when the local provider is chosen and has no index yet.
    """
    if settings.simulate_latency_ms:
        latency = settings.simulate_latency_ms / 1000
        yield Deps(
            engine=SleepingEngine(latency),
            search=SleepingSearchProvider(latency),
            search_concurrency=settings.search_concurrency,
        )
        return
    async with AsyncExitStack() as stack:
        providers = [await _provider(n, settings, stack) for n in settings.search_providers]
        search = providers[0] if len(providers) == 1 else CombinedProvider(providers)
        if settings.search_delay_ms:
            search = DelayedSearchProvider(search, settings.search_delay_ms / 1000)
        yield Deps(
            engine=ExtractiveEngine(),
            search=search,
            search_concurrency=settings.search_concurrency,
        )
