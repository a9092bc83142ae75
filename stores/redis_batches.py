"""Redis commands of many concurrent callers, sent to Redis together in one pipeline.

Under load most of a command's cost is in the client (a pooled connection, packing, a
round trip of its own), so calls queued while a pipeline is in flight go in the next one
(`stores.batching`), in the order they were queued. A call that fails (a script error)
fails alone; a lost connection fails the whole batch. `lock` gives redis-py's lock whose
acquire and release go out the same way.
"""

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.client import Pipeline
from redis.asyncio.lock import Lock
from redis.commands.core import AsyncScript
from redis.exceptions import LockNotOwnedError, NoScriptError

from stores.batching import Batcher, set_outcome

# Queues one command on a pipeline (`lambda pipe: pipe.hgetall(key)`): redis-py builds it
# and parses its reply as it would for the client.
Command = Callable[[Pipeline], object]


@dataclass
class _Call:
    queue: Command
    done: "asyncio.Future[Any]" = field(repr=False)
    script: AsyncScript | None = None  # loaded again if the server does not know it


class RedisBatches:
    """Sends the commands and script calls of `client`'s callers, many per pipeline."""

    def __init__(self, client: Redis) -> None:
        self._client = client
        self._batches = Batcher(self._send)

    @property
    def client(self) -> Redis:
        """The client the batches are sent on (for what cannot be batched: pub/sub)."""
        return self._client

    def lock(self, name: str, **options: Any) -> "BatchedLock":
        """Return redis-py's lock on `name` (`options`: `Lock`'s), sent through these batches."""
        return BatchedLock(self, name, **options)

    def command(self, queue: Command) -> "asyncio.Future[Any]":
        """Queue one command; the future gives its reply (or its error)."""
        return self._add(queue, None)

    def call(self, script: AsyncScript, keys: list[Any], args: list[Any]) -> "asyncio.Future[Any]":
        """Queue one call of `script` (registered on the client); the future gives its reply."""
        return self._add(lambda pipe: pipe.evalsha(script.sha, len(keys), *keys, *args), script)

    def _add(self, queue: Command, script: AsyncScript | None) -> "asyncio.Future[Any]":
        done = asyncio.get_running_loop().create_future()
        self._batches.add(_Call(queue, done, script))
        return done

    async def drain(self) -> None:
        """Wait until every queued call has been sent and answered."""
        await self._batches.drain()

    async def _send(self, calls: list[_Call]) -> None:
        """Send one batch and give each call its reply (never raise: `Batcher`)."""
        try:
            replies = await self._pipeline(calls)
            unknown = [i for i, reply in enumerate(replies) if isinstance(reply, NoScriptError)]
            if unknown:  # a server that restarted, or never saw the script: load it, again
                scripts = {s.sha: s for i in unknown if (s := calls[i].script) is not None}
                for script in scripts.values():
                    await self._client.script_load(script.script)
                again = await self._pipeline([calls[i] for i in unknown])
                for i, reply in zip(unknown, again, strict=True):
                    replies[i] = reply
        except Exception as exc:  # the connection: every call of the batch fails with it
            for call in calls:
                set_outcome(call.done, exc)
            return
        for call, reply in zip(calls, replies, strict=True):
            set_outcome(call.done, reply)

    async def _pipeline(self, calls: list[_Call]) -> list[Any]:
        pipe = self._client.pipeline(transaction=False)
        for call in calls:
            call.queue(pipe)
        return list(await pipe.execute(raise_on_error=False))


class BatchedLock(Lock):
    """redis-py's lock whose own acquire and release commands go out in `RedisBatches` pipelines."""

    def __init__(self, batches: RedisBatches, name: str, **options: Any) -> None:
        super().__init__(batches.client, name, **options)
        self._batches = batches

    async def do_acquire(self, token: str | bytes) -> bool:
        """Take the lock if it is free (SET NX, expiring after the lock's timeout)."""
        name, px = self.name, int(self.timeout * 1000) if self.timeout else None
        return bool(await self._batches.command(lambda pipe: pipe.set(name, token, nx=True, px=px)))

    async def do_release(self, expected_token: bytes) -> None:
        """Let the lock go if `expected_token` still holds it; LockNotOwnedError if not."""
        release = self.lua_release
        assert release is not None  # registered by `Lock.__init__`
        if not await self._batches.call(release, [self.name], [expected_token]):
            raise LockNotOwnedError("Cannot release a lock that's no longer owned")
