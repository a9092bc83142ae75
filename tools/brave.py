"""Brave web search: `query` and `count`, results as title, url and description."""

from typing import Annotated

from pydantic import BaseModel, Field, StringConstraints

from tools.api_client import ApiProvider
from tools.errors import ProviderError
from tools.search import Depth, SearchHit
from tools.validation import validated

DEFAULT_BASE_URL = "https://api.search.brave.com/res/v1"
MAX_COUNT = 10


class BraveParams(BaseModel):
    """A search's input rules: a non-empty query, and a count of at least one."""

    query: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=400)]
    count: int = Field(10, ge=1)


class BraveResult(BaseModel):
    """One result in the shape both web search tools share."""

    title: str
    url: str
    description: str = ""
    page_age: str | None = None


class BraveProvider(ApiProvider):
    """A `SearchProvider` over the Brave web search API."""

    name = "brave"

    default_base_url = DEFAULT_BASE_URL

    def _headers(self, api_key: str) -> dict[str, str]:
        return {"X-Subscription-Token": api_key, "Accept": "application/json"}

    async def web_search(self, query: str, count: int = 10) -> list[BraveResult]:
        """Search; a count above 10 is clamped to 10, below 1 is a validation error."""
        params = validated(BraveParams, query=query, count=count)
        size = min(params.count, MAX_COUNT)

        async def call() -> list[BraveResult]:
            response = await self._http.get(
                "/web/search", params={"q": params.query, "count": size}
            )
            body = response.json()
            if not isinstance(body, dict):
                raise ProviderError("the service sent a malformed response", "SERVER_ERROR")
            rows = (body.get("web") or {}).get("results") or []
            return [BraveResult.model_validate(row) for row in rows][:size]

        return await self._with_retries(call)

    async def search(
        self, query: str, max_results: int = 5, depth: Depth = "basic"
    ) -> list[SearchHit]:
        """Return the common `SearchProvider` hits; Brave gives ranks, so scores fall with rank."""
        results = await self.web_search(query, count=max_results)
        return [
            SearchHit(
                title=r.title,
                url=r.url,
                content=r.description,
                score=round(1.0 - i / max(len(results), 1), 4),
                published_date=r.page_age,
            )
            for i, r in enumerate(results)
        ]
