"""`/v1/collections`: a key's document collections, which a run searches when `options.collections` names them."""

import asyncio
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response
from fastapi.routing import APIRoute
from pydantic import BaseModel, ConfigDict, Field
from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException

from app.dependencies import Owner
from app.edge import StrictJSONRoute
from app.errors import ERROR_RESPONSES
from core.options import COLLECTION_NAME_PATTERN
from service.collections import Collections, Upload, file_name
from service.errors import InvalidState, LimitReached, UnsupportedDocument
from stores.collections import CollectionRecord, DocumentRecord


async def _collections(request: Request) -> Collections:
    collections: Collections | None = request.app.state.manager.executor.collections
    if collections is None:
        raise InvalidState("this server keeps no collections")
    return collections


Keeps = Annotated[Collections, Depends(_collections)]


class NewCollection(BaseModel):
    """A collection to create."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(
        pattern=COLLECTION_NAME_PATTERN,
        description="Unique among the key's collections: letters, digits, space, _ . - "
        "(64 at most); a run may name the collection by it.",
    )


class CollectionSummary(BaseModel):
    """A collection in a listing."""

    id: str
    name: str
    created_at: datetime
    document_count: int


class CollectionDetail(CollectionSummary):
    """A collection with its documents."""

    documents: list[DocumentRecord]


class CollectionPage(BaseModel):
    """The caller's collections, oldest first."""

    items: list[CollectionSummary]


class DocumentPage(BaseModel):
    """A collection's documents, by name."""

    items: list[DocumentRecord]


class UploadedDocument(DocumentRecord):
    """A document an upload stored."""

    replaced: bool = Field(description="Whether it replaced a document of the same name.")


class UploadAnswer(BaseModel):
    """What an upload stored."""

    documents: list[UploadedDocument]


def _detail(record: CollectionRecord, documents: list[DocumentRecord]) -> CollectionDetail:
    return CollectionDetail(
        id=record.id,
        name=record.name,
        created_at=record.created_at,
        document_count=len(documents),
        documents=documents,
    )


router = APIRouter(
    prefix="/v1/collections",
    tags=["collections"],
    responses=ERROR_RESPONSES,
    route_class=StrictJSONRoute,
)
# The upload's body is multipart, not JSON.
upload_router = APIRouter(
    prefix="/v1/collections", tags=["collections"], responses=ERROR_RESPONSES, route_class=APIRoute
)


@router.post("", status_code=201, response_model=CollectionDetail)
async def create(
    body: NewCollection, owner: Owner, collections: Keeps, response: Response
) -> CollectionDetail:
    """Create an empty collection (409 if the key has one of that name)."""
    record = await collections.create(owner, body.name)
    response.headers["Location"] = f"/v1/collections/{record.id}"
    return _detail(record, [])


@router.get("", response_model=CollectionPage)
async def list_collections(owner: Owner, collections: Keeps) -> CollectionPage:
    """The caller's collections, oldest first."""
    found = await collections.all(owner)
    return CollectionPage(
        items=[
            CollectionSummary(
                id=r.id, name=r.name, created_at=r.created_at, document_count=len(docs)
            )
            for r, docs in found
        ]
    )


@router.get("/{collection}", response_model=CollectionDetail)
async def get_collection(collection: str, owner: Owner, collections: Keeps) -> CollectionDetail:
    """A collection (by id or name) with its documents."""
    return _detail(*await collections.documents(owner, collection))


@router.delete("/{collection}", status_code=204)
async def delete_collection(collection: str, owner: Owner, collections: Keeps) -> Response:
    """Remove a collection and its documents (runs that read them keep what they read)."""
    await collections.delete(owner, collection)
    return Response(status_code=204)


@router.get("/{collection}/documents", response_model=DocumentPage)
async def list_documents(collection: str, owner: Owner, collections: Keeps) -> DocumentPage:
    """A collection's documents, by name."""
    _, documents = await collections.documents(owner, collection)
    return DocumentPage(items=documents)


@router.get("/{collection}/documents/{document}", response_model=DocumentRecord)
async def get_document(
    collection: str, document: str, owner: Owner, collections: Keeps
) -> DocumentRecord:
    """One document of a collection, by id or file name."""
    return await collections.document(owner, collection, document)


@router.delete("/{collection}/documents/{document}", status_code=204)
async def delete_document(
    collection: str, document: str, owner: Owner, collections: Keeps
) -> Response:
    """Remove a document and its passages: runs search without them from then on."""
    await collections.remove(owner, collection, document)
    return Response(status_code=204)


_UPLOAD_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["file"],
                    "properties": {
                        "file": {
                            "type": "array",
                            "items": {"type": "string", "format": "binary"},
                            "description": "One or more files: PDF, Word .docx, Markdown, "
                            "text or HTML, told by content.",
                        }
                    },
                }
            }
        },
    }
}


@upload_router.post(
    "/{collection}/documents",
    status_code=201,
    response_model=UploadAnswer,
    openapi_extra=_UPLOAD_BODY,
)
async def upload(
    collection: str, request: Request, owner: Owner, collections: Keeps
) -> UploadAnswer:
    """Upload files (multipart, field `file`, repeatable); a file of a stored name replaces it.

    Each file's kind is told by its content (PDF, .docx, UTF-8 text or HTML), never its
    name. A file that cannot be read refuses the whole upload with a stable code
    (`unreadable_document`, `unsupported_media_type`, `payload_too_large`) and leaves
    the collection as it was.
    """
    kind = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if kind != "multipart/form-data":
        raise UnsupportedDocument(
            "send the files as multipart/form-data, in the 'file' field",
            {"content_type": kind[:60]},
        )
    await collections.get(owner, collection)  # another key's collection: 404 before reading
    limits = collections.limits
    try:
        form = await request.form(max_files=limits.max_files, max_fields=limits.max_files)
    except HTTPException as exc:
        if "Too many files" not in str(exc.detail):
            raise
        raise LimitReached(
            f"more than {limits.max_files} files in one upload: send them in several uploads",
            {"limit": limits.max_files},
        ) from None
    try:
        files = [f for f in form.getlist("file") if isinstance(f, UploadFile)]
        with _spooled() as folder:
            uploads = [
                await asyncio.to_thread(_spool, folder / str(n), f) for n, f in enumerate(files)
            ]
            stored = await collections.add(owner, collection, uploads)
    finally:
        await form.close()
    return UploadAnswer(
        documents=[UploadedDocument(**s.document.model_dump(), replaced=s.replaced) for s in stored]
    )


@contextmanager
def _spooled() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="research-upload-") as folder:
        yield Path(folder)


def _spool(folder: Path, file: UploadFile) -> Upload:
    """Copy an uploaded file to `folder` under its cleaned name (what its passages cite)."""
    folder.mkdir()
    name = file_name(file.filename)
    path = folder / name
    file.file.seek(0)
    with path.open("wb") as out:
        shutil.copyfileobj(file.file, out, 1024 * 1024)
    return Upload(name=name, path=path)
