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
from tools.scraper import FetchPolicy, Scraper
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
        # Local documents are whole already; only web results are worth reading in full.
        reads_web = settings.pages_per_query > 0 and settings.search_providers != ["local"]
        reader = (
            await stack.enter_async_context(Scraper(page_policy(settings))) if reads_web else None
        )
        yield Deps(
            engine=ExtractiveEngine(),
            search=search,
            search_concurrency=settings.search_concurrency,
            reader=reader,
            pages_per_query=settings.pages_per_query,
        )


def page_policy(settings: Settings) -> FetchPolicy:
    """The scraper's safety policy from the settings."""
    return FetchPolicy(
        allow_private=settings.page_allow_private,
        allowed_ports=frozenset(settings.page_allowed_ports),
        max_bytes=settings.page_max_bytes,
        timeout_s=settings.page_timeout_s,
        respect_robots=settings.page_respect_robots,
    )
