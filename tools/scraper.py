"""Fetch a web page safely and hand its bytes to the extractor.

Every hop goes through the SSRF guard of `tools.http_safety`; size, time, redirects,
media types, robots.txt and per-host concurrency are capped. Failures are `ScrapeError`s.
"""

from __future__ import annotations

import asyncio
from contextlib import suppress
from typing import Self
from urllib.robotparser import RobotFileParser

import httpx

from tools.download import (
    USER_AGENT,
    Budget,
    Download,
    FetchPolicy,
    HostSlots,
    allowed_networks,
    charset,
    default_client,
    media_type,
    read_body,
    redirect_target,
    require_document,
)
from tools.errors import ScrapeError
from tools.extraction import Page, extract_main_text
from tools.http_safety import IPAddress, Resolver, SafeTarget, check_url, resolve_host

__all__ = ["USER_AGENT", "FetchPolicy", "Page", "Scraper", "extract_main_text", "fetch_page"]

_ACCEPT = "text/html,application/xhtml+xml;q=0.9,text/plain;q=0.8"
_ROBOTS_SHARE = 0.25  # of the time cap; a missing, failing or slow robots.txt allows all
_ROBOTS_MAX_BYTES = 512 * 1024  # Google reads the first 500 KiB
_ROBOTS_CACHE_SIZE = 1024
_TITLE_MAX = 200


async def _to_page(url: str, got: Download) -> Page:
    if got.media_type == "text/plain":
        text = got.body.decode(got.charset or "utf-8", "replace")
        first = next((line.strip() for line in text.splitlines() if line.strip()), "")
        title = first[:_TITLE_MAX] or got.final_url
        return Page(url=url, final_url=got.final_url, title=title, text=text)
    html = got.body.decode(got.charset, "replace") if got.charset else got.body
    try:
        page = await asyncio.to_thread(extract_main_text, html, got.final_url)
    except Exception as exc:  # a third-party parser's failure is still a page we cannot read
        raise ScrapeError(f"could not read {got.final_url}") from exc
    # final_url is the last URL fetched, not the page's canonical link
    return page.model_copy(
        update={"url": url, "final_url": got.final_url, "title": page.title or got.final_url}
    )


class Scraper:
    """Fetch pages safely; share one instance so connections and robots.txt are reused."""

    def __init__(
        self,
        policy: FetchPolicy | None = None,
        *,
        client: httpx.AsyncClient | None = None,
        resolver: Resolver = resolve_host,
    ) -> None:
        self.policy = policy or FetchPolicy()
        self._client = client or default_client(self.policy)
        self._owns_client = client is None
        self._resolver = resolver
        self._networks = allowed_networks(self.policy.allowed_networks)
        self._slots = HostSlots(self.policy.per_host_concurrency)
        self._robots: dict[str, RobotFileParser | None] = {}
        self._robots_locks: dict[str, asyncio.Lock] = {}

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the HTTP client if this scraper created it."""
        if self._owns_client:
            await self._client.aclose()

    async def fetch(self, url: str) -> Page:
        """Fetch one page and extract its main text.

        The time cap counts network time (DNS, robots.txt, every hop), not the wait for a
        per-host slot, so a queue of fetches to one site does not time out while it waits.

        Raises:
            UnsafeURLError: The URL or a redirect leads somewhere we refuse to go.
            ScrapeError: Anything else went wrong; the message is safe to show.
        """
        budget = Budget(self.policy.timeout_s)
        try:
            got = await self._download(url, budget, self.policy.max_bytes, for_page=True)
        except (TimeoutError, httpx.TimeoutException) as exc:
            raise ScrapeError(f"gave up on {url} after {self.policy.timeout_s:g} s") from exc
        except httpx.HTTPError as exc:
            raise ScrapeError(f"could not fetch {url} ({type(exc).__name__})") from exc
        return await _to_page(url, got)

    async def _download(self, url: str, budget: Budget, limit: int, *, for_page: bool) -> Download:
        """GET a URL, following redirects by hand and checking every hop."""
        current = url
        for _ in range(self.policy.max_redirects + 1):
            async with budget.running():
                target = await check_url(
                    current,
                    resolver=self._resolver,
                    allow_private=self.policy.allow_private,
                    allowed_networks=self._networks,
                    allowed_ports=self.policy.allowed_ports,
                )
            if for_page and self.policy.respect_robots:
                await self._obey_robots(target, budget)
            async with self._slots.hold(target.host), budget.running():
                response = await self._send(target)
                try:
                    if response.has_redirect_location:
                        current = redirect_target(target, response.headers["location"])
                        continue
                    body = b""
                    if response.is_success:
                        if for_page:
                            require_document(response)
                        body = await read_body(response, limit)
                    elif for_page:
                        raise ScrapeError(f"{target.url} answered HTTP {response.status_code}")
                    return Download(
                        str(target.url),
                        response.status_code,
                        media_type(response),
                        charset(response),
                        body,
                    )
                finally:
                    await response.aclose()
        raise ScrapeError(f"{url} redirected more than {self.policy.max_redirects} times")

    async def _send(self, target: SafeTarget) -> httpx.Response:
        """Send to the first checked address that accepts a connection."""
        *others, last = target.addresses
        for address in others:
            with suppress(httpx.ConnectError):
                return await self._client.send(
                    self._request(target, address), stream=True, follow_redirects=False
                )
        return await self._client.send(
            self._request(target, last), stream=True, follow_redirects=False
        )

    def _request(self, target: SafeTarget, address: IPAddress) -> httpx.Request:
        headers = {
            "Host": target.host_header,
            "User-Agent": self.policy.user_agent,
            "Accept": _ACCEPT,
            "Accept-Encoding": "gzip, deflate",
        }
        if target.url.scheme == "https":
            # the pool is keyed by IP address: a kept-alive connection verified for one
            # name could otherwise serve another
            headers["Connection"] = "close"
        sni = target.sni_hostname
        return self._client.build_request(
            "GET",
            target.request_url(address),
            headers=headers,
            extensions={"sni_hostname": sni} if sni else None,
            timeout=self.policy.timeout_s,
        )

    async def _obey_robots(self, target: SafeTarget, budget: Budget) -> None:
        rules = await self._robots_for(target, budget)
        if rules is not None and not rules.can_fetch(self.policy.user_agent, str(target.url)):
            raise ScrapeError(f"robots.txt of {target.host} forbids fetching {target.url}")

    async def _robots_for(self, target: SafeTarget, budget: Budget) -> RobotFileParser | None:
        """Return the robots.txt rules of the target's origin, fetched once; None allows all."""
        key = target.origin
        if key in self._robots:
            return self._robots[key]
        async with self._robots_locks.setdefault(key, asyncio.Lock()):
            if key not in self._robots:
                self._robots[key] = await self._load_robots(target, budget)
                if len(self._robots) > _ROBOTS_CACHE_SIZE:
                    del self._robots[next(iter(self._robots))]
        self._robots_locks.pop(key, None)
        return self._robots.get(key)

    async def _load_robots(self, target: SafeTarget, budget: Budget) -> RobotFileParser | None:
        allowance = Budget(min(budget.remaining, self.policy.timeout_s * _ROBOTS_SHARE))
        try:
            got = await self._download(
                str(target.url.join("/robots.txt")), allowance, _ROBOTS_MAX_BYTES, for_page=False
            )
        except (ScrapeError, httpx.HTTPError, TimeoutError):
            return None
        finally:
            budget.remaining -= allowance.spent
        if not 200 <= got.status < 300:
            return None
        rules = RobotFileParser()
        rules.parse(got.body.decode("utf-8", "replace").splitlines())
        return rules


async def fetch_page(
    url: str,
    *,
    policy: FetchPolicy | None = None,
    client: httpx.AsyncClient | None = None,
    resolver: Resolver = resolve_host,
) -> Page:
    """Fetch one page with a short-lived `Scraper`; it raises what `Scraper.fetch` does."""
    async with Scraper(policy, client=client, resolver=resolver) as scraper:
        return await scraper.fetch(url)
