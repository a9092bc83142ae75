"""The thread registry on Redis: shared by every API replica and worker.

One hash per thread; a sorted set per owner (score: creation time in integer
microseconds, exact in a double) lists a key's threads newest first, so each key only
ever sees its own; a sorted set of the queued and running threads is what a restarted
service resumes. The page cursor is the SQLite registry's: (created_at, thread_id).
"""

import builtins
import json
from datetime import UTC, datetime
from typing import Any

from redis.asyncio import Redis

from core.state import ReportStatus
from stores.redis_saver import awaited
from stores.registry import (
    RunStatus,
    ThreadExists,
    ThreadRecord,
    decode_cursor,
    encode_cursor,
    stamp,
)

_ACTIVE_STATUSES = ("queued", "running")


def _micros(moment: datetime) -> int:
    return int(moment.astimezone(UTC).timestamp() * 1_000_000)


def _text(value: bytes | str | None) -> str | None:
    return value.decode() if isinstance(value, bytes) else value


class RedisRegistry:
    """`SqliteRegistry`'s operations, on Redis."""

    def __init__(self, client: "Redis", prefix: str = "research:") -> None:
        self._client = client
        self._prefix = prefix

    def _thread(self, thread_id: str) -> str:
        return f"{self._prefix}thread:{thread_id}"

    def _owner(self, owner: str) -> str:
        return f"{self._prefix}owner:{owner}"

    @property
    def _active(self) -> str:
        return f"{self._prefix}active"

    async def create(self, record: ThreadRecord) -> None:
        """Register a new thread; raise `ThreadExists` if its id is taken."""
        key = self._thread(record.thread_id)
        if not await awaited(self._client.hsetnx(key, "owner", record.owner)):
            raise ThreadExists(record.thread_id)
        fields: dict[Any, Any] = {
            "topic": record.topic,
            "status": record.status,
            "created_at": stamp(record.created_at),
            "updated_at": stamp(record.updated_at),
            "error": json.dumps(record.error),
            "options": json.dumps(record.options, ensure_ascii=False),
            "metadata": json.dumps(record.metadata, ensure_ascii=False),
        }
        score = _micros(record.created_at)
        pipe = self._client.pipeline(transaction=True)
        pipe.hset(key, mapping=fields)
        pipe.zadd(self._owner(record.owner), {record.thread_id: score})
        if record.status in _ACTIVE_STATUSES:
            pipe.zadd(self._active, {record.thread_id: score})
        await pipe.execute()

    async def get(self, thread_id: str) -> ThreadRecord | None:
        """Return the thread's record, or None when it is not registered."""
        fields = await awaited(self._client.hgetall(self._thread(thread_id)))
        return self._record(thread_id, fields)

    async def _get_many(self, thread_ids: builtins.list[str]) -> builtins.list[ThreadRecord]:
        """The records of these threads in one round trip, in order, skipping absent ones."""
        pipe = self._client.pipeline(transaction=False)
        for thread_id in thread_ids:
            pipe.hgetall(self._thread(thread_id))
        found = await pipe.execute()
        records = [self._record(t, f) for t, f in zip(thread_ids, found, strict=True)]
        return [r for r in records if r is not None]

    def _record(self, thread_id: str, fields: dict[Any, Any]) -> ThreadRecord | None:
        values = {_text(k): _text(v) for k, v in fields.items()}
        if "created_at" not in values:  # absent, or half-created by a concurrent create
            return None
        return ThreadRecord(
            thread_id=thread_id,
            owner=values["owner"] or "",
            topic=values["topic"] or "",
            status=values["status"],
            created_at=datetime.fromisoformat(values["created_at"] or ""),
            updated_at=datetime.fromisoformat(values["updated_at"] or ""),
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
        """Set the run status and error, stamp `updated_at`; KeyError for an unknown thread.

        `report`: the status of the report the run wrote; a run that starts again clears it.
        """
        record = await self.get(thread_id)
        if record is None:
            raise KeyError(thread_id)
        now = datetime.now(UTC)
        key = self._thread(thread_id)
        changes: dict[str, Any] = {"status": status, "error": error, "updated_at": now}
        pipe = self._client.pipeline(transaction=True)
        pipe.hset(
            key,
            mapping={"status": status, "error": json.dumps(error), "updated_at": stamp(now)},
        )
        if report is not None:
            pipe.hset(key, "report", report)
            changes["report"] = report
        elif status in _ACTIVE_STATUSES:
            pipe.hdel(key, "report")
            changes["report"] = None
        if status in _ACTIVE_STATUSES:
            pipe.zadd(self._active, {thread_id: _micros(record.created_at)})
        else:
            pipe.zrem(self._active, thread_id)
        await pipe.execute()
        return record.model_copy(update=changes)

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
        return await self._get_many([_text(t) or "" for t in members])

    async def ping(self) -> None:
        """Raise when Redis cannot be reached."""
        await awaited(self._client.ping())

    async def list(
        self, owner: str, limit: int = 20, cursor: str | None = None
    ) -> tuple[builtins.list[ThreadRecord], str | None]:
        """One page of the owner's threads, newest first, and the next page's cursor."""
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
                if int(score) < top or (_text(member) or "") < after_id
            ][: limit + 1]
        found = await self._get_many([_text(member) or "" for member, _score in entries])
        if len(found) <= limit:
            return found, None
        page = found[:limit]
        return page, encode_cursor(page[-1].created_at, page[-1].thread_id)
