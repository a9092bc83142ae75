"""Lua script calls of many concurrent callers, sent to Redis together in one pipeline.

Under load (hundreds of runs checkpointing at once) most of a Redis command's cost is in
the client: taking a pooled connection, its timeout, packing, a round trip of its own.
Calls queued while a pipeline is in flight go in the next one (`stores.batching`), so a
busy process pays those once per batch. A lone call goes at once, alone. Each call keeps
its own outcome: one that fails (a script error) fails alone, a lost connection fails
the whole batch, as it would have failed each call.
"""

import asyncio
from dataclasses import dataclass, field
from typing import Any

from redis.asyncio import Redis
from redis.commands.core import AsyncScript
from redis.exceptions import NoScriptError

from stores.batching import Batcher, settle


@dataclass
class _Call:
    script: AsyncScript
    keys: list[str]
    args: list[Any]
    done: "asyncio.Future[Any]" = field(repr=False)


class ScriptBatches:
    """Runs scripts registered on `client`, many callers' calls per pipeline."""

    def __init__(self, client: Redis) -> None:
        self._client = client
        self._batches = Batcher(self._send)

    def call(self, script: AsyncScript, keys: list[str], args: list[Any]) -> "asyncio.Future[Any]":
        """Queue one call of `script`; the future gives its reply (or its error)."""
        done = asyncio.get_running_loop().create_future()
        self._batches.add(_Call(script, keys, args, done))
        return done

    async def drain(self) -> None:
        """Wait until every queued call has been sent and answered."""
        await self._batches.drain()

    async def _send(self, calls: list[_Call]) -> None:
        """Send one batch; settle each call with its reply (never raise: `Batcher`)."""
        try:
            replies = await self._pipeline(calls)
            unknown = [i for i, reply in enumerate(replies) if isinstance(reply, NoScriptError)]
            if unknown:  # a server that restarted, or never saw the script: load it, again
                for script in {calls[i].script.sha: calls[i].script for i in unknown}.values():
                    await self._client.script_load(script.script)
                again = await self._pipeline([calls[i] for i in unknown])
                for i, reply in zip(unknown, again, strict=True):
                    replies[i] = reply
        except Exception as exc:  # the connection: every call of the batch fails with it
            for call in calls:
                settle(call.done, exc)
            return
        for call, reply in zip(calls, replies, strict=True):
            settle(call.done, reply)

    async def _pipeline(self, calls: list[_Call]) -> list[Any]:
        pipe = self._client.pipeline(transaction=False)
        for call in calls:
            pipe.evalsha(call.script.sha, len(call.keys), *call.keys, *call.args)
        return list(await pipe.execute(raise_on_error=False))
