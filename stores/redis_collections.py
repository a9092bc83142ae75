"""Collections on Redis (see `stores.collections`): every API replica and worker reads them.

Keys: `collections:<owner>`, a hash of collection id -> record (JSON);
`collections:<owner>:names`, a hash of name -> id; `collection:<id>:documents`, a hash of
document id -> record (JSON); `collection:<id>:parts`, a hash of document id -> its parts
(deflated JSON); `collection:<id>:version`, a counter. Plain Redis (no search module):
each process builds its own search index from the parts, once per version.
"""

from redis.asyncio import Redis

from stores.collections import (
    CollectionRecord,
    DocumentRecord,
    NewDocument,
    pack_parts,
    unpack_parts,
)
from stores.redis_connection import awaited, text
from tools.corpus_files import Document

# KEYS: owner's hash, owner's names. ARGV: id, name, record, limit.
_CREATE = """
if redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[4]) then return 0 end
if redis.call('HSETNX', KEYS[2], ARGV[2], ARGV[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
return 1
"""

# KEYS: owner's hash, documents, parts, version. ARGV: id, then per document: id, record, parts.
_PUT = """
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return -1 end
for i = 2, #ARGV, 3 do
  redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
  redis.call('HSET', KEYS[3], ARGV[i], ARGV[i + 2])
end
return redis.call('INCR', KEYS[4])
"""

# KEYS: owner's hash, documents, parts, version. ARGV: collection id, document id.
_REMOVE = """
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return 0 end
if redis.call('HDEL', KEYS[2], ARGV[2]) == 0 then return 0 end
redis.call('HDEL', KEYS[3], ARGV[2])
redis.call('INCR', KEYS[4])
return 1
"""

# KEYS: owner's hash, owner's names, documents, parts, version. ARGV: id, name.
_DELETE = """
if redis.call('HDEL', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('HDEL', KEYS[2], ARGV[2])
redis.call('DEL', KEYS[3], KEYS[4], KEYS[5])
return 1
"""


def _keys(collection_id: str) -> list[str]:
    base = f"collection:{collection_id}"
    return [f"{base}:documents", f"{base}:parts", f"{base}:version"]


class RedisCollectionStore:
    """Collections in Redis hashes; each change is one script, so it is atomic."""

    def __init__(self, client: Redis) -> None:
        self._client = client
        self._create = client.register_script(_CREATE)
        self._put = client.register_script(_PUT)
        self._remove = client.register_script(_REMOVE)
        self._delete = client.register_script(_DELETE)

    async def create(self, record: CollectionRecord, limit: int) -> bool:
        """Add a collection; False when the owner has one of that name or `limit` already."""
        owner = f"collections:{record.owner}"
        args: list[str | int] = [record.id, record.name, record.model_dump_json(), limit]
        return bool(await self._create(keys=[owner, f"{owner}:names"], args=args))

    async def all(self, owner: str) -> list[CollectionRecord]:
        """Return the owner's collections, oldest first."""
        found = await awaited(self._client.hvals(f"collections:{owner}"))
        records = [CollectionRecord.model_validate_json(v) for v in found]
        return sorted(records, key=lambda r: r.created_at)

    async def get(self, owner: str, collection_id: str) -> CollectionRecord | None:
        """Return the owner's collection, None for an unknown id or another owner's."""
        found = await awaited(self._client.hget(f"collections:{owner}", collection_id))
        return CollectionRecord.model_validate_json(found) if found is not None else None

    async def named(self, owner: str, name: str) -> CollectionRecord | None:
        """Return the owner's collection of that name, if any."""
        found = await awaited(self._client.hget(f"collections:{owner}:names", name))
        return await self.get(owner, text(found)) if found is not None else None

    async def delete(self, owner: str, collection_id: str) -> bool:
        """Remove a collection, its documents and passages; False if there was none."""
        record = await self.get(owner, collection_id)
        if record is None:
            return False
        keys = [f"collections:{owner}", f"collections:{owner}:names", *_keys(collection_id)]
        return bool(await self._delete(keys=keys, args=[collection_id, record.name]))

    async def documents(self, owner: str, collection_id: str) -> list[DocumentRecord]:
        """Return a collection's documents, by name."""
        if await self.get(owner, collection_id) is None:
            return []
        found = await awaited(self._client.hvals(_keys(collection_id)[0]))
        return sorted((DocumentRecord.model_validate_json(v) for v in found), key=lambda d: d.name)

    async def put(self, owner: str, collection_id: str, new: list[NewDocument]) -> int | None:
        """Add documents, each replacing the one of its id; return the new version (None: no collection)."""
        args: list[str | bytes] = [collection_id]
        for record, parts in new:
            args += [record.id, record.model_dump_json(), pack_parts(parts)]
        version = await self._put(keys=[f"collections:{owner}", *_keys(collection_id)], args=args)
        return None if int(version) < 0 else int(version)

    async def remove(self, owner: str, collection_id: str, document_id: str) -> bool:
        """Remove a document and its passages; False if there was none."""
        keys = [f"collections:{owner}", *_keys(collection_id)]
        return bool(await self._remove(keys=keys, args=[collection_id, document_id]))

    async def version(self, owner: str, collection_id: str) -> int | None:
        """Return the collection's version (None: no collection)."""
        async with self._client.pipeline(transaction=True) as pipe:
            pipe.hexists(f"collections:{owner}", collection_id)
            pipe.get(_keys(collection_id)[2])
            exists, version = await pipe.execute()
        return int(version or 0) if exists else None

    async def parts(self, owner: str, collection_id: str) -> tuple[int, list[Document]] | None:
        """Return the version and every document's parts, read together (None: no collection)."""
        _, parts, version = _keys(collection_id)
        async with self._client.pipeline(transaction=True) as pipe:
            pipe.hexists(f"collections:{owner}", collection_id)
            pipe.get(version)
            pipe.hgetall(parts)
            exists, number, bodies = await pipe.execute()
        if not exists:
            return None
        found: list[Document] = []
        for key in sorted(bodies, key=text):
            found.extend(unpack_parts(bodies[key]))
        return int(number or 0), found
