"""Runs' evidence in Redis (see `stores.evidence`), with plain commands and Lua scripts.

Keys, all under the prefix:

- `run:<thread>`: the run header (JSON), written only when absent (`put` replaces it);
- `records:<thread>`: the thread's records, a list of JSON, in the order they happened;
- `hashes:<thread>`: the set of content hashes the thread names;
- `text:<hash>`: a text, deflated (`stores.evidence.pack`), stored once (SET NX);
- `chars`: hash -> the text's character count, one field per stored text;
- `refs`: hash -> how many threads name the text: deleting a thread drops the texts
  whose count falls to zero, and only those;
- `runs`: the threads by their header's `created_at` (a sorted set), for pruning;
- `totals`: running counts of records, stored bytes and characters, for `figures`.

`add` queues; one flusher writes the queue in order, a batch per call of the add script.
Deleting, replacing and pruning wait for the queue first, so an earlier `add` never lands
after them.
"""

import contextlib
import logging
import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from redis.asyncio import Redis

from stores.batching import Batcher
from stores.evidence import (
    RECORD,
    Evidence,
    PackedText,
    Record,
    RunHeader,
    StoreFigures,
    hashes_of,
    packed_texts,
    unpack,
)
from stores.redis_connection import awaited
from stores.redis_outage import AWAY, Outage

logger = logging.getLogger(__name__)

# How long a batch of evidence waits for a Redis that is away before it is given up.
WRITE_WAIT_S = 60.0

# Both scripts: ARGV[1] is the prefix; `bump` keeps the running totals (a count at zero
# is removed, so nothing is left once every run is gone).
_TOTALS = """
local p = ARGV[1]
local totals = p .. 'totals'
local function bump(field, by)
  if redis.call('HINCRBY', totals, field, by) == 0 then redis.call('HDEL', totals, field) end
end
"""

# ARGV: prefix, the batch's token ('' for none), the token of the batch applied before
# ('' for none: it is forgotten now), then one group per write: thread, header JSON (''
# to leave it), score, record count, the records, text count, then (hash, chars, deflated
# body) for each text. A batch whose token is stored (it is sent again after a timeout,
# and had been applied) is not applied twice: 0.
_ADD = (
    _TOTALS
    + """
if ARGV[3] ~= '' then redis.call('DEL', p .. 'batch:' .. ARGV[3]) end
if ARGV[2] ~= '' and not redis.call('SET', p .. 'batch:' .. ARGV[2], 1, 'NX', 'EX', 3600) then
  return 0
end
local i = 4
while i <= #ARGV do
  local tid, header, score = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  if header ~= '' and redis.call('SET', p .. 'run:' .. tid, header, 'NX') then
    redis.call('ZADD', p .. 'runs', score, tid)
  end
  local n = tonumber(ARGV[i + 3])
  i = i + 4
  for j = i, i + n - 1 do redis.call('RPUSH', p .. 'records:' .. tid, ARGV[j]) end
  if n > 0 then bump('records', n) end
  i = i + n
  local texts = tonumber(ARGV[i])
  i = i + 1
  for j = i, i + 3 * texts - 1, 3 do
    local h, body = ARGV[j], ARGV[j + 2]
    if redis.call('SET', p .. 'text:' .. h, body, 'NX') then
      redis.call('HSET', p .. 'chars', h, ARGV[j + 1])
      bump('bytes', string.len(body))
      bump('chars', tonumber(ARGV[j + 1]))
    end
    if redis.call('SADD', p .. 'hashes:' .. tid, h) == 1 then
      redis.call('HINCRBY', p .. 'refs', h, 1)
    end
  end
  i = i + 3 * texts
end
return 1
"""
)

# ARGV: prefix, then the threads to forget. Returns how many had a run header.
_FORGET = (
    _TOTALS
    + """
local gone = 0
for i = 2, #ARGV do
  local tid = ARGV[i]
  gone = gone + redis.call('DEL', p .. 'run:' .. tid)
  redis.call('ZREM', p .. 'runs', tid)
  local records = p .. 'records:' .. tid
  local n = redis.call('LLEN', records)
  if n > 0 then
    redis.call('DEL', records)
    bump('records', -n)
  end
  local hashes = p .. 'hashes:' .. tid
  for _, h in ipairs(redis.call('SMEMBERS', hashes)) do
    if redis.call('HINCRBY', p .. 'refs', h, -1) <= 0 then
      redis.call('HDEL', p .. 'refs', h)
      local text = p .. 'text:' .. h
      local size = redis.call('STRLEN', text)
      if redis.call('DEL', text) == 1 then
        bump('bytes', -size)
        bump('chars', -tonumber(redis.call('HGET', p .. 'chars', h) or '0'))
      end
      redis.call('HDEL', p .. 'chars', h)
    end
  end
  redis.call('DEL', hashes)
end
return gone
"""
)

_MGET_CHUNK = 500
_FORGET_CHUNK = 64
_EVICT_CHUNK = 16  # the oldest runs dropped at a time while the texts exceed the cap


@dataclass(frozen=True, slots=True)
class _Queued:
    thread_id: str
    header: RunHeader
    record: str
    texts: list[PackedText]


def _score(at: datetime) -> float:
    """Return a time as the `runs` set orders it (a naive time is read as UTC)."""
    return (at if at.tzinfo is not None else at.replace(tzinfo=UTC)).timestamp()


def _int(value: Any) -> int:
    return int(value) if value is not None else 0


class RedisEvidenceStore:
    """`EvidenceStore` in Redis (see the module docstring).

    `client` must answer bytes (redis-py's default, no `decode_responses`): texts are
    stored deflated.
    """

    def __init__(self, client: "Redis", prefix: str = "research:evidence:") -> None:
        self._client = client
        self._prefix = prefix
        self._add_script = client.register_script(_ADD)
        self._outage = Outage("the evidence store")
        # The token of the last batch applied: deleted by the next batch, or by `_drained`.
        self._applied: str | None = None
        self._forget_script = client.register_script(_FORGET)
        self._batches = Batcher(self._write)

    def _key(self, kind: str, name: str = "") -> str:
        return f"{self._prefix}{kind}{name}"

    @staticmethod
    def _group(
        thread_id: str,
        header: str,
        score: float,
        records: Sequence[str],
        texts: Sequence[PackedText],
    ) -> list[Any]:
        """Return one write's arguments of the add script."""
        group: list[Any] = [thread_id, header, repr(score), len(records), *records, len(texts)]
        for h, chars, body in texts:
            group += [h, chars, body]
        return group

    def add(self, thread_id: str, header: RunHeader, record: Record, texts: Sequence[str]) -> None:
        """Queue `record` and its texts (see `EvidenceStore.add`)."""
        try:
            self._batches.add(
                _Queued(thread_id, header, record.model_dump_json(), packed_texts(texts))
            )
        except Exception as exc:  # no event loop, or a record that cannot be encoded
            logger.warning("evidence of %s not kept: %s", thread_id, exc)

    async def _write(self, batch: list[_Queued]) -> None:
        """Write one batch with one script call (atomic); log, never raise, a failure.

        While Redis is away the batch is sent again for up to `WRITE_WAIT_S`; its token
        makes a repeat of an applied batch a no-op.
        """
        token = secrets.token_hex(8)
        args: list[Any] = [self._prefix, token, self._applied or ""]
        headed: set[str] = set()
        for item in batch:
            # The batch lands whole: its first record of a thread brings the header.
            header = "" if item.thread_id in headed else item.header.model_dump_json()
            headed.add(item.thread_id)
            args += self._group(
                item.thread_id,
                header,
                _score(item.header.created_at),
                [item.record],
                item.texts,
            )
        try:
            await self._outage.persist(lambda: self._add_script(args=args), WRITE_WAIT_S)
        except Exception as exc:  # the connection failed for good: every write of the batch did
            for thread_id in dict.fromkeys(item.thread_id for item in batch):
                logger.warning("evidence of %s not kept: %s", thread_id, exc)
            return
        self._applied = token  # no longer needed once answered: the next batch forgets it

    async def put(self, thread_id: str, evidence: Evidence) -> None:
        """Store a whole run's evidence, replacing what the thread had."""
        header = evidence.header or RunHeader()
        named = hashes_of(evidence.records) | hashes_of(header.script)
        texts = packed_texts(t for h, t in evidence.contents.items() if h in named)
        records = [r.model_dump_json() for r in evidence.records]
        args = [
            self._prefix,
            "",
            "",
            *self._group(
                thread_id, header.model_dump_json(), _score(header.created_at), records, texts
            ),
        ]
        await self._drained()
        pipe = self._client.pipeline(transaction=True)
        await self._forget_script(args=[self._prefix, thread_id], client=pipe)
        await self._add_script(args=args, client=pipe)
        await pipe.execute()

    async def header(self, thread_id: str) -> RunHeader | None:
        """Return the thread's run header."""
        body = await awaited(self._client.get(self._key("run:", thread_id)))
        return RunHeader.model_validate_json(body) if body is not None else None

    async def records(self, thread_id: str) -> list[Record]:
        """Return the thread's records, oldest first."""
        bodies = await awaited(self._client.lrange(self._key("records:", thread_id), 0, -1))
        return [RECORD.validate_json(body) for body in bodies]

    async def contents(self, hashes: Iterable[str]) -> dict[str, str]:
        """Return the texts still kept of `hashes`."""
        wanted = sorted(set(hashes))
        found: dict[str, str] = {}
        for start in range(0, len(wanted), _MGET_CHUNK):
            chunk = wanted[start : start + _MGET_CHUNK]
            bodies = await awaited(self._client.mget([self._key("text:", h) for h in chunk]))
            found.update((h, unpack(b)) for h, b in zip(chunk, bodies, strict=True) if b)
        return found

    async def _forget(self, thread_ids: Sequence[str | bytes]) -> int:
        """Forget the threads (one script call per chunk); return how many had a run."""
        gone = 0
        for start in range(0, len(thread_ids), _FORGET_CHUNK):
            chunk = thread_ids[start : start + _FORGET_CHUNK]
            gone += int(await self._forget_script(args=[self._prefix, *chunk]))
        return gone

    async def delete(self, thread_id: str) -> None:
        """Forget the thread's evidence, atomically."""
        await self._drained()
        await self._forget([thread_id])

    async def prune(self, older_than: datetime | None, max_bytes: int | None) -> int:
        """Forget old runs' evidence, then the oldest runs' until under `max_bytes`."""
        await self._drained()
        runs = self._key("runs")
        gone = 0
        if older_than is not None:
            old = await awaited(
                self._client.zrangebyscore(runs, "-inf", f"({_score(older_than)!r}")
            )
            gone += await self._forget(old)
        if max_bytes is not None:
            while await self._content_bytes() > max_bytes:
                oldest = await awaited(self._client.zrange(runs, 0, _EVICT_CHUNK - 1))
                if not oldest:
                    break
                gone += await self._forget(oldest)
        return gone

    async def _content_bytes(self) -> int:
        return _int(await awaited(self._client.hget(self._key("totals"), "bytes")))

    async def figures(self) -> StoreFigures:
        """Return counts and sizes of what is stored under the prefix."""
        pipe = self._client.pipeline(transaction=True)
        pipe.zcard(self._key("runs"))
        pipe.hmget(self._key("totals"), ["records", "bytes", "chars"])
        pipe.hlen(self._key("chars"))
        runs, (records, size, chars), contents = await pipe.execute()
        return StoreFigures(
            runs=_int(runs),
            records=_int(records),
            contents=_int(contents),
            content_bytes=_int(size),
            text_chars=_int(chars),
        )

    async def flush(self) -> None:
        """Wait until what is queued is written."""
        await self._drained()

    async def _drained(self) -> None:
        """Wait for the queue, then delete the last batch's token."""
        await self._batches.drain()
        if self._applied is not None:
            token, self._applied = self._applied, None
            # Redis away (a shutdown after it): the token expires on its own.
            with contextlib.suppress(*AWAY):
                await awaited(self._client.delete(self._key("batch:", token)))
