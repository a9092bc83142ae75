"""Where `stores.redis_flat_saver` keeps a thread's checkpoints, and how each value is framed.

All keys start with `PREFIX`; a thread's keys carry its id as a hash tag (`{thread}`), so
they share one cluster slot. With `B = research:checkpoint:{<thread_id>}:`:

- `B index`: sorted set, every score 0, members `<ns>␀<checkpoint_id>`. Members sort by
  namespace, then by id: checkpoint ids are UUIDv6 and sort by time, so the last member
  of a namespace's lex range is its latest checkpoint.
- `B checkpoints`: hash, `<ns>␀<id>` -> the checkpoint without its channel values, its
  metadata and its parent's id (`encode_checkpoint`).
- `B versions`: hash, `<ns>␀<id>` -> the `<channel>␀<version>` pairs the checkpoint
  names, joined by `␀␀` (read by the Lua script of `aget_tuple`).
- `B blobs`: hash, `<ns>␀<channel>␀<version>` -> that channel value (`<type>␀<bytes>`),
  written once, by the checkpoint that introduced the version.
- `B writes:<ns>␀<id>`: hash, `<task_id>␀<idx>` -> a pending write (`encode_write`).
- `B written`: set of the `<ns>␀<id>` that have pending writes (to delete or copy them).
- `research:checkpoint:threads`: set of every thread id (to list all threads).

Values are framed with NULs (␀ above), which none of the framed names and ids contain.
`aput`'s script also adds to the threads set, outside the thread's slot: the service runs
on one server or a replicated primary, not a Cluster.
"""

from dataclasses import dataclass
from typing import Any

from langgraph.checkpoint.base import CheckpointTuple, writes_sort_key
from langgraph.checkpoint.serde.base import SerializerProtocol

PREFIX = "research:checkpoint:"
THREADS = f"{PREFIX}threads"
SEP = b"\0"
Typed = tuple[str, bytes]  # a value as the serializer gives it: its type and its bytes


@dataclass(frozen=True, slots=True)
class ThreadKeys:
    """The keys of one thread."""

    index: str
    checkpoints: str
    versions: str
    blobs: str
    written: str
    writes_prefix: str

    def writes(self, member: bytes) -> str:
        """Return the key of the pending writes of the checkpoint `member` (`<ns>␀<id>`)."""
        return self.writes_prefix + member.decode()

    def fixed(self) -> list[str]:
        """Return every key of the thread but the per-checkpoint writes."""
        return [self.index, self.checkpoints, self.versions, self.blobs, self.written]


def thread_keys(thread_id: str) -> ThreadKeys:
    """Return the keys of `thread_id`, hash-tagged by it."""
    base = f"{PREFIX}{{{thread_id}}}:"
    return ThreadKeys(
        f"{base}index",
        f"{base}checkpoints",
        f"{base}versions",
        f"{base}blobs",
        f"{base}written",
        f"{base}writes:",
    )


def member(namespace: str, checkpoint_id: str) -> bytes:
    """Return a checkpoint's name inside its thread's keys."""
    return f"{namespace}\0{checkpoint_id}".encode()


def split_member(raw: bytes) -> tuple[str, str]:
    """Return the namespace and checkpoint id of a member."""
    namespace, _, checkpoint_id = raw.decode().partition("\0")
    return namespace, checkpoint_id


def blob_field(namespace: str, channel: str, version: str) -> bytes:
    """Return a channel value's field in the blobs hash."""
    return f"{namespace}\0{channel}\0{version}".encode()


def encode_typed(typed: tuple[str, bytes]) -> bytes:
    """Frame a serialized value with its type: `<type>␀<bytes>`."""
    return typed[0].encode() + SEP + typed[1]


def decode_typed(raw: bytes) -> tuple[str, bytes]:
    """Return the (type, bytes) pair `encode_typed` framed."""
    type_, _, data = raw.partition(SEP)
    return type_.decode(), data


def encode_checkpoint(
    checkpoint: tuple[str, bytes], metadata: tuple[str, bytes], parent_id: str | None
) -> bytes:
    """Frame `<type>␀<metadata type>␀<parent id>␀<length>␀<checkpoint><metadata>`."""
    head = SEP.join(
        (
            checkpoint[0].encode(),
            metadata[0].encode(),
            (parent_id or "").encode(),
            str(len(checkpoint[1])).encode(),
            b"",
        )
    )
    return head + checkpoint[1] + metadata[1]


def decode_checkpoint(raw: bytes) -> tuple[Typed, Typed, str | None]:
    """Return the checkpoint, metadata and parent id `encode_checkpoint` framed."""
    type_, meta_type, parent, length, rest = raw.split(SEP, 4)
    size = int(length)
    return (
        (type_.decode(), rest[:size]),
        (meta_type.decode(), rest[size:]),
        parent.decode() or None,
    )


def encode_versions(versions: dict[str, str]) -> bytes:
    """Join the `<channel>␀<version>` pairs of a checkpoint by `␀␀`."""
    return b"\0\0".join(f"{channel}\0{version}".encode() for channel, version in versions.items())


def encode_write(channel: str, typed: tuple[str, bytes], task_path: str) -> bytes:
    """Frame `<channel>␀<type>␀<task path>␀<bytes>`."""
    return SEP.join((channel.encode(), typed[0].encode(), task_path.encode(), typed[1]))


def decode_write(field: bytes, raw: bytes) -> tuple[str, int, str, tuple[str, bytes], str]:
    """Return the task id, index, channel, (type, bytes) and task path of a stored write."""
    task_id, _, idx = field.partition(SEP)
    channel, type_, task_path, data = raw.split(SEP, 3)
    return task_id.decode(), int(idx), channel.decode(), (type_.decode(), data), task_path.decode()


@dataclass(slots=True)
class Stored:
    """A checkpoint as read back: where it is, and its framed record (metadata decoded once)."""

    thread_id: str
    namespace: str
    checkpoint_id: str
    record: tuple[Typed, Typed, str | None]
    _metadata: dict[str, Any] | None = None

    def metadata(self, serde: SerializerProtocol) -> dict[str, Any]:
        """Return the checkpoint's metadata, decoded once."""
        if self._metadata is None:
            self._metadata = serde.loads_typed(self.record[1])
        return self._metadata


@dataclass(frozen=True, slots=True)
class Write:
    """A stored pending write, still serialized."""

    task_id: str
    idx: int
    channel: str
    typed: Typed
    task_path: str


def sorted_writes(stored: dict[bytes, bytes]) -> list[Write]:
    """Return a writes hash (as HGETALL answers) in the order LangGraph applies them."""
    writes = [Write(*decode_write(field, raw)) for field, raw in stored.items()]
    writes.sort(key=lambda w: writes_sort_key(w.task_path, w.task_id, w.idx))
    return writes


def blob_fields(namespace: str, versions: bytes) -> list[bytes]:
    """Return the blobs-hash fields of a checkpoint's stored `<channel>␀<version>` list."""
    if not versions:
        return []
    prefix = namespace.encode() + SEP
    return [prefix + pair for pair in versions.split(b"\0\0")]


def assemble(
    serde: SerializerProtocol,
    stored: Stored,
    values: dict[bytes, bytes | None],
    writes: list[Write],
) -> CheckpointTuple:
    """Build the checkpoint tuple of a stored checkpoint, its channel values and its writes."""
    checkpoint = serde.loads_typed(stored.record[0])
    channel_values: dict[str, Any] = {}
    for field, raw in values.items():
        if raw is not None and (typed := decode_typed(raw))[0] != "empty":
            channel_values[field.split(SEP)[1].decode()] = serde.loads_typed(typed)
    checkpoint["channel_values"] = channel_values
    own = {"thread_id": stored.thread_id, "checkpoint_ns": stored.namespace}
    parent = stored.record[2]
    return CheckpointTuple(
        config={"configurable": {**own, "checkpoint_id": stored.checkpoint_id}},
        checkpoint=checkpoint,
        metadata=stored.metadata(serde),  # type: ignore[arg-type]
        parent_config={"configurable": {**own, "checkpoint_id": parent}} if parent else None,
        pending_writes=[(w.task_id, w.channel, serde.loads_typed(w.typed)) for w in writes],
    )


# `aput` in one command (atomic, and cheaper for the client than a transaction).
# KEYS: blobs, checkpoints, versions, index, threads. ARGV: member, record, versions
# list, thread id, then the new channel values' fields and values.
PUT_SCRIPT = r"""
if #ARGV > 4 then redis.call('HSET', KEYS[1], unpack(ARGV, 5)) end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[3], ARGV[1], ARGV[3])
redis.call('ZADD', KEYS[4], 0, ARGV[1])
redis.call('SADD', KEYS[5], ARGV[4])
return 1
"""

# `aput_writes` in one command. KEYS: the checkpoint's writes, the thread's written set.
# ARGV: the checkpoint's member, then per write: "1" to replace (special channels) or
# "0" to keep a write already stored, its field, its value.
WRITES_SCRIPT = r"""
for i = 2, #ARGV, 3 do
  if ARGV[i] == '1' then
    redis.call('HSET', KEYS[1], ARGV[i + 1], ARGV[i + 2])
  else
    redis.call('HSETNX', KEYS[1], ARGV[i + 1], ARGV[i + 2])
  end
end
redis.call('SADD', KEYS[2], ARGV[1])
return 1
"""

# One round trip for `aget_tuple`: the latest id of the namespace when none is given, the
# checkpoint, the channel values it names, its pending writes, as one string (`unframe`).
# KEYS: index, checkpoints, versions, blobs. ARGV: namespace, checkpoint id or "", the
# writes key prefix (the writes key is built here; it shares the thread's hash tag).
GET_SCRIPT = r"""
local ns, id = ARGV[1], ARGV[2]
if id == '' then
  local top = redis.call('ZREVRANGEBYLEX', KEYS[1], '(' .. ns .. '\1', '[' .. ns .. '\0',
                         'LIMIT', 0, 1)
  if #top == 0 then return false end
  id = string.sub(top[1], #ns + 2)
end
local member = ns .. '\0' .. id
local record = redis.call('HGET', KEYS[2], member)
if not record then return false end
local list = redis.call('HGET', KEYS[3], member) or ''
local out = {}
local function put(s)
  if s then out[#out + 1] = #s .. ':' .. s else out[#out + 1] = '-1:' end
end
put(id)
put(record)
put(list)
local names, start = {}, 1
while list ~= '' do
  local stop = string.find(list, '\0\0', start, true)
  if not stop then
    names[#names + 1] = ns .. '\0' .. string.sub(list, start)
    break
  end
  names[#names + 1] = ns .. '\0' .. string.sub(list, start, stop - 1)
  start = stop + 2
end
if #names > 0 then
  for _, value in ipairs(redis.call('HMGET', KEYS[4], unpack(names))) do put(value) end
end
for _, part in ipairs(redis.call('HGETALL', ARGV[3] .. member)) do put(part) end
return table.concat(out)
"""


def unframe(raw: bytes) -> list[bytes | None]:
    """Return the strings `GET_SCRIPT` framed as `<length>:<bytes>` (`-1:` for none)."""
    parts: list[bytes | None] = []
    pos, end = 0, len(raw)
    while pos < end:
        colon = raw.index(b":", pos)
        size = int(raw[pos:colon])
        if size < 0:
            parts.append(None)
            pos = colon + 1
        else:
            pos = colon + 1 + size
            parts.append(raw[colon + 1 : pos])
    return parts


# Copies one thread's keys onto another's, merging into what the target holds.
# KEYS: source and target keys in pairs.
COPY_SCRIPT = r"""
for i = 1, #KEYS, 2 do
  local kind = redis.call('TYPE', KEYS[i])['ok']
  if kind == 'hash' then
    local items = redis.call('HGETALL', KEYS[i])
    for j = 1, #items, 2 do redis.call('HSET', KEYS[i + 1], items[j], items[j + 1]) end
  elseif kind == 'zset' then
    local items = redis.call('ZRANGE', KEYS[i], 0, -1, 'WITHSCORES')
    for j = 1, #items, 2 do redis.call('ZADD', KEYS[i + 1], items[j + 1], items[j]) end
  elseif kind == 'set' then
    for _, item in ipairs(redis.call('SMEMBERS', KEYS[i])) do
      redis.call('SADD', KEYS[i + 1], item)
    end
  end
end
return 1
"""


def read_reply(
    namespace: str, raw: bytes
) -> tuple[str, bytes, dict[bytes, bytes | None], dict[bytes, bytes]]:
    """Parse `GET_SCRIPT`'s reply: checkpoint id, record, values by blob field, writes by field."""
    parts = unframe(raw)
    checkpoint_id, record, versions = (p or b"" for p in parts[:3])
    fields = blob_fields(namespace, versions)
    values = dict(zip(fields, parts[3 : 3 + len(fields)], strict=True))
    flat = [p or b"" for p in parts[3 + len(fields) :]]  # the writes hash, field then value
    return checkpoint_id.decode(), record, values, dict(zip(flat[::2], flat[1::2], strict=True))
