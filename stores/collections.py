"""Document collections: a key's uploaded files and the passages read from them.

A collection is a record (id, owner, name) with documents; each document's passages are
the `Document`s its file was read into, kept so any process can build the collection's
search index from them (`service.collections`). The version goes up with every change,
so an index built from an older version is known to be stale. Stores: the file store
below (the data directory, one process) and `stores.redis_collections` (shared).
"""

import asyncio
import dataclasses
import json
import re
import shutil
import zlib
from datetime import datetime
from pathlib import Path
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field

from core.models import utcnow
from tools.corpus_files import Document


class CollectionRecord(BaseModel):
    """A collection of one key's documents."""

    model_config = ConfigDict(frozen=True)

    id: str
    owner: str
    name: str
    created_at: datetime = Field(default_factory=utcnow)


class DocumentRecord(BaseModel):
    """One uploaded file: what it was, and what was read from it."""

    model_config = ConfigDict(frozen=True)

    id: str
    name: str = Field(description="The file's name, as uploaded (without folders).")
    kind: str = Field(description="pdf, docx, html or text: told by its content.")
    bytes: int
    sha256: str
    pages: int | None = Field(None, description="A PDF's pages with text.")
    sections: int = Field(description="Parts read: a PDF's pages, a .docx's sections.")
    passages: int = Field(description="Passages indexed for search.")
    uploaded_at: datetime = Field(default_factory=utcnow)


# A document to store: its record and the parts read from its file.
NewDocument = tuple[DocumentRecord, list[Document]]


def pack_parts(parts: list[Document]) -> bytes:
    """Return a document's parts as stored: JSON, deflated."""
    return zlib.compress(json.dumps([dataclasses.asdict(p) for p in parts]).encode(), 6)


def unpack_parts(body: bytes) -> list[Document]:
    """Return a document's stored parts."""
    return [Document(**row) for row in json.loads(zlib.decompress(body))]


class CollectionStore(Protocol):
    """Where collections, their documents and their passages are kept."""

    async def create(self, record: CollectionRecord, limit: int) -> bool:
        """Add a collection; False when the owner has one of that name or `limit` already."""
        ...

    async def all(self, owner: str) -> list[CollectionRecord]:
        """Return the owner's collections, oldest first."""
        ...

    async def get(self, owner: str, collection_id: str) -> CollectionRecord | None:
        """Return the owner's collection, None for an unknown id or another owner's."""
        ...

    async def named(self, owner: str, name: str) -> CollectionRecord | None:
        """Return the owner's collection of that name, if any."""
        ...

    async def delete(self, owner: str, collection_id: str) -> bool:
        """Remove a collection, its documents and passages; False if there was none."""
        ...

    async def documents(self, owner: str, collection_id: str) -> list[DocumentRecord]:
        """Return a collection's documents, by name."""
        ...

    async def put(self, owner: str, collection_id: str, new: list[NewDocument]) -> int | None:
        """Add documents, each replacing the one of its id; return the new version (None: no collection)."""
        ...

    async def remove(self, owner: str, collection_id: str, document_id: str) -> bool:
        """Remove a document and its passages; False if there was none."""
        ...

    async def version(self, owner: str, collection_id: str) -> int | None:
        """Return the collection's version (None: no collection)."""
        ...

    async def parts(self, owner: str, collection_id: str) -> tuple[int, list[Document]] | None:
        """Return the version and every document's parts, read together (None: no collection)."""
        ...


# A collection's id, as `service.collections` makes them.
COLLECTION_ID = re.compile(r"col_[0-9a-f]{16}")


def owner_folder(owner: str) -> str:
    """Return a folder name for an owner id (they are `key-<hex>` or `local`)."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", owner)[:80] or "_"


class FileCollectionStore:
    """Collections under a folder of the data directory, for one service process.

    `<root>/<owner>/<collection>/collection.json` holds the record, version and documents;
    `parts/<document>.json.z` each document's parts. Writes are atomic file replaces,
    one at a time.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self._lock = asyncio.Lock()

    def folder(self, owner: str, collection_id: str) -> Path:
        """Return the collection's folder."""
        return self.root / owner_folder(owner) / collection_id

    def _load(self, owner: str, collection_id: str) -> dict | None:  # type: ignore[type-arg]
        if not COLLECTION_ID.fullmatch(collection_id):  # a name, or a path's ".."
            return None
        path = self.folder(owner, collection_id) / "collection.json"
        try:
            data: dict = json.loads(path.read_text(encoding="utf-8"))  # type: ignore[type-arg]
        except FileNotFoundError:
            return None
        return data if data["record"]["owner"] == owner else None

    def _save(self, owner: str, collection_id: str, data: dict) -> None:  # type: ignore[type-arg]
        folder = self.folder(owner, collection_id)
        folder.mkdir(parents=True, exist_ok=True)
        partial = folder / "collection.json.partial"
        partial.write_text(json.dumps(data), encoding="utf-8")
        partial.replace(folder / "collection.json")

    def _all(self, owner: str) -> list[CollectionRecord]:
        folder = self.root / owner_folder(owner)
        if not folder.is_dir():
            return []
        found = (self._load(owner, child.name) for child in folder.iterdir() if child.is_dir())
        records = [CollectionRecord.model_validate(d["record"]) for d in found if d is not None]
        return sorted(records, key=lambda r: r.created_at)

    async def create(self, record: CollectionRecord, limit: int) -> bool:
        """Add a collection; False when the owner has one of that name or `limit` already."""
        async with self._lock:
            existing = await asyncio.to_thread(self._all, record.owner)
            if len(existing) >= limit or any(r.name == record.name for r in existing):
                return False
            data = {"record": record.model_dump(mode="json"), "version": 0, "documents": {}}
            await asyncio.to_thread(self._save, record.owner, record.id, data)
            return True

    async def all(self, owner: str) -> list[CollectionRecord]:
        """Return the owner's collections, oldest first."""
        return await asyncio.to_thread(self._all, owner)

    async def get(self, owner: str, collection_id: str) -> CollectionRecord | None:
        """Return the owner's collection, None for an unknown id or another owner's."""
        data = await asyncio.to_thread(self._load, owner, collection_id)
        return CollectionRecord.model_validate(data["record"]) if data else None

    async def named(self, owner: str, name: str) -> CollectionRecord | None:
        """Return the owner's collection of that name, if any."""
        return next((r for r in await self.all(owner) if r.name == name), None)

    async def delete(self, owner: str, collection_id: str) -> bool:
        """Remove a collection, its documents and passages; False if there was none."""
        async with self._lock:
            if await asyncio.to_thread(self._load, owner, collection_id) is None:
                return False
            await asyncio.to_thread(shutil.rmtree, self.folder(owner, collection_id), True)
            return True

    async def documents(self, owner: str, collection_id: str) -> list[DocumentRecord]:
        """Return a collection's documents, by name."""
        data = await asyncio.to_thread(self._load, owner, collection_id)
        docs = (
            DocumentRecord.model_validate(d) for d in (data or {}).get("documents", {}).values()
        )
        return sorted(docs, key=lambda d: d.name)

    def _put(self, owner: str, collection_id: str, new: list[NewDocument]) -> int | None:
        data = self._load(owner, collection_id)
        if data is None:
            return None
        parts = self.folder(owner, collection_id) / "parts"
        parts.mkdir(exist_ok=True)
        for record, documents in new:
            partial = parts / f"{record.id}.partial"
            partial.write_bytes(pack_parts(documents))
            partial.replace(parts / f"{record.id}.json.z")
            data["documents"][record.id] = record.model_dump(mode="json")
        data["version"] += 1
        self._save(owner, collection_id, data)
        return int(data["version"])

    async def put(self, owner: str, collection_id: str, new: list[NewDocument]) -> int | None:
        """Add documents, each replacing the one of its id; return the new version (None: no collection)."""
        async with self._lock:
            return await asyncio.to_thread(self._put, owner, collection_id, new)

    def _remove(self, owner: str, collection_id: str, document_id: str) -> bool:
        data = self._load(owner, collection_id)
        if data is None or data["documents"].pop(document_id, None) is None:
            return False
        data["version"] += 1
        self._save(owner, collection_id, data)
        (self.folder(owner, collection_id) / "parts" / f"{document_id}.json.z").unlink(
            missing_ok=True
        )
        return True

    async def remove(self, owner: str, collection_id: str, document_id: str) -> bool:
        """Remove a document and its passages; False if there was none."""
        async with self._lock:
            return await asyncio.to_thread(self._remove, owner, collection_id, document_id)

    async def version(self, owner: str, collection_id: str) -> int | None:
        """Return the collection's version (None: no collection)."""
        data = await asyncio.to_thread(self._load, owner, collection_id)
        return int(data["version"]) if data else None

    def _parts(self, owner: str, collection_id: str) -> tuple[int, list[Document]] | None:
        data = self._load(owner, collection_id)
        if data is None:
            return None
        parts = self.folder(owner, collection_id) / "parts"
        found: list[Document] = []
        for document_id in sorted(data["documents"]):
            found.extend(unpack_parts((parts / f"{document_id}.json.z").read_bytes()))
        return int(data["version"]), found

    async def parts(self, owner: str, collection_id: str) -> tuple[int, list[Document]] | None:
        """Return the version and every document's parts, read together (None: no collection)."""
        async with self._lock:
            return await asyncio.to_thread(self._parts, owner, collection_id)
