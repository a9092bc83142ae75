"""The thread registry on Redis: shared by every API replica and worker.

One hash per thread; a sorted set per owner (score: creation time in integer
microseconds) lists a key's threads newest first; a sorted set of the queued and running
threads is what a restarted service resumes. The page cursor is the SQLite registry's.

Creating a record and setting its status are one Lua script call each, sent through the
shared pipelines (`stores.redis_batches`). The status script finds the owner's set
through the record (a key it is not given), so the registry assumes one server, not a
Cluster.
"""

import builtins
import json
from datetime import UTC, datetime
from typing import Any

from redis.asyncio import Redis

from core.state import ReportStatus
from stores.redis_batches import RedisBatches
from stores.redis_connection import awaited, text
from stores.registry import (
    ACTIVE,
    RunStatus,
    ThreadExists,
    ThreadRecord,
    decode_cursor,
    encode_cursor,
    stamp,
)

# KEYS: thread hash, owner set, active set. ARGV: owner, score, thread id, whether it
# is active ("1"), then the other fields as name, value pairs. 0 if the id is taken.
_CREATE = """
if redis.call('HSETNX', KEYS[1], 'owner', ARGV[1]) == 0 then
    return 0
end
redis.call('HSET', KEYS[1], unpack(ARGV, 5))
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[3])
if ARGV[4] == '1' then
    redis.call('ZADD', KEYS[3], ARGV[2], ARGV[3])
end
return 1
"""

# KEYS: thread hash, active set. ARGV: status, error (JSON), updated_at, what to do with
# the report status ("set", "clear" or "keep") and the one to set, whether the status is
# active ("1"), the owner sets' key prefix, thread id, and its score if its owner set has
# none. The record as it is now (its fields and values, flat), or false if there is none.
_SET_STATUS = """
if redis.call('HEXISTS', KEYS[1], 'created_at') == 0 then
    return false
end
redis.call('HSET', KEYS[1], 'status', ARGV[1], 'error', ARGV[2], 'updated_at', ARGV[3])
if ARGV[4] == 'set' then
    redis.call('HSET', KEYS[1], 'report', ARGV[5])
elseif ARGV[4] == 'clear' then
    redis.call('HDEL', KEYS[1], 'report')
end
if ARGV[6] == '1' then
    local owner = redis.call('HGET', KEYS[1], 'owner')
    local score = redis.call('ZSCORE', ARGV[7] .. owner, ARGV[8]) or ARGV[9]
    redis.call('ZADD', KEYS[2], score, ARGV[8])
else
    redis.call('ZREM', KEYS[2], ARGV[8])
end
return redis.call('HGETALL', KEYS[1])
"""


def _micros(moment: datetime) -> int:
    return int(moment.astimezone(UTC).timestamp() * 1_000_000)


class RedisRegistry:
    """`SqliteRegistry`'s operations, on Redis."""

    def __init__(
        self, client: "Redis", prefix: str = "research:", batches: RedisBatches | None = None
    ) -> None:
        """`batches`: `client`'s shared command batches."""
        self._client = client
        self._prefix = prefix
        self._owner_prefix = f"{prefix}owner:"
        self._active = f"{prefix}active"
        self._commands = batches or RedisBatches(client)
        self._create = client.register_script(_CREATE)
        self._set_status = client.register_script(_SET_STATUS)

    def _thread(self, thread_id: str) -> str:
        return f"{self._prefix}thread:{thread_id}"

    def _owner(self, owner: str) -> str:
        return f"{self._owner_prefix}{owner}"

    async def create(self, record: ThreadRecord) -> None:
        """Register a new thread; raise `ThreadExists` if its id is taken."""
        fields = {
            "topic": record.topic,
            "status": record.status,
            "created_at": stamp(record.created_at),
            "updated_at": stamp(record.updated_at),
            "error": json.dumps(record.error),
            "options": json.dumps(record.options, ensure_ascii=False),
            "metadata": json.dumps(record.metadata, ensure_ascii=False),
        }
        keys = [self._thread(record.thread_id), self._owner(record.owner), self._active]
        args: list[Any] = [
            record.owner,
            _micros(record.created_at),
            record.thread_id,
            int(record.status in ACTIVE),
        ]
        for name, value in fields.items():
            args += [name, value]
        if not await self._commands.call(self._create, keys, args):
            raise ThreadExists(record.thread_id)

    async def get(self, thread_id: str) -> ThreadRecord | None:
        """Return the thread's record, or None when it is not registered."""
        key = self._thread(thread_id)
        fields = await self._commands.command(lambda pipe: pipe.hgetall(key))
        return self._record(thread_id, fields)

    async def _get_many(self, thread_ids: builtins.list[str]) -> builtins.list[ThreadRecord]:
        """Return the records of these threads in one round trip, in order, skipping absent ones."""
        pipe = self._client.pipeline(transaction=False)
        for thread_id in thread_ids:
            pipe.hgetall(self._thread(thread_id))
        found = await pipe.execute()
        records = [self._record(t, f) for t, f in zip(thread_ids, found, strict=True)]
        return [r for r in records if r is not None]

    def _record(self, thread_id: str, fields: dict[Any, Any]) -> ThreadRecord | None:
        values = {text(k): text(v) for k, v in fields.items()}
        if "created_at" not in values:  # absent
            return None
        return ThreadRecord(
            thread_id=thread_id,
            owner=values["owner"],
            topic=values["topic"],
            status=values["status"],
            created_at=datetime.fromisoformat(values["created_at"]),
            updated_at=datetime.fromisoformat(values["updated_at"]),
            error=json.loads(values.get("error") or "null"),
            options=json.loads(values.get("options") or "{}"),
            metadata=json.loads(values.get("metadata") or "{}"),
            report=values.get("report") or None,
        )

    async def set_status(
        self,
        thread_id: str,
        status: RunStatus,
        error: str | None = None,
        report: ReportStatus | None = None,
    ) -> ThreadRecord:
        """Set the run status, error and report status (see `Registry.set_status`)."""
        now = datetime.now(UTC)
        active = status in ACTIVE
        report_change = "set" if report is not None else "clear" if active else "keep"
        args: list[Any] = [
            status,
            json.dumps(error),
            stamp(now),
            report_change,
            report or "",
            int(active),
            self._owner_prefix,
            thread_id,
            _micros(now),
        ]
        keys = [self._thread(thread_id), self._active]
        flat = await self._commands.call(self._set_status, keys, args) or []
        record = self._record(thread_id, dict(zip(flat[::2], flat[1::2], strict=True)))
        if record is None:
            raise KeyError(thread_id)
        return record

    async def update(
        self,
        thread_id: str,
        *,
        topic: str | None = None,
        options: dict[str, Any] | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> ThreadRecord:
        """Replace the fields given, stamp `updated_at`; KeyError for an unknown thread."""
        record = await self.get(thread_id)
        if record is None:
            raise KeyError(thread_id)
        now = datetime.now(UTC)
        fields: dict[Any, Any] = {"updated_at": stamp(now)}
        changes: dict[str, Any] = {"updated_at": now}
        if topic is not None:
            fields["topic"] = changes["topic"] = topic
        if options is not None:
            fields["options"] = json.dumps(options, ensure_ascii=False)
            changes["options"] = options
        if metadata is not None:
            fields["metadata"] = json.dumps(metadata, ensure_ascii=False)
            changes["metadata"] = metadata
        await awaited(self._client.hset(self._thread(thread_id), mapping=fields))
        return record.model_copy(update=changes)

    async def delete(self, thread_id: str) -> bool:
        """Remove the thread's record; return whether there was one."""
        record = await self.get(thread_id)
        pipe = self._client.pipeline(transaction=True)
        pipe.delete(self._thread(thread_id))
        pipe.zrem(self._active, thread_id)
        if record is not None:
            pipe.zrem(self._owner(record.owner), thread_id)
        removed = await pipe.execute()
        return bool(removed[0])

    async def active(self) -> builtins.list[ThreadRecord]:
        """Return the queued and running threads, oldest first (to resume after a restart)."""
        members: Any = await self._client.zrange(self._active, 0, -1)
        return await self._get_many([text(t) for t in members])

    async def ping(self) -> None:
        """Raise when Redis cannot be reached."""
        await awaited(self._client.ping())

    async def list(
        self, owner: str, limit: int = 20, cursor: str | None = None
    ) -> tuple[builtins.list[ThreadRecord], str | None]:
        """Return one page of the owner's threads, newest first, and the next page's cursor."""
        if limit < 1:
            raise ValueError("limit must be at least 1")
        key = self._owner(owner)
        # redis-py types replies loosely: these are lists of (member, score) pairs.
        entries: Any
        if cursor is None:
            entries = await self._client.zrevrange(key, 0, limit, withscores=True)
        else:
            created_at, after_id = decode_cursor(cursor)
            top = _micros(datetime.fromisoformat(created_at))
            # Ties on the score are ordered by id, descending, as in SQLite: skip the ids
            # of the cursor's own microsecond that came at or before it.
            candidates: Any = await self._client.zrevrangebyscore(
                key, top, "-inf", start=0, num=limit + 1 + 64, withscores=True
            )
            entries = [
                (member, score)
                for member, score in candidates
                if int(score) < top or text(member) < after_id
            ][: limit + 1]
        found = await self._get_many([text(member) for member, _score in entries])
        if len(found) <= limit:
            return found, None
        page = found[:limit]
        return page, encode_cursor(page[-1].created_at, page[-1].thread_id)
