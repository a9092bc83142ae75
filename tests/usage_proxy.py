"""A loopback pass-through to a real chat server that keeps the server's own usage figures.

The engine's accounting is checked against what the server itself reported: every request
is forwarded unchanged, every answer (JSON or a server-sent-event stream) is passed back
unchanged, and the `usage` objects in them are added up here.
"""

import json
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from .servers import serve

TIMEOUT_S = 900.0  # the engine's own timeouts end a call first


@dataclass
class ServerUsage:
    """What the server said it spent, as seen on the wire."""

    requests: int = 0
    answered: int = 0  # 2xx answers
    without_usage: int = 0  # 2xx answers that carried no usage object
    prompt_tokens: int = 0
    completion_tokens: int = 0
    statuses: list[int] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, status: int, usage: dict[str, int] | None) -> None:
        with self.lock:
            self.statuses.append(status)
            if status >= 300:
                return
            self.answered += 1
            if usage is None:
                self.without_usage += 1
                return
            self.prompt_tokens += int(usage.get("prompt_tokens") or 0)
            self.completion_tokens += int(usage.get("completion_tokens") or 0)


def _stream_usage(lines: list[str]) -> dict[str, int] | None:
    usage = None
    for line in lines:
        if line.startswith("data:") and line[5:].strip() not in ("", "[DONE]"):
            try:
                usage = json.loads(line[5:]).get("usage") or usage
            except ValueError:
                continue
    return usage


def proxy_app(upstream: str, seen: ServerUsage) -> Starlette:
    """Forward /v1/* to `upstream` (a base URL ending in /v1), one client per request."""

    async def forward(request: Request) -> Response:
        client = httpx.AsyncClient(base_url=upstream.rstrip("/"), timeout=TIMEOUT_S)
        path = request.path_params["path"]
        body = await request.body()
        headers = {
            k: v
            for k, v in request.headers.items()
            if k.lower() in ("content-type", "authorization")
        }
        if request.method == "POST":
            with seen.lock:
                seen.requests += 1
        upstream_request = client.build_request(
            request.method, f"/{path}", content=body, headers=headers
        )
        answer = await client.send(upstream_request, stream=True)
        streamed = "text/event-stream" in answer.headers.get("content-type", "")

        async def relay() -> AsyncIterator[bytes]:
            lines: list[str] = []
            chunks: list[bytes] = []
            try:
                async for chunk in answer.aiter_bytes():
                    chunks.append(chunk)
                    yield chunk
            finally:
                await answer.aclose()
                await client.aclose()
                if request.method == "POST":
                    text = b"".join(chunks).decode(errors="replace")
                    if streamed:
                        lines = text.splitlines()
                        seen.add(answer.status_code, _stream_usage(lines))
                    else:
                        try:
                            usage = json.loads(text).get("usage") if text else None
                        except ValueError:
                            usage = None
                        seen.add(answer.status_code, usage)

        return StreamingResponse(
            relay(),
            status_code=answer.status_code,
            media_type=answer.headers.get("content-type"),
        )

    return Starlette(routes=[Route("/v1/{path:path}", forward, methods=["GET", "POST"])])


@contextmanager
def usage_proxy(upstream: str) -> Iterator[tuple[str, ServerUsage]]:
    """A base URL that reaches `upstream`, and the usage the server reports through it."""
    seen = ServerUsage()
    with serve(proxy_app(upstream, seen)) as url:
        yield f"{url}/v1", seen
