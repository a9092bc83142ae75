"""Watches on Redis (see `stores.watches`): shared by every API replica and worker.

Keys, under the prefix: `watch:<thread>`, a hash of the watch's `version` and `body`
(JSON); `watches:due`, a sorted set of watched threads by when the scheduler must look
at them (0 while a refresh is in flight); `watches:owner:<owner>`, a set of the owner's
watched threads; `watch-entries:<thread>`, a hash of sequence number -> entry (JSON).
Each change is one Lua script, so the compare-and-set on the version is atomic.
"""

import builtins
from datetime import datetime

from redis.asyncio import Redis

from stores.redis_connection import awaited, text
from stores.watches import WatchEntryRecord, WatchRecord, new_secret

# KEYS: watch hash, due set, owner set. ARGV: thread id, version, body, due score.
_CREATE = """
if redis.call('HSETNX', KEYS[1], 'version', ARGV[2]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'body', ARGV[3])
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[1])
redis.call('SADD', KEYS[3], ARGV[1])
return 1
"""

# KEYS: watch hash, due set. ARGV: thread id, expected version, new version, body, score.
_REPLACE = """
if redis.call('HGET', KEYS[1], 'version') ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], 'version', ARGV[3], 'body', ARGV[4])
redis.call('ZADD', KEYS[2], ARGV[5], ARGV[1])
return 1
"""

# KEYS: watch hash, due set, owner set, entries hash. ARGV: thread id.
_DELETE = """
local existed = redis.call('DEL', KEYS[1], KEYS[4])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('SREM', KEYS[3], ARGV[1])
return existed
"""


class RedisWatchStore:
    """`SqliteWatchStore`'s operations, on Redis."""

    def __init__(self, client: "Redis", prefix: str = "research:") -> None:
        self._client = client
        self._prefix = prefix
        self._due = f"{prefix}watches:due"
        self._create = client.register_script(_CREATE)
        self._replace = client.register_script(_REPLACE)
        self._delete = client.register_script(_DELETE)

    def _watch(self, thread_id: str) -> str:
        return f"{self._prefix}watch:{thread_id}"

    def _owner(self, owner: str) -> str:
        return f"{self._prefix}watches:owner:{owner}"

    def _entries(self, thread_id: str) -> str:
        return f"{self._prefix}watch-entries:{thread_id}"

    async def create(self, watch: WatchRecord) -> bool:
        """Store a new watch unless the thread has one."""
        keys = [self._watch(watch.thread_id), self._due, self._owner(watch.owner)]
        args: list[str | float] = [
            watch.thread_id,
            watch.version,
            watch.model_dump_json(),
            watch.due_score(),
        ]
        return bool(await self._create(keys=keys, args=args))

    async def get(self, thread_id: str) -> WatchRecord | None:
        """Return the thread's watch, or None."""
        body = await awaited(self._client.hget(self._watch(thread_id), "body"))
        return WatchRecord.model_validate_json(body) if body else None

    async def replace(self, old: WatchRecord, new: WatchRecord) -> WatchRecord | None:
        """Compare-and-set on the version (see `WatchStore.replace`)."""
        stored = new.model_copy(update={"version": old.version + 1})
        keys = [self._watch(old.thread_id), self._due]
        args: list[str | float] = [
            old.thread_id,
            str(old.version),
            str(stored.version),
            stored.model_dump_json(),
            stored.due_score(),
        ]
        return stored if await self._replace(keys=keys, args=args) else None

    async def delete(self, thread_id: str) -> bool:
        """Remove the watch and its entries."""
        watch = await self.get(thread_id)
        if watch is None:
            return False
        keys = [
            self._watch(thread_id),
            self._due,
            self._owner(watch.owner),
            self._entries(thread_id),
        ]
        return bool(await self._delete(keys=keys, args=[thread_id]))

    async def due(self, now: datetime) -> builtins.list[WatchRecord]:
        """Return the watches due by `now` or with a refresh in flight."""
        ids = await self._client.zrangebyscore(self._due, "-inf", now.timestamp())
        return await self._many([text(i) for i in ids])

    async def _many(self, thread_ids: builtins.list[str]) -> builtins.list[WatchRecord]:
        if not thread_ids:
            return []
        async with self._client.pipeline(transaction=False) as pipe:
            for thread_id in thread_ids:
                pipe.hget(self._watch(thread_id), "body")
            bodies = await pipe.execute()
        return [WatchRecord.model_validate_json(b) for b in bodies if b]

    async def of_owner(self, owner: str) -> builtins.list[WatchRecord]:
        """Return the owner's watches, oldest first."""
        ids = await awaited(self._client.smembers(self._owner(owner)))
        found = await self._many(sorted(text(i) for i in ids))
        return sorted(found, key=lambda w: w.created_at)

    async def add_entry(self, thread_id: str, entry: WatchEntryRecord) -> bool:
        """Store the entry unless its `seq` is stored."""
        added = self._client.hsetnx(
            self._entries(thread_id), str(entry.seq), entry.model_dump_json()
        )
        return bool(await awaited(added))

    async def entries(self, thread_id: str, limit: int = 100) -> builtins.list[WatchEntryRecord]:
        """Return the entries, newest first."""
        stored = await awaited(self._client.hgetall(self._entries(thread_id)))
        found = [WatchEntryRecord.model_validate_json(v) for v in stored.values()]
        return sorted(found, key=lambda e: e.seq, reverse=True)[:limit]

    async def secret(self, owner: str) -> str:
        """Return the owner's signing secret; the first caller's random one is kept."""
        key = f"{self._prefix}watches:secret:{owner}"
        await awaited(self._client.set(key, new_secret(), nx=True))
        return text(await awaited(self._client.get(key)))
