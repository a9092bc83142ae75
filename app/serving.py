"""How `serve` runs the app under uvicorn so that slow or idle clients cannot starve others.

uvicorn waits for a request's head as long as the client likes, and accepts connections
until the process runs out of file descriptors, so enough connections trickling header
lines (slowloris) make every other request fail. Here:

- a connection that has not sent a whole request head within `header_timeout_s` (on a
  new connection, or between two requests of a kept-alive one) is closed;
- past `max_connections` open connections, a new one closes the oldest connection that
  is waiting for a request head (an idle or trickling one), or itself when every open
  connection is busy with a request; so a new client with a real request is served even
  while the slots are full of slow ones;
- the soft limit of open files is raised as far as needed (up to the hard limit), and
  `max_connections` is kept below it with room for the data file, Redis (a connection
  per run slot) and outgoing connections.
"""

import asyncio
import logging
import resource
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

from app.settings import Settings

logger = logging.getLogger(__name__)
# Descriptors kept for what is not a client connection (stores, Redis pools, scrapers).
_RESERVED_FILES = 256


class _Guarded:
    """Mixed into a uvicorn HTTP protocol: a deadline for each request head, a connection cap."""

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
        """Expect a request head within the timeout; the cycle now is the one to move past."""
        self._waiting_past = self.cycle
        self._head_timer = self.loop.call_later(self.header_timeout_s, self._head_overdue)

    def _head_overdue(self) -> None:
        if self.cycle is self._waiting_past and not self.transport.is_closing():
            self.transport.close()

    def waiting_for_head(self) -> bool:
        """Whether no request is under way on this connection (idle, or its head trickles)."""
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


class GuardedH11Protocol(_Guarded, H11Protocol):  # type: ignore[misc]
    """uvicorn's h11 protocol with a request-head deadline and a connection cap."""


def guarded_protocol(settings: Settings) -> type[asyncio.Protocol]:
    """The protocol class `serve` gives uvicorn, bound to the settings' limits.

    httptools (uvicorn's faster parser) when it is installed, else h11.
    """
    base: type[asyncio.Protocol] = GuardedH11Protocol
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

        base = type("GuardedHttpToolsProtocol", (_Guarded, HttpToolsProtocol), {})
    except ImportError:  # httptools is optional: h11 serves as well
        pass
    # With Redis, the run queue holds a connection per run slot: room for those too. (An
    # event stream there also holds a Redis connection while it waits in XREAD.)
    reserved = _RESERVED_FILES
    if settings.redis_url is not None:
        reserved += settings.max_concurrent_runs
    limits = {
        "header_timeout_s": settings.header_timeout_s,
        "max_connections": connection_cap(settings.max_connections, reserved),
    }
    return type(base.__name__, (base,), limits)


def connection_cap(wanted: int, reserved: int = _RESERVED_FILES) -> int:
    """`wanted`, or less if the open-files limit (raised as far as allowed) is lower.

    `reserved` descriptors are kept for what is not a client connection.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = wanted + reserved
    if soft != resource.RLIM_INFINITY and soft < needed:
        raised = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
            soft = raised
        except (ValueError, OSError):
            pass
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
