"""A small Server-Sent Events reader over httpx, for the API tests."""

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx


@dataclass(frozen=True)
class Frame:
    """One SSE event as the client sees it."""

    id: int
    event: str
    data: dict[str, Any]


async def frames(response: httpx.Response) -> AsyncIterator[Frame]:
    """Parse the stream into frames (comments and heartbeats skipped)."""
    fields: dict[str, str] = {}
    async for line in response.aiter_lines():
        if line == "":
            if "data" in fields:
                yield Frame(
                    int(fields.get("id", "0")),
                    fields.get("event", "message"),
                    json.loads(fields["data"]),
                )
            fields = {}
        elif not line.startswith(":"):
            name, _, value = line.partition(":")
            fields[name] = value[1:] if value.startswith(" ") else value


async def collect(
    client: httpx.AsyncClient,
    url: str,
    until: str = "done",
    headers: dict[str, str] | None = None,
    limit: int | None = None,
    connected: asyncio.Event | None = None,
    within: float = 300.0,
) -> list[Frame]:
    """Stream `url` until an event named `until` (or `limit` frames), then disconnect.

    `connected` is set once the first event arrived. Heartbeats keep a stream open for
    ever, so a run that never ends fails the test after `within` seconds (a bound on a
    hang, not a timing check) and says what was seen.
    """
    seen: list[Frame] = []
    try:
        async with asyncio.timeout(within):
            async with client.stream("GET", url, headers=headers) as response:
                assert response.status_code == 200, await response.aread()
                async for frame in frames(response):
                    seen.append(frame)
                    if connected is not None:
                        connected.set()
                    if frame.event == until or (limit is not None and len(seen) >= limit):
                        break
    except TimeoutError:
        told = [f"{f.id}:{f.event}" for f in seen]
        raise AssertionError(f"{url}: no {until!r} after {within} s; seen {told}") from None
    return seen


def timeline(frames: list[Frame]) -> list[str]:
    """A run's events as a client reads them, but for the status a retried execution adds.

    The research step's members start and end as they are scheduled and finish, among
    the step's other events (told in the plan's order): theirs count as a set.
    """
    told = [
        f"{f.event}:{f.data.get('node') or f.data.get('member', '')}"
        for f in frames
        if not (f.event == "status" and f.data.get("recovered"))
    ]
    members = sorted(e for e in told if e.startswith("member_"))
    return [e for e in told if not e.startswith("member_")] + members
