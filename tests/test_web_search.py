"""Tavily and Brave through their real clients, against a loopback fake of their APIs."""

import pytest

from engines.extractive import ExtractiveEngine
from graph.builder import build_graph
from nodes.context import Deps
from stores.checkpointer import memory_saver
from tools.api_client import RetryPolicy
from tools.brave import BraveProvider
from tools.errors import ProviderError
from tools.tavily import TavilyProvider

from .fake_apis import FakeAPIs, Fault
from .servers import free_port
from .support import BRAVE_KEY, Sleeps, run_graph, start
from .support import TAVILY_KEY as KEY

# -- Tavily ------------------------------------------------------------------------------


async def test_tavily_search_maps_results_and_sends_the_key(
    tavily: TavilyProvider, apis: FakeAPIs
) -> None:
    hits = await tavily.search("printing press", max_results=3, depth="advanced")
    assert [h.url for h in hits] == [f"https://news.example/printing-press/{i}" for i in range(3)]
    assert hits[0].score == 1.0 and hits[0].content == "Finding 0 about printing press."
    seen = apis.requests[-1]
    assert seen.headers["authorization"] == f"Bearer {KEY}"
    assert seen.body["query"] == "printing press"
    assert (seen.body["max_results"], seen.body["search_depth"]) == (3, "advanced")


async def test_tavily_extract_reports_successes_and_failures(tavily: TavilyProvider) -> None:
    answer = await tavily.extract(["https://a.example/x", "https://b.example/fail"])
    assert [r.url for r in answer.results] == ["https://a.example/x"]
    assert [f.url for f in answer.failed_results] == ["https://b.example/fail"]


async def test_tavily_context_is_json_of_urls_and_content(tavily: TavilyProvider) -> None:
    context = await tavily.get_search_context("gutenberg", max_results=2, max_tokens=500)
    assert '"url": "https://news.example/gutenberg/0"' in context
    assert "Finding 1 about gutenberg." in context


async def test_tavily_context_stays_within_max_tokens(tavily: TavilyProvider) -> None:
    context = await tavily.get_search_context("gutenberg", max_results=5, max_tokens=30)
    assert len(context) <= 30 * 4
    assert context.count('"url"') == 1


@pytest.mark.parametrize(
    ("fault", "error_type", "retryable"),
    [
        (Fault(status=401), "AUTH_ERROR", False),
        (Fault(status=400), "VALIDATION_ERROR", False),
        (Fault(status=429), "RATE_LIMIT_ERROR", True),
        (Fault(status=500), "SERVER_ERROR", True),
        (Fault(status=503), "SERVICE_UNAVAILABLE", True),
        (Fault(hang=True), "TIMEOUT_ERROR", True),
        (Fault(malformed=True), "SERVER_ERROR", True),
    ],
)
async def test_tavily_failures_map_to_our_error_types(
    tavily: TavilyProvider,
    apis: FakeAPIs,
    sleeps: Sleeps,
    fault: Fault,
    error_type: str,
    retryable: bool,
) -> None:
    apis.fail("/search", *[fault] * 4)
    with pytest.raises(ProviderError) as caught:
        await tavily.search("anything")
    assert caught.value.error_type == error_type
    assert caught.value.is_retryable is retryable
    expected_attempts = 4 if retryable else 1
    assert apis.count("/search") == expected_attempts
    assert len(sleeps.delays) == expected_attempts - 1
    assert KEY not in str(caught.value)


async def test_an_unreachable_service_is_a_network_error(sleeps: Sleeps) -> None:
    provider = TavilyProvider(
        KEY,
        f"http://127.0.0.1:{free_port()}",
        timeout_s=0.5,
        retry=RetryPolicy(base_delay_s=0.01, sleep=sleeps),
    )
    with pytest.raises(ProviderError) as caught:
        await provider.search("anything")
    await provider.aclose()
    assert caught.value.error_type == "NETWORK_ERROR"
    assert len(sleeps.delays) == 3


async def test_retries_back_off_exponentially_up_to_the_cap(
    fake_server: tuple[FakeAPIs, str], apis: FakeAPIs, sleeps: Sleeps
) -> None:
    _, url = fake_server
    policy = RetryPolicy(max_retries=3, base_delay_s=1.0, max_delay_s=3.0, sleep=sleeps)
    provider = TavilyProvider(KEY, url, timeout_s=0.5, retry=policy)
    apis.fail("/search", *[Fault(status=500)] * 4)
    with pytest.raises(ProviderError):
        await provider.search("anything")
    await provider.aclose()
    assert sleeps.delays == [1.0, 2.0, 3.0]  # min(1 s * 2^n, max)


async def test_retry_after_is_honoured(
    tavily: TavilyProvider, apis: FakeAPIs, sleeps: Sleeps
) -> None:
    apis.fail("/search", Fault(status=429, headers={"Retry-After": "7"}))
    hits = await tavily.search("anything")
    assert hits, "the second attempt succeeds"
    assert sleeps.delays == [7.0]
    assert apis.count("/search") == 2


async def test_a_transient_failure_recovers(tavily: TavilyProvider, apis: FakeAPIs) -> None:
    apis.fail("/search", Fault(status=503), Fault(status=500))
    assert len(await tavily.search("anything", max_results=2)) == 2
    assert apis.count("/search") == 3


@pytest.mark.parametrize(
    ("call", "field"),
    [
        ({"query": ""}, "query"),
        ({"query": "x" * 1001}, "query"),
        ({"query": "ok", "search_depth": "deep"}, "search_depth"),
        ({"query": "ok", "max_results": 0}, "max_results"),
        ({"query": "ok", "max_results": 21}, "max_results"),
        ({"query": "ok", "days": 0}, "days"),
        ({"query": "ok", "topic": "sports"}, "topic"),
    ],
)
async def test_tavily_rejects_invalid_search_input_before_calling(
    tavily: TavilyProvider, apis: FakeAPIs, call: dict[str, object], field: str
) -> None:
    with pytest.raises(ProviderError) as caught:
        await tavily.search_results(**call)  # type: ignore[arg-type]
    assert caught.value.error_type == "VALIDATION_ERROR"
    assert field in caught.value.message
    assert apis.requests == []


@pytest.mark.parametrize("urls", [[], ["ftp://example.com/file"], ["javascript:alert(1)"]])
async def test_tavily_extract_accepts_only_http_urls(
    tavily: TavilyProvider, apis: FakeAPIs, urls: list[str]
) -> None:
    with pytest.raises(ProviderError) as caught:
        await tavily.extract(urls)
    assert caught.value.error_type == "VALIDATION_ERROR"
    assert apis.requests == []


# -- Brave -------------------------------------------------------------------------------


async def test_brave_maps_title_url_and_description(brave: BraveProvider, apis: FakeAPIs) -> None:
    hits = await brave.search("movable type", max_results=4)
    assert [h.title for h in hits] == [f"movable type page {i}" for i in range(4)]
    assert hits[0].content == "Description 0 of movable type."
    assert hits[0].score > hits[-1].score
    seen = apis.requests[-1]
    assert seen.headers["x-subscription-token"] == BRAVE_KEY
    assert seen.params == {"q": "movable type", "count": "4"}


async def test_brave_count_defaults_to_ten_and_is_clamped_to_ten(
    brave: BraveProvider, apis: FakeAPIs
) -> None:
    assert len(await brave.web_search("x")) == 10
    assert apis.requests[-1].params["count"] == "10"
    assert len(await brave.web_search("x", count=50)) == 10
    assert apis.requests[-1].params["count"] == "10"


@pytest.mark.parametrize(("query", "count"), [("x", 0), ("x", -3), ("", 5), ("   ", 5)])
async def test_brave_rejects_a_count_below_one_or_an_empty_query(
    brave: BraveProvider, apis: FakeAPIs, query: str, count: int
) -> None:
    with pytest.raises(ProviderError) as caught:
        await brave.web_search(query, count=count)
    assert caught.value.error_type == "VALIDATION_ERROR"
    assert apis.requests == []


@pytest.mark.parametrize(
    ("fault", "error_type", "attempts"),
    [
        (Fault(status=401), "AUTH_ERROR", 1),
        (Fault(status=429), "RATE_LIMIT_ERROR", 4),
        (Fault(status=503), "SERVICE_UNAVAILABLE", 4),
        (Fault(malformed=True), "SERVER_ERROR", 4),
    ],
)
async def test_brave_shares_the_taxonomy_and_retry_policy(
    brave: BraveProvider, apis: FakeAPIs, fault: Fault, error_type: str, attempts: int
) -> None:
    apis.fail("/res/v1/web/search", *[fault] * 4)
    with pytest.raises(ProviderError) as caught:
        await brave.search("x")
    assert caught.value.error_type == error_type
    assert apis.count("/res/v1/web/search") == attempts
    assert BRAVE_KEY not in str(caught.value)


async def test_a_research_run_searches_through_tavily(
    tavily: TavilyProvider, apis: FakeAPIs
) -> None:
    apis.fail("/search", Fault(status=503))  # the first call fails once and is retried
    deps = Deps(engine=ExtractiveEngine(), search=tavily)
    values = await run_graph(
        build_graph(memory_saver()), deps, "tavily-run", start(max_iterations=3)
    )
    assert values["final_report"]
    assert all(
        s.source == "tavily" and s.url.startswith("https://news.example/")
        for s in values["research_data"]
    )
    assert all(n.status == "ok" for n in values["notes"])
