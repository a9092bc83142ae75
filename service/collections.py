"""A key's document collections: upload files, read them as `corpus index` does, search them in a run.

Files are read by `tools.corpus_files.read_upload` (their kind told by content), off the
event loop; a file that cannot be read refuses the whole upload, so a collection never
holds half of one. Each process searches a collection through its own SQLite FTS5 index
(`tools.local_corpus.build_index`), built from the stored passages once per version.
"""

import asyncio
import hashlib
import logging
import re
import secrets
import shutil
import tempfile
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from urllib.parse import parse_qs, quote, unquote, urlsplit

from core.options import RunOptions
from nodes.context import Deps
from service.errors import (
    DocumentTooLarge,
    InvalidState,
    LimitReached,
    NotFound,
    Unprocessable,
    UnreadableDocument,
    UnsupportedDocument,
)
from stores.collections import (
    CollectionRecord,
    CollectionStore,
    DocumentRecord,
    NewDocument,
    owner_folder,
)
from tools.combined import CombinedProvider, by_rank
from tools.corpus_files import Document, UnreadableFileError, UnsupportedFileError, read_upload
from tools.local_corpus import LocalCorpus, build_index, split_passages
from tools.search import Depth, SearchHit

logger = logging.getLogger(__name__)

SCHEME = "collection"
_UNSAFE_NAME = re.compile(r"[\x00-\x1f\x7f/\\]")


@dataclass(frozen=True, slots=True)
class CollectionLimits:
    """How much a key may upload (`Settings.collection_*`)."""

    max_file_bytes: int = 20 * 1024 * 1024
    max_files: int = 10
    max_documents: int = 200
    max_collections: int = 50


@dataclass(frozen=True, slots=True)
class Upload:
    """An uploaded file, spooled to disk: its name as sent, and where it is."""

    name: str
    path: Path


@dataclass(frozen=True, slots=True)
class Stored:
    """A document stored by an upload, and whether it replaced one of its name."""

    document: DocumentRecord
    replaced: bool


def file_name(sent: str | None) -> str:
    """Return an uploaded file's name without folders or control characters."""
    base = re.split(r"[/\\]", sent or "")[-1]
    cleaned = _UNSAFE_NAME.sub("", base).strip().lstrip(".")[:200]
    return cleaned or "document"


def document_id(name: str) -> str:
    """Return a document's id: one per name in a collection, so a new upload replaces it."""
    return "doc_" + hashlib.sha256(name.encode()).hexdigest()[:16]


def document_url(collection_id: str, name: str, read_url: str) -> str:
    """Return a passage's URL: the collection, the file, and its page or section."""
    part = urlsplit(read_url).fragment  # "page=12", "section=3", or none
    return f"{SCHEME}://{collection_id}/{quote(name)}" + (f"?{part}" if part else "")


def located(hit: SearchHit) -> SearchHit:
    """Return a collection's hit with the document and page its URL names."""
    parts = urlsplit(hit.url)
    page = parse_qs(parts.query).get("page", [""])[0]
    return hit.model_copy(
        update={
            "document": unquote(parts.path.lstrip("/")),
            "page": int(page) if page.isdigit() else None,
        }
    )


class Collections:
    """Create, fill, search and delete a key's collections."""

    def __init__(
        self, store: CollectionStore, index_dir: Path, limits: CollectionLimits | None = None
    ) -> None:
        self.store = store
        self.index_dir = index_dir
        self.limits = limits or CollectionLimits()
        self._building: dict[str, asyncio.Lock] = {}

    # -- collections ---------------------------------------------------------------------

    async def create(self, owner: str, name: str) -> CollectionRecord:
        """Create a collection; InvalidState when the name is taken, LimitReached when full."""
        record = CollectionRecord(id="col_" + secrets.token_hex(8), owner=owner, name=name)
        if await self.store.create(record, self.limits.max_collections):
            return record
        if await self.store.named(owner, name) is not None:
            raise InvalidState(f"you have a collection named {name!r} already: choose another name")
        raise LimitReached(
            f"you have {self.limits.max_collections} collections, the most a key may hold: "
            "delete one first",
            {"limit": self.limits.max_collections},
        )

    async def get(self, owner: str, ref: str) -> CollectionRecord:
        """Return the caller's collection by id or name; NotFound for any other."""
        record = await self.store.get(owner, ref) or await self.store.named(owner, ref)
        if record is None:
            raise NotFound(f"no collection {ref!r}: list yours with GET /v1/collections")
        return record

    async def all(self, owner: str) -> list[tuple[CollectionRecord, list[DocumentRecord]]]:
        """Return the caller's collections, oldest first, with their documents."""
        records = await self.store.all(owner)
        documents = await asyncio.gather(*(self.store.documents(owner, r.id) for r in records))
        return list(zip(records, documents, strict=True))

    async def documents(
        self, owner: str, ref: str
    ) -> tuple[CollectionRecord, list[DocumentRecord]]:
        """Return the caller's collection and its documents."""
        record = await self.get(owner, ref)
        return record, await self.store.documents(owner, record.id)

    async def delete(self, owner: str, ref: str) -> None:
        """Remove a collection with its documents; runs that read them keep what they read."""
        record = await self.get(owner, ref)
        if not await self.store.delete(owner, record.id):
            raise NotFound(f"no collection {ref!r}: list yours with GET /v1/collections")
        self._building.pop(record.id, None)
        await asyncio.to_thread(_remove_indexes, self._folder(owner, record.id), None)

    async def resolve(self, owner: str, refs: Sequence[str]) -> list[str]:
        """Return the ids of the caller's collections named (ids or names); NotFound names any other."""
        ids: list[str] = []
        for ref in refs:
            try:
                ids.append((await self.get(owner, ref)).id)
            except NotFound:
                raise NotFound(
                    f"options.collections: no collection {ref!r} for this key: list yours "
                    "with GET /v1/collections",
                    {"collection": ref},
                ) from None
        return list(dict.fromkeys(ids))

    # -- documents -----------------------------------------------------------------------

    async def add(self, owner: str, ref: str, uploads: Sequence[Upload]) -> list[Stored]:
        """Read and store uploaded files, each replacing the document of its name.

        Every file is read before any is stored: one that cannot be read refuses the
        upload and leaves the collection as it was.
        """
        record = await self.get(owner, ref)
        if not uploads:
            raise Unprocessable("the upload holds no file: send one as the 'file' field")
        if len(uploads) > self.limits.max_files:
            raise LimitReached(
                f"{len(uploads)} files in one upload, more than {self.limits.max_files}: send "
                "them in several uploads",
                {"limit": self.limits.max_files},
            )
        read = [await self._read(record.id, upload) for upload in uploads]
        new = list({d.id: (d, parts) for d, parts in read}.values())  # a name twice: the last
        existing = {d.id for d in await self.store.documents(owner, record.id)}
        incoming = {d.id for d, _ in new}
        if len(existing | incoming) > self.limits.max_documents:
            raise LimitReached(
                f"the collection would hold {len(existing | incoming)} documents, more than "
                f"{self.limits.max_documents}: delete some first",
                {"limit": self.limits.max_documents},
            )
        if await self.store.put(owner, record.id, new) is None:
            raise NotFound(f"no collection {ref!r}: it was deleted meanwhile")
        return [Stored(d, d.id in existing) for d, _ in new]

    async def _read(self, collection_id: str, upload: Upload) -> NewDocument:
        """Return the document an uploaded file reads into; raise naming what is wrong with it."""
        name = file_name(upload.name)
        size = upload.path.stat().st_size
        if size > self.limits.max_file_bytes:
            raise DocumentTooLarge(
                f"{name}: {size:,} bytes, more than the {self.limits.max_file_bytes:,} a file "
                "may have",
                {"file": name, "limit": self.limits.max_file_bytes},
            )
        try:
            kind, parts, digest = await asyncio.to_thread(_read_named, upload.path, name)
        except UnsupportedFileError as exc:
            raise UnsupportedDocument(
                f"{name}: {exc}; upload a PDF, a Word .docx, or Markdown, text or HTML",
                {"file": name},
            ) from None
        except UnreadableFileError as exc:
            raise UnreadableDocument(f"{name}: cannot be read: {exc}", {"file": name}) from None
        parts = [replace(p, url=document_url(collection_id, name, p.url), file=name) for p in parts]
        record = DocumentRecord(
            id=document_id(name),
            name=name,
            kind=kind,
            bytes=size,
            sha256=digest,
            pages=sum(p.page is not None for p in parts) or None,
            sections=len(parts),
            passages=sum(len(list(split_passages(p.text))) for p in parts),
        )
        return record, parts

    async def document(self, owner: str, ref: str, document: str) -> DocumentRecord:
        """Return a document of the caller's collection, by id or name."""
        _, documents = await self.documents(owner, ref)
        found = next((d for d in documents if document in (d.id, d.name)), None)
        if found is None:
            raise NotFound(f"no document {document!r} in collection {ref!r}")
        return found

    async def remove(self, owner: str, ref: str, document: str) -> None:
        """Remove a document and its passages from the caller's collection."""
        record = await self.get(owner, ref)
        found = await self.document(owner, record.id, document)
        if not await self.store.remove(owner, record.id, found.id):
            raise NotFound(f"no document {document!r} in collection {ref!r}")

    # -- search --------------------------------------------------------------------------

    def _folder(self, owner: str, collection_id: str) -> Path:
        return self.index_dir / owner_folder(owner) / collection_id

    async def index(self, owner: str, collection_id: str) -> Path | None:
        """Return the collection's search index of its current version, built if need be (None: gone)."""
        version = await self.store.version(owner, collection_id)
        folder = self._folder(owner, collection_id)
        if version is None:  # deleted, perhaps by another replica: its index goes too
            await asyncio.to_thread(_remove_indexes, folder, None)
            return None
        path = folder / f"index-{version}.sqlite"
        if path.is_file():
            return path
        async with self._building.setdefault(collection_id, asyncio.Lock()):
            if path.is_file():
                return path
            found = await self.store.parts(owner, collection_id)
            if found is None:
                return None
            version, parts = found
            path = folder / f"index-{version}.sqlite"
            await asyncio.to_thread(_build, parts, path)
        return path

    def search(self, owner: str, collection_ids: Sequence[str]) -> "CollectionSearch":
        """Return a provider searching the caller's collections (their indexes as of each search)."""
        return CollectionSearch(self, owner, list(collection_ids))

    def run_deps(self, owner: str, options: RunOptions, deps: Deps) -> Deps:
        """Return a run's tools with its collections searched beside, or instead of, the server's."""
        if not options.collections:
            return deps
        collections = self.search(owner, options.collections)
        if options.collections_only:
            return replace(deps, search=collections, member_kinds=())
        kinds = tuple(
            replace(k, search=CombinedProvider([k.search, collections]))
            if k.agent_type == "corpus-search"
            else k
            for k in deps.member_kinds
        )
        return replace(
            deps, search=CombinedProvider([deps.search, collections]), member_kinds=kinds
        )


class CollectionSearch:
    """Searches collections, each through its own index; hits interleave rank by rank."""

    name = "collections"

    def __init__(self, collections: Collections, owner: str, collection_ids: list[str]) -> None:
        self._collections = collections
        self._owner = owner
        self._ids = collection_ids

    async def search(
        self, query: str, max_results: int = 5, depth: Depth = "basic"
    ) -> list[SearchHit]:
        """Return the best passages of the collections (a deleted one has none)."""
        paths = [await self._collections.index(self._owner, cid) for cid in self._ids]
        found = await asyncio.to_thread(
            _search, [p for p in paths if p is not None], query, max_results
        )
        return [located(h) for h in found]


def _search(paths: list[Path], query: str, max_results: int) -> list[SearchHit]:
    lists: list[list[SearchHit]] = []
    for path in paths:
        try:
            corpus = LocalCorpus(path)
        except Exception:  # replaced by a newer version meanwhile: the next search has it
            logger.warning("collection index %s went away during a search", path)
            continue
        try:
            lists.append(corpus.search_sync(query, max_results))
        finally:
            corpus.close()
    return by_rank(lists)[:max_results]


def _read_named(path: Path, name: str) -> tuple[str, list[Document], str]:
    """Read `path` as a file called `name` (titles cite it): its kind, parts and SHA-256."""
    if path.name == name:
        kind, parts = read_upload(path)
        return kind, parts, _sha256(path)
    with tempfile.TemporaryDirectory(prefix="upload-") as folder:
        named = Path(folder) / name
        shutil.copyfile(path, named)
        return _read_named(named, name)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for block in iter(lambda: file.read(1024 * 1024), b""):
            digest.update(block)
    return digest.hexdigest()


def _build(parts: list[Document], path: Path) -> None:
    """Build the index at `path` by way of a file of its own (another process may build it too)."""
    own = path.with_name(f"{path.stem}.{uuid.uuid4().hex}.building")
    try:
        build_index(parts, own)
        own.replace(path)
    finally:
        own.unlink(missing_ok=True)
    _remove_indexes(path.parent, path)


def _remove_indexes(folder: Path, keep: Path | None) -> None:
    """Remove a collection's index files but `keep` (a search holding one open still reads it)."""
    if not folder.is_dir():
        return
    for old in folder.glob("index-*.sqlite"):
        if old != keep:
            old.unlink(missing_ok=True)
