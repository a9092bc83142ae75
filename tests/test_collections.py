"""Document collections over real HTTP: upload PDF and Word files, research over them, cite the page.

Each key's collections are its own; an unreadable upload is a clear error that leaves the
collection as it was; re-uploading a file replaces its passages, deleting removes them,
and a replay of an earlier run still answers from what that run read.
"""

import io
import re
import uuid
import zipfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import docx
import httpx
import pytest

from app.settings import Settings
from engines.report_markdown import cited_sentences, footnote_urls, split_front_matter
from tools import corpus_documents

from .servers import two_key_clients
from .support import needs_weasyprint
from .test_api import wait_for_status
from .test_corpus_documents import (
    PAGES,
    TOPIC,
    blank_pdf,
    encrypted_pdf,
    pdf_bytes,
    zip_of,
)

pytestmark = needs_weasyprint


def docx_bytes(fog: str = "fog horn") -> bytes:
    """A keeper's handbook in two headed sections, the second on sounding the `fog`."""
    document = docx.Document()
    document.add_paragraph("Keeper's handbook", style="Title")
    document.add_heading("Lamp care", level=1)
    document.add_paragraph("Trim the wick of the lighthouse lamp every four hours at night.")
    document.add_heading("Fog signals", level=1)
    document.add_paragraph(f"Sound the lighthouse {fog} twice a minute while the fog lasts.")
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def settings_for(data_dir: Path, corpus_index: Path, **overrides: Any) -> Settings:
    return Settings(
        data_dir=data_dir,
        corpus_index=corpus_index,
        search_provider="local",
        engine="extractive",
        api_keys=["key-alice", "key-bob"],
        **overrides,
    )


@asynccontextmanager
async def service(
    tmp_path: Path, corpus_index: Path, **overrides: Any
) -> AsyncIterator[tuple[httpx.AsyncClient, httpx.AsyncClient]]:
    async with two_key_clients(settings_for(tmp_path / "data", corpus_index, **overrides)) as ab:
        yield ab


def unique(name: str) -> str:
    """A collection name no other test uses (Redis is shared by the session)."""
    return f"{name}-{uuid.uuid4().hex[:8]}"


async def create(client: httpx.AsyncClient, name: str) -> str:
    answer = await client.post("/v1/collections", json={"name": name})
    assert answer.status_code == 201, answer.text
    assert answer.headers["location"] == f"/v1/collections/{answer.json()['id']}"
    return str(answer.json()["id"])


async def upload(
    client: httpx.AsyncClient, collection: str, *files: tuple[str, bytes]
) -> httpx.Response:
    parts = [("file", (name, body, "application/octet-stream")) for name, body in files]
    return await client.post(f"/v1/collections/{collection}/documents", files=parts)


async def research(client: httpx.AsyncClient, topic: str, **options: Any) -> str:
    started = await client.post(
        "/v1/research", json={"topic": topic, "options": {"max_iterations": 3, **options}}
    )
    assert started.status_code == 202, started.text
    thread_id: str = started.json()["thread_id"]
    detail = await wait_for_status(client, thread_id, {"completed", "failed", "cancelled"})
    assert detail["status"] == "completed", detail
    return thread_id


async def report_of(client: httpx.AsyncClient, thread_id: str) -> dict[str, Any]:
    answer = await client.get(
        f"/v1/research/{thread_id}/report", headers={"Accept": "application/json"}
    )
    assert answer.status_code == 200, answer.text
    found: dict[str, Any] = answer.json()
    return found


def words(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("backend", ["sqlite", "redis"])
async def test_a_run_over_uploaded_files_cites_the_pdf_page_its_sentence_is_on(
    tmp_path: Path, corpus_index: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    extra = {"redis_url": request.getfixturevalue("redis_url")} if backend == "redis" else {}
    async with service(tmp_path, corpus_index, **extra) as (alice, _):
        name = unique("lighthouses")
        collection = await create(alice, name)
        answer = await upload(
            alice, collection, ("report.pdf", pdf_bytes(PAGES)), ("handbook.docx", docx_bytes())
        )
        assert answer.status_code == 201, answer.text
        stored = {d["name"]: d for d in answer.json()["documents"]}
        assert stored["report.pdf"]["kind"] == "pdf" and stored["report.pdf"]["pages"] == 3
        assert stored["handbook.docx"]["kind"] == "docx"
        assert not any(d["replaced"] for d in stored.values())
        detail = (await alice.get(f"/v1/collections/{name}")).json()  # by name, too
        assert detail["id"] == collection and detail["document_count"] == 2

        # The run names the collection by name; it searches only the collection.
        thread_id = await research(alice, TOPIC, collections=[name], collections_only=True)
        thread = (await alice.get(f"/v1/research/{thread_id}")).json()
        assert thread["options"]["collections"] == [collection]  # kept by id
        report = await report_of(alice, thread_id)
        _, body = split_front_matter(report["report"])
        urls = footnote_urls(body)
        assert urls and all(u.startswith(f"collection://{collection}/") for u in urls.values())
        pages = {n: int(u.rsplit("?page=", 1)[1]) for n, u in urls.items() if "?page=" in u}
        assert pages, f"no PDF page is cited:\n{body}"
        assert re.search(r"Annual report 2025 \(report\.pdf, p\. \d\)", body)
        checked = 0
        for sentence, refs in cited_sentences(body):
            for ref in refs:
                if ref not in pages:
                    continue
                claim = words(re.sub(r"\[\^\d+\]|^[-*\s]*\*\*[^*]+:\*\*", "", sentence))
                assert claim in words(PAGES[pages[ref] - 1]), (claim, pages[ref])
                # The evidence says which document and page the passage came from.
                view = (await alice.get(f"/v1/research/{thread_id}/sources/{ref}")).json()
                assert view["document"] == "report.pdf" and view["page"] == pages[ref]
                assert view["kind"] == "passage"
                assert words(PAGES[pages[ref] - 1]) in words(view["text"])
                checked += 1
        assert checked


async def test_unreadable_uploads_are_clear_errors_and_leave_the_collection_intact(
    tmp_path: Path, corpus_index: Path
) -> None:
    good = pdf_bytes(PAGES)
    limit = 200_000  # over the zip bomb's compressed size, under the big PDF's
    async with service(
        tmp_path, corpus_index, collection_max_file_bytes=limit, collection_max_documents=2
    ) as (alice, _):
        collection = await create(alice, "intact")
        assert (await upload(alice, collection, ("report.pdf", good))).status_code == 201
        before = (await alice.get(f"/v1/collections/{collection}/documents")).json()

        bomb = tmp_path / "bomb.docx"
        zip_of(bomb, corpus_documents.MAX_DOCX_UNPACKED_BYTES + 1024 * 1024)
        assert bomb.stat().st_size < limit
        other_zip = io.BytesIO()
        with zipfile.ZipFile(other_zip, "w") as archive:
            archive.writestr("content.xml", "<not-word/>")
        cases: list[tuple[tuple[str, bytes], int, str, str]] = [
            (("bad.pdf", b"%PDF-1.7\n1 0 obj <<\ntruncated"), 422, "unreadable_document", "PDF"),
            (("secret.pdf", encrypted_pdf()), 422, "unreadable_document", "encrypted"),
            (("empty.pdf", b""), 422, "unreadable_document", "empty file"),
            (("scan.pdf", blank_pdf()), 422, "unreadable_document", "no text layer"),
            (("bomb.docx", bomb.read_bytes()), 422, "unreadable_document", "zip bomb"),
            (
                ("locked.docx", corpus_documents.OLE_MAGIC + b"\0" * 504),
                422,
                "unreadable_document",
                "encrypted Word",
            ),
            (("big.pdf", good + b"%" * limit), 413, "payload_too_large", "bytes"),
            (("photo.pdf", b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8), 415, "", "PDF"),
            (("archive.docx", other_zip.getvalue()), 415, "unsupported_media_type", "zip"),
        ]
        for file, status, code, says in cases:
            answer = await upload(alice, collection, file)
            assert answer.status_code == status, (file[0], answer.text)
            error = answer.json()["error"]
            assert error["code"] == (code or "unsupported_media_type"), (file[0], error)
            assert says in error["message"] and file[0] in error["message"], (file[0], error)
            assert error["details"]["file"] == file[0]
        # One unreadable file refuses the upload whole: the readable one beside it is not kept.
        mixed = await upload(alice, collection, ("new.md", b"# New\n\nNew text."), cases[0][0])
        assert mixed.status_code == 422
        # Too many files at once, or for the collection: refused whole.
        many = [(f"n{i}.md", f"# N{i}\n\nText {i}.".encode()) for i in range(11)]
        refused = await upload(alice, collection, *many)
        assert refused.status_code == 409 and refused.json()["error"]["code"] == "limit_reached"
        refused = await upload(alice, collection, *many[:2])
        assert refused.status_code == 409 and "more than 2" in refused.json()["error"]["message"]
        # No file in the 'file' field.
        url = f"/v1/collections/{collection}/documents"
        nothing = await alice.post(url, files={"other": ("a.md", b"# A\n\nText.")})
        assert nothing.status_code == 422 and "'file'" in nothing.json()["error"]["message"]
        # Not multipart: refused by its content type.
        posted = await alice.post(f"/v1/collections/{collection}/documents", json={"file": "x"})
        assert posted.status_code == 415 and posted.json()["error"]["code"] == (
            "unsupported_media_type"
        )
        after = (await alice.get(f"/v1/collections/{collection}/documents")).json()
        assert after == before
        # And the collection still answers a run from what it held.
        thread_id = await research(alice, TOPIC, collections=[collection], collections_only=True)
        sources = (await report_of(alice, thread_id))["sources"]
        assert any("report.pdf" in s["title"] for s in sources), sources


async def test_another_keys_collections_are_not_found_on_every_route(
    tmp_path: Path, corpus_index: Path
) -> None:
    async with service(tmp_path, corpus_index) as (alice, bob):
        collection = await create(alice, "private")
        assert (await upload(alice, collection, ("notes.md", b"# Notes\n\nA secret."))).is_success
        document = (await alice.get(f"/v1/collections/{collection}/documents")).json()["items"][0]
        assert (await bob.get("/v1/collections")).json() == {"items": []}
        for ref in (collection, "private"):
            base = f"/v1/collections/{ref}"
            answers = [
                await bob.get(base),
                await bob.get(f"{base}/documents"),
                await bob.get(f"{base}/documents/{document['id']}"),
                await upload(bob, ref, ("x.md", b"# X\n\nx")),
                await bob.delete(f"{base}/documents/{document['id']}"),
                await bob.delete(base),
            ]
            for answer in answers:
                assert answer.status_code == 404, (answer.request.url, answer.text)
                assert answer.json()["error"]["code"] == "not_found"
        refused = await bob.post(
            "/v1/research", json={"topic": "secrets", "options": {"collections": [collection]}}
        )
        assert refused.status_code == 404, refused.text
        assert "options.collections" in refused.json()["error"]["message"]
        assert (await bob.get("/v1/research")).json()["items"] == []  # nothing was started
        # Nor through the LangGraph Platform API.
        thread = (await bob.post("/threads", json={})).json()["thread_id"]
        platform = await bob.post(
            f"/threads/{thread}/runs",
            json={
                "assistant_id": "research",
                "input": {"topic": "secrets", "options": {"collections": [collection]}},
            },
        )
        assert platform.status_code == 404, platform.text
        assert "options.collections" in platform.json()["detail"]
        # The name is Bob's to use too: it is another collection.
        assert await create(bob, "private") != collection
        duplicate = await alice.post("/v1/collections", json={"name": "private"})
        assert duplicate.status_code == 409
        # Alice's collection is as it was.
        detail = (await alice.get(f"/v1/collections/{collection}")).json()
        assert [d["id"] for d in detail["documents"]] == [document["id"]]
        # The options are checked at the edge.
        too_many = await alice.post(
            "/v1/research",
            json={"topic": "x", "options": {"collections": [f"c{i}" for i in range(11)]}},
        )
        assert too_many.status_code == 422


async def test_reupload_replaces_delete_removes_and_a_replay_still_reads_the_old_text(
    tmp_path: Path, corpus_index: Path
) -> None:
    first = "The Bell Rock lighthouse keeper rang the fog bell at dawn every day."
    second = "The Bell Rock lighthouse keeper lit twenty candles at dusk every day."
    topic = "Bell Rock lighthouse keeper"
    async with service(tmp_path, corpus_index) as (alice, _):
        collection = await create(alice, "bell-rock")
        assert await upload(alice, collection, ("keeper.md", f"# Keeper\n\n{first}".encode()))
        original = await research(alice, topic, collections=[collection], collections_only=True)
        before = await report_of(alice, original)
        assert "fog bell" in before["report"]

        again = await upload(alice, collection, ("keeper.md", f"# Keeper\n\n{second}".encode()))
        assert again.status_code == 201 and again.json()["documents"][0]["replaced"] is True
        documents = (await alice.get(f"/v1/collections/{collection}/documents")).json()["items"]
        assert len(documents) == 1
        replaced = await research(alice, topic, collections=[collection], collections_only=True)
        text = (await report_of(alice, replaced))["report"]
        assert "twenty candles" in text and "fog bell" not in text

        deleted = await alice.delete(f"/v1/collections/{collection}/documents/keeper.md")
        assert deleted.status_code == 204
        assert (await alice.get(f"/v1/collections/{collection}/documents")).json()["items"] == []
        empty = await research(alice, topic, collections=[collection], collections_only=True)
        assert (await report_of(alice, empty))["sources"] == []

        # The replay answers from what the first run read, though the file is gone.
        assert (await alice.delete(f"/v1/collections/{collection}")).status_code == 204
        replay = await alice.post(f"/v1/research/{original}/rerun", json={"mode": "replay"})
        assert replay.status_code == 202, replay.text
        replay_id = replay.json()["thread_id"]
        detail = await wait_for_status(alice, replay_id, {"completed", "failed", "cancelled"})
        assert detail["status"] == "completed", detail
        assert (await report_of(alice, replay_id))["report"] == before["report"]
        # A refresh searches again: the collection is gone, so it is refused at the edge.
        refresh = await alice.post(f"/v1/research/{original}/rerun", json={"mode": "refresh"})
        assert refresh.status_code == 404
        assert (await alice.get(f"/v1/collections/{collection}")).status_code == 404


async def test_on_redis_a_collection_uploaded_to_one_replica_is_searched_by_another(
    tmp_path: Path, corpus_index: Path, redis_url: str
) -> None:
    async with (
        service(tmp_path / "api", corpus_index, redis_url=redis_url, in_process_worker=False) as (
            api,
            _,
        ),
        service(tmp_path / "worker", corpus_index, redis_url=redis_url) as (other, _),
    ):
        name = unique("shared")
        collection = await create(api, name)
        assert (await upload(api, collection, ("report.pdf", pdf_bytes(PAGES)))).is_success
        # The other replica lists it, and its worker (the only one) runs over it.
        assert (await other.get(f"/v1/collections/{name}")).json()["id"] == collection
        thread_id = await research(api, TOPIC, collections=[name], collections_only=True)
        sources = (await report_of(other, thread_id))["sources"]
        assert any("(report.pdf, p. " in s["title"] for s in sources), sources
        # Nothing of it is kept under the API's data directory: the worker built its index.
        assert not (tmp_path / "api" / "data" / "collections").exists()
        assert list((tmp_path / "worker" / "data" / "collections").rglob("index-*.sqlite"))
        # A deletion on one replica is seen by the other.
        assert (await other.delete(f"/v1/collections/{collection}")).status_code == 204
        assert (await api.get(f"/v1/collections/{collection}")).status_code == 404


async def test_a_run_searches_its_collections_beside_the_servers_corpus(
    tmp_path: Path, corpus_index: Path
) -> None:
    async with service(tmp_path, corpus_index) as (alice, _):
        collection = await create(alice, "beside")
        assert (await upload(alice, collection, ("report.pdf", pdf_bytes(PAGES)))).is_success
        thread_id = await research(
            alice, "lighthouses and the printing press", collections=[collection]
        )
        notes = (await alice.get(f"/v1/research/{thread_id}/notes")).json()
        found = {url.split(":", 1)[0] for note in notes for url in note["sources"]}
        # The uploaded report's pages and the server's local corpus, in one run.
        assert "collection" in found and found - {"collection"}, notes
        # Without the collection, only the server's corpus is searched.
        alone = await research(alice, "lighthouses and the printing press")
        notes = (await alice.get(f"/v1/research/{alone}/notes")).json()
        found = {url.split(":", 1)[0] for note in notes for url in note["sources"]}
        assert found and "collection" not in found, notes
