"""The evidence store's protocol, on each implementation: records in order, texts once."""

import socket
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from stores.evidence import (
    Evidence,
    EvidenceStore,
    Hit,
    ModelCallRecord,
    PageRead,
    RunHeader,
    SearchCall,
    StoreFigures,
    content_hash,
    load,
    pack,
)
from stores.sqlite_evidence import SqliteEvidenceStore
from stores.sqlite_writer import open_sqlite

if TYPE_CHECKING:
    from redis.asyncio import Redis


@pytest.fixture(params=["sqlite", "redis"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[EvidenceStore]:
    if request.param == "sqlite":
        async with open_sqlite(tmp_path / "service.sqlite", SqliteEvidenceStore) as opened:
            yield opened
        return
    from redis.asyncio import Redis

    from stores.redis_evidence import RedisEvidenceStore

    client = Redis.from_url(request.getfixturevalue("redis_url"))
    redis_store = RedisEvidenceStore(client, prefix=f"test:{uuid.uuid4().hex}:")
    try:
        yield redis_store
    finally:
        await redis_store.flush()
        await client.aclose()


def search(query: str, *texts: str) -> SearchCall:
    hits = [
        Hit(title=f"t{i}", url=f"https://x.test/{i}", content_hash=content_hash(t))
        for i, t in enumerate(texts)
    ]
    return SearchCall(provider="local", query=query, max_results=5, hits=hits)


async def test_records_come_back_in_order_with_their_texts(store: EvidenceStore) -> None:
    header = RunHeader(provider="local", pages_per_query=2, reads_pages=True)
    page_text = "A page about printing. " * 50
    store.add(
        "t1",
        header,
        search("printing", "snippet one", "snippet two"),
        ["snippet one", "snippet two"],
    )
    store.add(
        "t1",
        header,
        PageRead(
            url="https://x.test/0", content_hash=content_hash(page_text), chars=len(page_text)
        ),
        [page_text],
    )
    store.add(
        "t1",
        header,
        ModelCallRecord(
            node="writer",
            role="writer",
            model="openai:m",
            reported_model="m-2024",
            template="writer.write",
            template_version="abc",
            input_tokens=3,
        ),
        [],
    )
    await store.flush()
    evidence = await load(store, "t1")
    assert evidence.header == header
    assert [r.kind for r in evidence.records] == ["search", "page", "model"]
    assert evidence.contents == {
        content_hash(t): t for t in ("snippet one", "snippet two", page_text)
    }
    assert await store.header("nobody") is None
    assert await store.records("nobody") == []


async def test_the_first_header_stays(store: EvidenceStore) -> None:
    first = RunHeader(mode="refresh", of="a", provider="local")
    store.add("t1", first, search("q", "x"), ["x"])
    store.add("t1", RunHeader(provider="other"), search("q2", "y"), ["y"])
    await store.flush()
    assert await store.header("t1") == first


async def test_a_text_read_by_many_runs_is_stored_once(store: EvidenceStore) -> None:
    text = "The same page, read by every run. " * 100
    before = await store.figures()
    for thread in ("a", "b", "c"):
        store.add(thread, RunHeader(), search("q", text), [text])
    await store.flush()
    after = await store.figures()
    assert after.contents - before.contents == 1
    assert after.runs - before.runs == 3
    assert after.records - before.records == 3
    # deflated: repetitive text takes far less than its characters
    assert 0 < after.content_bytes - before.content_bytes < len(text) // 4


async def test_delete_keeps_texts_other_runs_name(store: EvidenceStore) -> None:
    shared, own = "shared text", "only a's text"
    store.add("a", RunHeader(), search("q", shared, own), [shared, own])
    store.add("b", RunHeader(), search("q", shared), [shared])
    await store.flush()
    await store.delete("a")
    assert await store.records("a") == []
    assert await store.header("a") is None
    assert await store.contents([content_hash(shared), content_hash(own)]) == {
        content_hash(shared): shared
    }
    await store.delete("b")
    assert await store.contents([content_hash(shared)]) == {}


async def test_delete_comes_after_the_records_queued_before_it(store: EvidenceStore) -> None:
    store.add("a", RunHeader(), search("q", "queued text"), ["queued text"])
    await store.delete("a")  # no flush: the queued record must not land after the delete
    await store.flush()
    assert await store.header("a") is None
    assert await store.records("a") == []
    assert await store.contents([content_hash("queued text")]) == {}


async def test_put_replaces_a_runs_evidence(store: EvidenceStore) -> None:
    store.add("t", RunHeader(), search("old", "old text"), ["old text"])
    await store.flush()
    script = [search("q", "kept text")]
    evidence = Evidence(
        header=RunHeader(mode="replay", of="src", provider="local", script=script),
        records=[],
        contents={content_hash("kept text"): "kept text", content_hash("stray"): "stray"},
    )
    await store.put("t", evidence)
    loaded = await load(store, "t")
    assert loaded.header is not None and loaded.header.script == script
    assert loaded.records == []
    # only texts the evidence names are kept
    assert loaded.contents == {content_hash("kept text"): "kept text"}
    assert await store.contents([content_hash("old text"), content_hash("stray")]) == {}


async def test_prune_by_age_then_by_size(store: EvidenceStore) -> None:
    now = datetime.now(UTC)
    for i, thread in enumerate(("old", "mid", "new")):
        header = RunHeader(created_at=now - timedelta(days=30 - 10 * i))
        text = f"{thread} " + uuid.uuid4().hex * 200
        store.add(thread, header, search("q", text), [text])
    await store.flush()
    assert await store.prune(now - timedelta(days=25), None) == 1
    assert await store.header("old") is None
    assert await store.header("mid") is not None
    assert await store.prune(None, 1) == 2  # nothing fits in one byte: every run goes
    assert await store.header("new") is None
    assert (await store.figures()).content_bytes == 0


@pytest.fixture
async def redis_client(redis_url: str) -> AsyncIterator["Redis"]:
    from redis.asyncio import Redis

    client = Redis.from_url(redis_url)
    try:
        yield client
    finally:
        await client.aclose()


async def test_redis_keeps_nothing_once_every_run_is_gone(redis_client: "Redis") -> None:
    from stores.redis_evidence import RedisEvidenceStore

    prefix = f"test:{uuid.uuid4().hex}:"
    store = RedisEvidenceStore(redis_client, prefix=prefix)
    shared = "a text every run reads"
    for thread in ("a", "b", "c"):
        store.add(thread, RunHeader(), search("q", shared, f"{thread}'s own"), [shared, thread])
        store.add(thread, RunHeader(), ModelCallRecord(node="n", role="r", model="m"), [])
    await store.put("d", Evidence(records=[search("q", shared)], contents={"x": shared}))
    await store.flush()
    assert (await store.figures()).runs == 4
    await store.delete("a")
    await store.delete("nobody")
    assert await store.prune(None, 0) == 3
    assert await redis_client.keys(f"{prefix}*") == []
    assert await store.figures() == StoreFigures()


async def test_redis_figures_count_their_prefix_only(redis_client: "Redis") -> None:
    from stores.redis_evidence import RedisEvidenceStore

    mine = RedisEvidenceStore(redis_client, prefix=f"test:{uuid.uuid4().hex}:")
    other = RedisEvidenceStore(redis_client, prefix=f"test:{uuid.uuid4().hex}:")
    other.add("t", RunHeader(), search("q", "other text"), ["other text"])
    mine.add("t", RunHeader(), search("q", "my text", "more"), ["my text", "more", "my text"])
    await mine.flush()
    await other.flush()
    figures = await mine.figures()
    assert (figures.runs, figures.records, figures.contents) == (1, 1, 2)
    assert figures.text_chars == len("my text") + len("more")
    assert figures.content_bytes == len(pack("my text")) + len(pack("more"))


async def test_redis_add_never_raises_when_redis_is_down(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    from redis.asyncio import Redis

    from stores import redis_evidence
    from stores.redis_evidence import RedisEvidenceStore

    # A batch waits this long for Redis before it is given up (a minute in service).
    monkeypatch.setattr(redis_evidence, "WRITE_WAIT_S", 1.0)

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    client = Redis.from_url(f"redis://127.0.0.1:{port}", retry=None)
    store = RedisEvidenceStore(client)
    try:
        store.add("t", RunHeader(), search("q", "secret text"), ["secret text"])
        await store.flush()
    finally:
        await client.aclose()
    warnings = [r for r in caplog.records if r.name == "stores.redis_evidence"]
    assert [r.levelname for r in warnings] == ["WARNING"]
    assert "evidence of t not kept" in warnings[0].getMessage()
    assert "secret text" not in caplog.text
