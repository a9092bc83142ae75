"""Watches on Redis (see `stores.watches`): shared by every API replica and worker.

Keys, under the prefix: `watch:<thread>`, a hash of the watch's `version` and `body`
(JSON); `watches:due`, a sorted set of watched threads by when the scheduler must look
at them (0 while a refresh is in flight); `watches:owner:<owner>`, a set of the owner's
watched threads; `watch-entries:<thread>`, a hash of sequence number -> entry (JSON);
`watch-deliveries`, a hash of pending delivery (`Delivery.key`) -> delivery (JSON), with
`watch-deliveries:due`, a sorted set of them by next try. Each change is one Lua script,
so the compare-and-set on the version is atomic, and an entry and its deliveries are
written together.
"""

import builtins
from datetime import datetime

from redis.asyncio import Redis

from stores.redis_connection import awaited, text
from stores.watches import Delivery, WatchEntryRecord, WatchRecord, new_secret

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

# KEYS: watch hash, due set, owner set, entries hash, deliveries hash, their due set.
# ARGV: thread id, then the keys of the watch's deliveries.
_DELETE = """
local existed = redis.call('DEL', KEYS[1], KEYS[4])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('SREM', KEYS[3], ARGV[1])
for i = 2, #ARGV do
  redis.call('HDEL', KEYS[5], ARGV[i])
  redis.call('ZREM', KEYS[6], ARGV[i])
end
return existed
"""

# KEYS: entries hash, deliveries hash, their due set. ARGV: seq, entry, then three per
# delivery: its key, body, due score.
_ADD_ENTRY = """
if redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2]) == 0 then return 0 end
for i = 3, #ARGV, 3 do
  redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
  redis.call('ZADD', KEYS[3], ARGV[i + 2], ARGV[i])
end
return 1
"""

# KEYS: deliveries hash, their due set. ARGV: key, expected version, body, due score.
_REPLACE_DELIVERY = """
local stored = redis.call('HGET', KEYS[1], ARGV[1])
if not stored or cjson.decode(stored)['version'] ~= tonumber(ARGV[2]) then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[1])
return 1
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
        self._add_entry = client.register_script(_ADD_ENTRY)
        self._replace_delivery = client.register_script(_REPLACE_DELIVERY)
        self._deliveries = f"{prefix}watch-deliveries"
        self._deliveries_due = f"{prefix}watch-deliveries:due"

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
            self._deliveries,
            self._deliveries_due,
        ]
        stored = await awaited(self._client.hkeys(self._deliveries))
        pending = [text(k) for k in stored if text(k).startswith(f"{thread_id}:")]
        return bool(await self._delete(keys=keys, args=[thread_id, *pending]))

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

    async def add_entry(
        self,
        thread_id: str,
        entry: WatchEntryRecord,
        deliveries: builtins.list[Delivery] = [],  # noqa: B006 (never mutated)
    ) -> bool:
        """Store the entry unless its `seq` is stored, and with a new one its deliveries."""
        keys = [self._entries(thread_id), self._deliveries, self._deliveries_due]
        args: list[str | float] = [str(entry.seq), entry.model_dump_json()]
        for delivery in deliveries:
            args += [delivery.key(), delivery.model_dump_json(), delivery.next_try.timestamp()]
        return bool(await self._add_entry(keys=keys, args=args))

    async def entry(self, thread_id: str, seq: int) -> WatchEntryRecord | None:
        """Return the entry number `seq`, or None."""
        body = await awaited(self._client.hget(self._entries(thread_id), str(seq)))
        return WatchEntryRecord.model_validate_json(body) if body else None

    async def deliveries_due(self, now: datetime) -> builtins.list[Delivery]:
        """Return the deliveries due by `now`, the earliest first."""
        keys = await self._client.zrangebyscore(self._deliveries_due, "-inf", now.timestamp())
        if not keys:
            return []
        bodies = await awaited(self._client.hmget(self._deliveries, [text(k) for k in keys]))
        return [Delivery.model_validate_json(b) for b in bodies if b]

    async def replace_delivery(self, old: Delivery, new: Delivery) -> Delivery | None:
        """Compare-and-set on the delivery's version."""
        stored = new.model_copy(update={"version": old.version + 1})
        keys = [self._deliveries, self._deliveries_due]
        args: list[str | float] = [
            old.key(),
            str(old.version),
            stored.model_dump_json(),
            stored.next_try.timestamp(),
        ]
        return stored if await self._replace_delivery(keys=keys, args=args) else None

    async def finish_delivery(self, delivery: Delivery) -> None:
        """Remove the delivery."""
        async with self._client.pipeline(transaction=True) as pipe:
            pipe.hdel(self._deliveries, delivery.key())
            pipe.zrem(self._deliveries_due, delivery.key())
            await pipe.execute()

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
