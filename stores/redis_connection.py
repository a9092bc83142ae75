"""The service's Redis client, shared by every Redis store, and a typing helper."""

from collections.abc import Awaitable
from typing import TypeVar, cast

from redis import __version__ as redis_version
from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.driver_info import DriverInfo
from redis.exceptions import ConnectionError as RedisConnectionError

from core.upstream import require_version

require_version("redis", "7.4", "8")

# How long one command may wait for Redis: a stalled server (SIGSTOP, a full network
# buffer) then fails the request with 503 in seconds instead of hanging it. Blocking
# reads add their block time (`redis_client(..., blocking_s=...)`).
REDIS_TIMEOUT_S = 3.0


def redis_client(url: str, max_connections: int = 256, blocking_s: float = 0.0) -> Redis:
    """Build a client whose commands wait for a free connection and retry on a fresh one.

    The blocking pool waits instead of failing with "Too many connections" under bursts;
    the retry hides a connection that died with a Redis restart. Commands time out after
    `REDIS_TIMEOUT_S` (plus `blocking_s` for blocking reads) and a timeout is not retried:
    the command may have run.
    """
    pool = BlockingConnectionPool.from_url(
        url,
        max_connections=max_connections,
        timeout=30,
        socket_timeout=REDIS_TIMEOUT_S + blocking_s,
        socket_connect_timeout=REDIS_TIMEOUT_S,
        retry=Retry(
            ExponentialBackoff(cap=1.0, base=0.05),
            retries=3,
            supported_errors=(RedisConnectionError,),  # its default retries timeouts too
        ),
        driver_info=DriverInfo(lib_version=redis_version),
    )
    return Redis.from_pool(pool)


T = TypeVar("T")


def awaited(result: Awaitable[T] | T) -> Awaitable[T]:
    """Type a command of the asyncio client as awaitable (redis-py types it `Awaitable[T] | T`)."""
    return cast(Awaitable[T], result)


def text(value: bytes | str) -> str:
    """Return a reply's bytes as text."""
    return value.decode() if isinstance(value, bytes) else value
