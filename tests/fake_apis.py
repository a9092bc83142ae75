"""A loopback stand-in for the Tavily and Brave HTTP APIs that can be told to misbehave."""

import asyncio
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

HANG_S = 30.0


@dataclass
class Fault:
    """What to answer instead of a normal response: a status (with headers), a hang, bad JSON."""

    status: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    hang: bool = False
    malformed: bool = False


@dataclass
class Seen:
    """One request as the fake API received it."""

    path: str
    headers: dict[str, str]
    params: dict[str, str]
    body: Any


class FakeAPIs:
    """Tavily's /search and /extract, Brave's /res/v1/web/search; faults queue per path."""

    def __init__(self) -> None:
        self.faults: dict[str, list[Fault]] = defaultdict(list)
        self.requests: list[Seen] = []
        self.app = Starlette(
            routes=[
                Route("/search", self.tavily_search, methods=["POST"]),
                Route("/extract", self.tavily_extract, methods=["POST"]),
                Route("/res/v1/web/search", self.brave_search, methods=["GET"]),
            ]
        )

    def fail(self, path: str, *faults: Fault) -> None:
        """Answer the next requests to `path` with these faults, in order."""
        self.faults[path].extend(faults)

    def count(self, path: str) -> int:
        return sum(seen.path == path for seen in self.requests)

    async def _record(self, request: Request) -> tuple[Seen, Response | None]:
        body = await request.json() if request.method == "POST" else None
        seen = Seen(request.url.path, dict(request.headers), dict(request.query_params), body)
        self.requests.append(seen)
        queue = self.faults[request.url.path]
        if not queue:
            return seen, None
        fault = queue.pop(0)
        if fault.hang:
            await asyncio.sleep(HANG_S)
        if fault.malformed:
            return seen, PlainTextResponse('{"results": [', media_type="application/json")
        detail = {"detail": {"error": f"injected {fault.status}"}}
        return seen, JSONResponse(detail, status_code=fault.status or 500, headers=fault.headers)

    async def tavily_search(self, request: Request) -> Response:
        seen, fault = await self._record(request)
        if fault is not None:
            return fault
        query = seen.body["query"]
        count = seen.body.get("max_results", 5)
        results = [
            {
                "title": f"{query} result {i}",
                "url": f"https://news.example/{query.replace(' ', '-')}/{i}",
                "content": f"Finding {i} about {query}.",
                "score": round(1 - i / (count + 1), 2),  # Tavily's scores are in 0..1
            }
            for i in range(count)
        ]
        return JSONResponse({"query": query, "results": results, "response_time": 0.01})

    async def tavily_extract(self, request: Request) -> Response:
        seen, fault = await self._record(request)
        if fault is not None:
            return fault
        urls = seen.body["urls"]
        return JSONResponse(
            {
                "results": [
                    {"url": u, "raw_content": f"Content of {u}"} for u in urls if "fail" not in u
                ],
                "failed_results": [{"url": u, "error": "not found"} for u in urls if "fail" in u],
                "response_time": 0.01,
            }
        )

    async def brave_search(self, request: Request) -> Response:
        seen, fault = await self._record(request)
        if fault is not None:
            return fault
        query, count = seen.params["q"], int(seen.params.get("count", "10"))
        results = [
            {
                "title": f"{query} page {i}",
                "url": f"https://web.example/{query.replace(' ', '-')}/{i}",
                "description": f"Description {i} of {query}.",
            }
            for i in range(count + 3)  # more than asked, as a careless API might
        ]
        return JSONResponse({"type": "search", "web": {"results": results}})
