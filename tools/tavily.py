"""Tavily web search: search, extract and search context, with our error types.

The official AsyncTavilyClient sends over our own httpx client, which turns every error
response into a `ProviderError` first, so our error types and Retry-After survive.
"""

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, Field, StringConstraints
from tavily import AsyncTavilyClient
from tavily.errors import TimeoutError as TavilyTimeoutError

from tools.api_client import ApiProvider
from tools.errors import ProviderError
from tools.search import Depth, SearchHit
from tools.validation import validated

DEFAULT_BASE_URL = "https://api.tavily.com"
DEFAULT_CONTEXT_TOKENS = 4000
CHARS_PER_TOKEN = 4
QUERY_MAX_CHARS = 1000


def _http_url(value: str) -> str:
    if not value.lower().startswith(("http://", "https://")):
        raise ValueError("must be an http or https URL")
    return value


Query = Annotated[
    str, StringConstraints(strip_whitespace=True, min_length=1, max_length=QUERY_MAX_CHARS)
]
HttpUrl = Annotated[
    str, StringConstraints(strip_whitespace=True, min_length=1), AfterValidator(_http_url)
]
Topic = Literal["general", "news", "finance"]


class SearchParams(BaseModel):
    """Input rules for search: a query of 1..1000 characters, 1..20 results."""

    query: Query
    search_depth: Depth = "basic"
    max_results: int = Field(5, ge=1, le=20)
    include_domains: list[str] | None = None
    exclude_domains: list[str] | None = None
    topic: Topic | None = None
    days: int | None = Field(None, ge=1)


class ExtractParams(BaseModel):
    """Input rules for extract: 1..20 http(s) URLs."""

    urls: list[HttpUrl] = Field(min_length=1, max_length=20)


class ContextParams(BaseModel):
    """Input rules for the search context: a query of 1..1000 characters, 1..20 results."""

    query: Query
    search_depth: Depth = "basic"
    max_results: int = Field(5, ge=1, le=20)
    max_tokens: int | None = Field(None, ge=1)


class TavilySearchResultItem(BaseModel):
    """One search result, as the Tavily API returns it."""

    title: str
    url: str
    content: str
    score: float = Field(0.0, ge=0.0, le=1.0)
    raw_content: str | None = None
    published_date: str | None = None


class TavilySearchResult(BaseModel):
    """A whole search answer, as the Tavily API returns it."""

    query: str
    answer: str | None = None
    results: list[TavilySearchResultItem] = Field(default_factory=list)
    images: list[str] | None = None
    response_time: float = 0.0


class TavilyExtractResultItem(BaseModel):
    """One extracted URL and its raw content."""

    url: str
    raw_content: str


class TavilyExtractFailedItem(BaseModel):
    """One URL Tavily could not extract, and why."""

    url: str
    error: str


class TavilyExtractResult(BaseModel):
    """A whole extract answer: what was extracted and what failed."""

    results: list[TavilyExtractResultItem] = Field(default_factory=list)
    failed_results: list[TavilyExtractFailedItem] = Field(default_factory=list)
    response_time: float = 0.0


@contextmanager
def _sdk_timeouts(timeout_s: float) -> Iterator[None]:
    """Map the SDK's own TimeoutError (it wraps httpx's) to our TIMEOUT_ERROR."""
    try:
        yield
    except TavilyTimeoutError as exc:
        raise ProviderError(f"no answer within {timeout_s:g} s", "TIMEOUT_ERROR") from exc


class TavilyProvider(ApiProvider):
    """A `SearchProvider` over the Tavily API, plus its extract and context calls."""

    name = "tavily"

    default_base_url = DEFAULT_BASE_URL
    _client: AsyncTavilyClient

    def _headers(self, api_key: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {api_key}"}

    def _connected(self, api_key: str) -> None:
        self._client = AsyncTavilyClient(api_key=api_key, client=self._http)

    async def search_results(
        self,
        query: str,
        *,
        search_depth: Depth = "basic",
        max_results: int = 5,
        include_domains: list[str] | None = None,
        exclude_domains: list[str] | None = None,
        topic: Topic | None = None,
        days: int | None = None,
    ) -> TavilySearchResult:
        """Search the web; the full answer (`TavilySearchResult`)."""
        params = validated(
            SearchParams,
            query=query,
            search_depth=search_depth,
            max_results=max_results,
            include_domains=include_domains,
            exclude_domains=exclude_domains,
            topic=topic,
            days=days,
        )

        async def call() -> TavilySearchResult:
            with _sdk_timeouts(self._timeout_s):
                body = await self._client.search(
                    **params.model_dump(exclude_none=True), timeout=self._timeout_s
                )
            return TavilySearchResult.model_validate({"query": params.query, **body})

        return await self._with_retries(call)

    async def search(
        self, query: str, max_results: int = 5, depth: Depth = "basic"
    ) -> list[SearchHit]:
        """Return `search_results` as the common `SearchProvider` hits."""
        answer = await self.search_results(query, search_depth=depth, max_results=max_results)
        return [SearchHit.model_validate(r.model_dump()) for r in answer.results]

    async def extract(self, urls: list[str]) -> TavilyExtractResult:
        """Fetch and extract the content of up to 20 URLs."""
        params = validated(ExtractParams, urls=urls)

        async def call() -> TavilyExtractResult:
            with _sdk_timeouts(self._timeout_s):
                body = await self._client.extract(urls=params.urls, timeout=self._timeout_s)
            return TavilyExtractResult.model_validate(body)

        return await self._with_retries(call)

    async def get_search_context(
        self,
        query: str,
        *,
        search_depth: Depth = "basic",
        max_results: int = 5,
        max_tokens: int | None = None,
    ) -> str:
        """Search and return the results' URLs and content as one JSON string for a prompt.

        The SDK's own version counts tokens with tiktoken, which downloads its encoding
        at run time; this one estimates 4 characters a token and needs nothing.
        """
        params = validated(
            ContextParams,
            query=query,
            search_depth=search_depth,
            max_results=max_results,
            max_tokens=max_tokens,
        )
        answer = await self.search_results(
            params.query, search_depth=params.search_depth, max_results=params.max_results
        )
        budget = (params.max_tokens or DEFAULT_CONTEXT_TOKENS) * CHARS_PER_TOKEN
        context: list[dict[str, str]] = []
        for result in answer.results:
            item = {"url": result.url, "content": result.content}
            budget -= len(json.dumps(item))
            if budget < 0:
                break
            context.append(item)
        return json.dumps(context)
