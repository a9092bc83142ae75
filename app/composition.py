"""The engine, search providers and page reader a run uses, built from the settings."""

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING

import httpx

from app.settings import MemberConfig, ProviderName, Settings
from engines.base import Engine
from engines.extractive import ExtractiveEngine
from engines.llm_config import ROLES, RoleOverrides
from engines.simulated import SleepingEngine
from nodes.context import Deps, MemberKind
from tools.api_client import RetryPolicy
from tools.brave import BraveProvider
from tools.combined import CombinedProvider
from tools.local_corpus import LocalCorpus
from tools.scraper import FetchPolicy, Scraper
from tools.search import SearchProvider
from tools.simulated import DelayedSearchProvider, SleepingSearchProvider
from tools.tavily import TavilyProvider

if TYPE_CHECKING:
    from engines.llm import LLMEngine


async def _provider(
    name: ProviderName, settings: Settings, stack: AsyncExitStack
) -> SearchProvider:
    retry = RetryPolicy(
        max_retries=settings.search_max_retries,
        base_delay_s=settings.retry_base_delay_s,
        max_delay_s=settings.retry_max_delay_s,
    )
    if name == "local":
        corpus = LocalCorpus(settings.corpus_index_path)
        stack.callback(corpus.close)
        return corpus
    web = TavilyProvider if name == "tavily" else BraveProvider
    base_url = settings.tavily_base_url if name == "tavily" else settings.brave_base_url
    provider = web(settings.api_key(name), base_url, settings.search_timeout_s, retry)
    stack.push_async_callback(provider.aclose)
    return provider


class EngineSetupError(ValueError):
    """The model settings cannot give a working engine; the message names what to fix."""


def llm_engine(settings: Settings) -> "LLMEngine":
    """Return the LLM engine for the configured models; raise `EngineSetupError` naming the setting."""
    # Imported here: the extractive path never needs LangChain's model layer, slow to import.
    from engines.llm import LLMEngine, chat_model

    configs = {role: settings.models.for_role(role) for role in ROLES}
    models = {}
    for role, config in configs.items():
        # Where the role's model is set: its own table if it names one, else the default.
        table = role if getattr(settings.models, role).model is not None else "default"
        where = f"models.{table}.model = {config.model!r}"
        try:
            models[role] = chat_model(config, settings.llm_base_url, settings.llm_key())
        except ImportError as exc:
            raise EngineSetupError(
                f"{where}: the {config.provider} integration is not installed ({exc}); for an "
                "OpenAI-compatible server use an openai: model with RESEARCH_LLM_BASE_URL"
            ) from exc
        except ValueError as exc:
            raise EngineSetupError(
                f"{where}: unknown provider {config.provider!r}; write 'provider:model', e.g. "
                f"openai:gpt-4o-mini ({str(exc).splitlines()[0][:200]})"
            ) from exc
        except Exception as exc:  # the client refused its settings, e.g. no key
            raise EngineSetupError(
                f"{where}: {type(exc).__name__}: {str(exc)[:200]}; set OPENAI_API_KEY (or "
                "RESEARCH_LLM_API_KEY), or RESEARCH_LLM_BASE_URL"
            ) from exc
    retry = RetryPolicy(
        base_delay_s=settings.retry_base_delay_s, max_delay_s=settings.retry_max_delay_s, jitter=0.5
    )
    return LLMEngine(
        configs,
        models,
        ExtractiveEngine(),
        base_url=settings.llm_base_url,
        prices=settings.prices,
        retry=retry,
        max_cycles=settings.react_max_cycles,
    )


async def check_model_server(settings: Settings, timeout_s: float = 5.0) -> None:
    """Fail early when the configured OpenAI-compatible server cannot be reached at all.

    Any HTTP answer (even 401) means it is there, and a late one that it is busy.
    """
    url = settings.llm_base_url
    if settings.engine_in_effect != "llm" or url is None:
        return
    try:
        async with httpx.AsyncClient(timeout=timeout_s) as client:
            await client.get(f"{url}/models")
    except httpx.ReadTimeout:
        return
    except httpx.TransportError as exc:
        raise EngineSetupError(
            f"RESEARCH_LLM_BASE_URL {url} is unreachable ({type(exc).__name__}): start the model "
            "server or fix the URL"
        ) from exc


def make_engine(settings: Settings) -> Engine:
    """Return the engine the settings choose."""
    return llm_engine(settings) if settings.engine_in_effect == "llm" else ExtractiveEngine()


@asynccontextmanager
async def open_deps(settings: Settings) -> AsyncIterator[Deps]:
    """Open the engine and the providers the settings choose.

    Raises `CorpusMissingError` (the local corpus has no index yet) or `EngineSetupError`.
    """
    if settings.simulate_latency_ms:
        latency = settings.simulate_latency_ms / 1000
        yield Deps(
            engine=SleepingEngine(latency),
            search=SleepingSearchProvider(latency),
            search_concurrency=settings.search_concurrency,
            max_parallel_members=settings.max_parallel_members,
        )
        return
    engine = make_engine(settings)
    await check_model_server(settings)
    async with AsyncExitStack() as stack:
        team = settings.team_members
        names = dict.fromkeys(
            [*settings.search_providers, *(n for _, tools in team for n in tools)]
        )
        opened = {n: _delayed(await _provider(n, settings, stack), settings) for n in names}
        search = _combined([opened[n] for n in settings.search_providers])
        kinds = tuple(
            MemberKind(
                name=entry.name,
                agent_type=entry.type,
                search=_combined([opened[n] for n in tools]),
                engine=_member_engine(settings, index, entry),
                max_searches=entry.max_searches,
                max_seconds=entry.max_seconds,
                token_budget=entry.token_budget,
            )
            for index, (entry, tools) in enumerate(team)
        )
        # Local documents are whole already; only web results are worth reading in full.
        reads_web = settings.pages_per_query > 0 and any(n != "local" for n in names)
        reader = (
            await stack.enter_async_context(Scraper(page_policy(settings))) if reads_web else None
        )
        yield Deps(
            engine=engine,
            search=search,
            search_concurrency=settings.search_concurrency,
            max_parallel_members=settings.max_parallel_members,
            member_kinds=kinds,
            reader=reader,
            pages_per_query=settings.pages_per_query,
        )


def _delayed(provider: SearchProvider, settings: Settings) -> SearchProvider:
    """Return the provider, slowed down by `search_delay_ms` if it is set."""
    if not settings.search_delay_ms:
        return provider
    return DelayedSearchProvider(provider, settings.search_delay_ms / 1000)


def _combined(providers: list[SearchProvider]) -> SearchProvider:
    """Return one provider that searches them all (itself when there is one)."""
    return providers[0] if len(providers) == 1 else CombinedProvider(providers)


def _member_engine(settings: Settings, index: int, entry: MemberConfig) -> Engine | None:
    """Return the engine of a team entry that changes the researcher's model; None: the run's."""
    changes = entry.model_dump(include=set(RoleOverrides.model_fields), exclude_unset=True)
    if not changes or settings.engine_in_effect != "llm":
        return None
    researcher = settings.models.researcher.model_copy(update=changes)
    models = settings.models.model_copy(update={"researcher": researcher})
    try:
        return llm_engine(settings.model_copy(update={"models": models}))
    except EngineSetupError as exc:
        raise EngineSetupError(f"team.members[{index}] ({entry.name}): {exc}") from exc


def page_policy(settings: Settings) -> FetchPolicy:
    """Return the scraper's safety policy from the settings."""
    return FetchPolicy(
        allow_private=settings.page_allow_private,
        allowed_ports=frozenset(settings.page_allowed_ports),
        max_bytes=settings.page_max_bytes,
        timeout_s=settings.page_timeout_s,
        respect_robots=settings.page_respect_robots,
    )
