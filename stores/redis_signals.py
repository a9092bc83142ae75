"""Pause and cancel requests in Redis, for runs that workers execute (`service.signals`).

Any API replica sets a request and any worker reads it; the same place holds each
thread's admission lock, so only one caller decides which waiting run starts.
"""

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from stores.redis_batches import RedisBatches
from stores.redis_outage import AWAY

logger = logging.getLogger(__name__)

# A forgotten request (its run died with no one to resume it) must not live for ever.
SIGNAL_TTL_S = 24 * 3600
# An admission takes a few store round trips; a holder that died frees the lock after this.
ADMISSION_LOCK_S = 30.0
# A process that hears pause requests asks Redis about a thread at a node boundary only
# when one was heard for it, or when it last asked this long ago (this bounds the wait
# for a message lost on a connection that broke unnoticed).
PAUSE_RECHECK_S = 5.0
# How long the subscription waits for a message before it looks again; after a failure,
# how long it waits before subscribing again.
_LISTEN_POLL_S = 1.0
_LISTEN_RETRY_S = 1.0
# Threads remembered as heard (requests for runs elsewhere) or asked about, at most.
_HEARD_MAX = 4096


class RedisSignals:
    """Requests any API replica can set and any worker can read: one key each.

    A pause request is also published on a channel, so a subscribed process's node
    boundaries ask Redis only when a request was heard, or `recheck_s` after they last
    asked (and always while the subscription is down).
    """

    def __init__(
        self,
        batches: RedisBatches,
        prefix: str = "research:signal",
        recheck_s: float = PAUSE_RECHECK_S,
    ) -> None:
        """Send through `batches`, the pipelines of the process's Redis stores."""
        self._batches = batches
        self._client = batches.client
        self._prefix = prefix
        self._recheck_s = recheck_s
        self._channel = f"{prefix}:pauses"
        # Threads named on the channel since their last check, oldest first (a dict as an
        # ordered set: requests for threads that run elsewhere are let go past a bound).
        self._heard: dict[str, None] = {}
        self._checked: dict[str, float] = {}  # when each thread's request was last asked for
        self._subscribed = False
        self._listener: asyncio.Task[None] | None = None

    def _key(self, kind: str, thread_id: str) -> str:
        return f"{self._prefix}:{kind}:{thread_id}"

    @property
    def hearing(self) -> bool:
        """Whether pause requests are heard now (if not, every node boundary asks Redis)."""
        return self._subscribed

    @asynccontextmanager
    async def admission(self, thread_id: str) -> AsyncIterator[None]:
        """Hold the thread's admission lock, across processes (a redis-py lock with a timeout)."""
        lock = self._batches.lock(
            self._key("admission", thread_id),
            timeout=ADMISSION_LOCK_S,
            blocking_timeout=ADMISSION_LOCK_S,
        )
        async with lock:
            yield

    async def request_pause(self, thread_id: str) -> None:
        """Note the request, and tell the processes that execute runs."""
        pipe = self._client.pipeline(transaction=True)
        pipe.set(self._key("pause", thread_id), 1, ex=SIGNAL_TTL_S)
        pipe.publish(self._channel, thread_id)
        await pipe.execute()

    async def take_pause(self, thread_id: str) -> bool:
        """Consume the request, if there is one (asking Redis only when it may be there)."""
        if self._listener is None:
            self._listener = asyncio.create_task(self._listen(), name="pause-requests")
        now = time.monotonic()
        last = self._checked.get(thread_id)
        if (
            self._subscribed
            and thread_id not in self._heard
            and last is not None
            and now - last < self._recheck_s
        ):
            return False
        self._heard.pop(thread_id, None)
        self._note_checked(thread_id, now)
        # DEL answers how many keys it removed: taking the request is one atomic command.
        key = self._key("pause", thread_id)
        return bool(await self._batches.command(lambda pipe: pipe.delete(key)))

    async def pause_asked(self, thread_id: str) -> bool:
        """Return whether the request is there (False while Redis is away: work goes on)."""
        key = self._key("pause", thread_id)
        try:
            return bool(await self._batches.command(lambda pipe: pipe.exists(key)))
        except AWAY:
            return False

    def _note_checked(self, thread_id: str, now: float) -> None:
        if len(self._checked) >= _HEARD_MAX:  # bounded: forgotten threads are asked again
            self._checked.clear()
        self._checked[thread_id] = now

    async def _listen(self) -> None:
        """Hear pause requests while the process runs, subscribing again after a failure."""
        while True:
            pubsub = self._client.pubsub()
            try:
                await pubsub.subscribe(self._channel)
                while True:
                    message = await pubsub.get_message(timeout=_LISTEN_POLL_S)
                    if message is None:
                        continue
                    if message["type"] == "subscribe":
                        # Up, or up again after redis-py reconnected: what was published
                        # meanwhile is unheard, so every thread is asked about once more.
                        self._checked.clear()
                        self._subscribed = True
                    elif message["type"] == "message":
                        self._hear(message["data"])
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # Redis away: every boundary asks until it is back
                if self._subscribed:
                    logger.warning("pause requests not heard (%s); asking Redis meanwhile", exc)
            finally:
                self._subscribed = False
                with contextlib.suppress(Exception):
                    await pubsub.aclose()  # type: ignore[no-untyped-call]
            await asyncio.sleep(_LISTEN_RETRY_S)

    def _hear(self, data: bytes | str) -> None:
        thread_id = data.decode() if isinstance(data, bytes) else data
        self._heard.pop(thread_id, None)
        self._heard[thread_id] = None
        while len(self._heard) > _HEARD_MAX:
            del self._heard[next(iter(self._heard))]

    async def aclose(self) -> None:
        """Stop hearing pause requests."""
        if self._listener is not None:
            self._listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._listener
            self._listener = None

    async def request_cancel(self, thread_id: str) -> None:
        """Note the request."""
        await self._client.set(self._key("cancel", thread_id), 1, ex=SIGNAL_TTL_S)

    async def cancel_requested(self, thread_id: str) -> bool:
        """Return whether the owner asked to cancel."""
        return bool(await self._client.exists(self._key("cancel", thread_id)))

    async def clear(self, thread_id: str) -> None:
        """Drop both kinds of request."""
        self._heard.pop(thread_id, None)
        self._checked.pop(thread_id, None)
        keys = self._key("pause", thread_id), self._key("cancel", thread_id)
        await self._batches.command(lambda pipe: pipe.delete(*keys))
