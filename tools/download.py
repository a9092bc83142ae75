"""The parts of a safe download that hold no connection: policy, time budget, host slots, body."""

from __future__ import annotations

import asyncio
import codecs
import ipaddress
import time
import zlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from http.cookiejar import CookieJar, DefaultCookiePolicy
from typing import NamedTuple

import httpx

from tools.errors import ScrapeError
from tools.http_safety import DEFAULT_PORTS, IPNetwork, SafeTarget

USER_AGENT = "research-agent/0.1 (research bot; honours robots.txt)"
_DOCUMENT_TYPES = frozenset({"text/html", "application/xhtml+xml", "text/plain"})


@dataclass(frozen=True)
class FetchPolicy:
    """What the scraper may fetch and how much it may spend on one page."""

    allow_private: bool = False  # private, loopback, link-local (tests, intranets); no metadata
    allowed_networks: tuple[str, ...] = ()  # admitted even when not public, e.g. "127.0.0.0/8"
    allowed_ports: frozenset[int] = DEFAULT_PORTS
    max_bytes: int = 5 * 1024 * 1024  # counted after decompression
    timeout_s: float = 20.0  # network time for the whole fetch: DNS, robots.txt, redirects
    max_redirects: int = 5
    user_agent: str = USER_AGENT
    respect_robots: bool = True
    per_host_concurrency: int = 2

    def __post_init__(self) -> None:
        if self.max_bytes <= 0 or self.timeout_s <= 0:
            raise ValueError("max_bytes and timeout_s must be positive")
        if self.max_redirects < 0 or self.per_host_concurrency < 1:
            raise ValueError("max_redirects must be >= 0 and per_host_concurrency >= 1")
        allowed_networks(self.allowed_networks)


def allowed_networks(allowed: tuple[str, ...]) -> tuple[IPNetwork, ...]:
    """Parse the policy's admitted networks; a bad one raises ValueError at once."""
    return tuple(ipaddress.ip_network(network) for network in allowed)


class Download(NamedTuple):
    """What one GET brought back, after the last redirect."""

    final_url: str
    status: int
    media_type: str
    charset: str | None
    body: bytes


class Budget:
    """Seconds of network time left for one fetch."""

    def __init__(self, seconds: float) -> None:
        self._total = seconds
        self.remaining = seconds

    @property
    def spent(self) -> float:
        """Seconds used so far, for a caller that lent part of its own budget."""
        return self._total - self.remaining

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Run the block under the time left; raise TimeoutError when it runs out."""
        start = time.monotonic()
        try:
            async with asyncio.timeout(max(self.remaining, 0.0)):
                yield
        finally:
            self.remaining -= time.monotonic() - start


class HostSlots:
    """One semaphore per host, dropped when no fetch holds or awaits it."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._slots: dict[str, tuple[asyncio.Semaphore, int]] = {}

    @asynccontextmanager
    async def hold(self, host: str) -> AsyncIterator[None]:
        """Wait for a slot of `host` and hold it for the block."""
        semaphore, users = self._slots.get(host, (asyncio.Semaphore(self._limit), 0))
        self._slots[host] = (semaphore, users + 1)
        try:
            async with semaphore:
                yield
        finally:
            users = self._slots[host][1] - 1
            if users:
                self._slots[host] = (semaphore, users)
            else:
                del self._slots[host]


class _Inflater:
    """Undo gzip or deflate without ever producing more than the room left."""

    def __init__(self, content_encoding: str) -> None:
        codings = [c.strip().lower() for c in content_encoding.split(",")]
        codings = [c for c in codings if c and c != "identity"]
        if codings and (len(codings) > 1 or codings[0] not in ("gzip", "x-gzip", "deflate")):
            raise ScrapeError(f"unsupported content encoding {content_encoding!r}")
        # MAX_WBITS | 32 accepts both the gzip and the zlib header
        self._zlib = zlib.decompressobj(zlib.MAX_WBITS | 32) if codings else None

    def feed(self, data: bytes, room: int) -> bytes:
        if self._zlib is None:
            return data
        try:
            return self._zlib.decompress(data, room + 1)
        except zlib.error:
            raise ScrapeError("the response could not be decompressed") from None

    def flush(self) -> bytes:
        return self._zlib.flush() if self._zlib is not None else b""


async def read_body(response: httpx.Response, limit: int) -> bytes:
    """Return the inflated body, refused as soon as it would pass `limit` bytes.

    The body is read raw and inflated here (gzip and deflate only): `aiter_bytes()` would
    inflate each network read in one call, so a few KB of zstd could become gigabytes.
    """
    too_large = ScrapeError(f"the response is larger than {limit} bytes")
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise too_large
    inflater = _Inflater(response.headers.get("content-encoding", ""))
    body = bytearray()
    async for chunk in response.aiter_raw():
        body += inflater.feed(chunk, limit - len(body))
        if len(body) > limit:
            raise too_large
    body += inflater.flush()
    if len(body) > limit:
        raise too_large
    return bytes(body)


def media_type(response: httpx.Response) -> str:
    """Return the declared media type, lower case, without its parameters."""
    content_type: str = response.headers.get("content-type", "")
    return content_type.split(";")[0].strip().lower()


def charset(response: httpx.Response) -> str | None:
    """Return the declared charset if Python knows it; else None and the extractor sniffs."""
    try:
        return codecs.lookup(response.charset_encoding or "").name
    except LookupError:
        return None


def require_document(response: httpx.Response) -> None:
    """Refuse a page that is not HTML, XHTML or plain text."""
    declared = media_type(response)
    if declared not in _DOCUMENT_TYPES:
        raise ScrapeError(f"refused content type {declared or '(none)'!r}: not HTML or text")


def default_client(policy: FetchPolicy) -> httpx.AsyncClient:
    """Return a client that trusts no proxy or .netrc, keeps no cookies, follows no redirects.

    A proxy would connect to addresses we never checked, and a jar would key cookies by IP.
    """
    return httpx.AsyncClient(
        trust_env=False,
        cookies=CookieJar(DefaultCookiePolicy(allowed_domains=[])),
        follow_redirects=False,
        timeout=policy.timeout_s,
    )


def redirect_target(target: SafeTarget, location: str) -> str:
    """Return the absolute URL a redirect's Location names; a malformed one is a ScrapeError."""
    try:
        return str(target.url.join(location))
    except httpx.InvalidURL:
        raise ScrapeError(f"{target.url} redirected to a malformed URL") from None
