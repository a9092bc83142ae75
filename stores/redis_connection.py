"""The service's Redis client, and the typing helper its commands need.

Every Redis store (checkpoints, events, registry, evidence, the run queue) gets its
client from `redis_client`, so all of them wait for a free connection, retry on a fresh
one after a restart and time out the same way.
"""

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

    Waiting (a blocking pool) instead of failing with "Too many connections": 200
    concurrent runs burst past redis-py's default pool of 100. The retry hides a pooled
    connection that died with a Redis restart once the server is back. The library
    version is given, not looked up in the package metadata for every new connection.

    Every command times out after `REDIS_TIMEOUT_S` (plus `blocking_s` for a client whose
    commands block on the server, as XREAD BLOCK does). A timeout is not retried: the
    command may have run (an XADD twice is an event twice), and the caller answers 503.
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
    """Type a command of the asyncio client as what it is: awaitable.

    redis-py 7 types commands shared with the sync client as `Awaitable[T] | T`.
    """
    return cast(Awaitable[T], result)
