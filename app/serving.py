"""The uvicorn protocol `serve` runs, so that slow or idle clients cannot starve the others.

A connection with no whole request head within `header_timeout_s` is closed; past
`max_connections`, a new one closes the oldest one waiting for a head (or itself).
"""

import asyncio
import contextlib
import logging
import resource
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

from app.settings import Settings

logger = logging.getLogger(__name__)
# Descriptors kept for what is not a client connection (stores, Redis pools, scrapers).
_RESERVED_FILES = 256


class _Guarded:
    """A mixin for a uvicorn HTTP protocol: a deadline for each request head, a connection cap."""

    header_timeout_s: float
    max_connections: int
    # Attributes of the uvicorn protocol this is mixed into.
    connections: set[Any]
    transport: asyncio.Transport
    loop: asyncio.AbstractEventLoop
    cycle: Any

    def connection_made(self, transport: asyncio.Transport) -> None:
        super().connection_made(transport)  # type: ignore[misc]
        self._opened = self.loop.time()
        self._arm()
        if len(self.connections) > self.max_connections:  # closing ones leave a moment later
            live = [c for c in self.connections if not c.transport.is_closing()]
            if len(live) > self.max_connections:
                self._make_room(live)

    def _arm(self) -> None:
        """Expect a request head within the timeout (the current cycle is the one to move past)."""
        self._waiting_past = self.cycle
        self._head_timer = self.loop.call_later(self.header_timeout_s, self._head_overdue)

    def _head_overdue(self) -> None:
        if self.cycle is self._waiting_past and not self.transport.is_closing():
            self.transport.close()

    def waiting_for_head(self) -> bool:
        """Return whether no request is under way here (idle, or its head trickles)."""
        return self.cycle is None or bool(self.cycle.response_complete)

    def _make_room(self, live: list[Any]) -> None:
        waiting = [c for c in live if c is not self and c.waiting_for_head()]
        victim = min(waiting, key=lambda c: c._opened) if waiting else self
        if victim is self:
            logger.warning("%d connections, all busy: refusing a new one", len(self.connections))
        victim.transport.close()

    def on_response_complete(self) -> None:
        super().on_response_complete()  # type: ignore[misc]
        self._head_timer.cancel()
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._head_timer.cancel()
        super().connection_lost(exc)  # type: ignore[misc]


def guarded_protocol(settings: Settings) -> type[asyncio.Protocol]:
    """Return the protocol class `serve` gives uvicorn (httptools if installed, else h11)."""
    base: type[asyncio.Protocol] = type("GuardedH11Protocol", (_Guarded, H11Protocol), {})
    with contextlib.suppress(ImportError):
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

        base = type("GuardedHttpToolsProtocol", (_Guarded, HttpToolsProtocol), {})
    # With Redis, the run queue holds a connection per run slot: room for those too.
    reserved = _RESERVED_FILES
    if settings.redis_url is not None:
        reserved += settings.max_concurrent_runs
    limits = {
        "header_timeout_s": settings.header_timeout_s,
        "max_connections": connection_cap(settings.max_connections, reserved),
    }
    return type(base.__name__, (base,), limits)


def connection_cap(wanted: int, reserved: int = _RESERVED_FILES) -> int:
    """Return `wanted`, or less if the open-files limit (raised as far as allowed) is lower."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = wanted + reserved
    if soft != resource.RLIM_INFINITY and soft < needed:
        raised = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
            soft = raised
    if soft != resource.RLIM_INFINITY and soft < needed:
        cap = max(16, soft - reserved)
        logger.warning(
            "the open-files limit is %d: at most %d connections (max_connections %d)",
            soft,
            cap,
            wanted,
        )
        return cap
    return wanted
