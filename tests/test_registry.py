import asyncio
import base64
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from redis.asyncio import Redis

from stores.redis_registry import RedisRegistry
from stores.registry import (
    ACTIVE,
    SqliteRegistry,
    ThreadExists,
    ThreadRecord,
)
from stores.sqlite_writer import open_sqlite

T0 = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)


def record(
    thread_id: str,
    owner: str = "alice",
    minutes: int = 0,
    status: str = "queued",
    **extra: object,
) -> ThreadRecord:
    at = T0 + timedelta(minutes=minutes)
    return ThreadRecord.model_validate(
        {
            "thread_id": thread_id,
            "owner": owner,
            "topic": f"topic of {thread_id}",
            "status": status,
            "created_at": at,
            "updated_at": at,
            **extra,
        }
    )


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "data" / "service.sqlite"


@pytest.fixture(params=["sqlite", "redis"])
async def registry(request: pytest.FixtureRequest, db: Path) -> AsyncIterator[SqliteRegistry]:
    """Each behaviour on both implementations."""
    if request.param == "redis":
        client = Redis.from_url(request.getfixturevalue("redis_url"))
        try:
            yield RedisRegistry(client, prefix=f"test:{uuid.uuid4().hex}:")
        finally:
            await client.aclose()
        return
    async with open_sqlite(db, SqliteRegistry) as opened:
        yield opened


async def all_pages(
    registry: SqliteRegistry, owner: str, limit: int
) -> tuple[list[ThreadRecord], int]:
    seen: list[ThreadRecord] = []
    pages = 0
    cursor: str | None = None
    while True:
        page, cursor = await registry.list(owner, limit=limit, cursor=cursor)
        pages += 1
        assert len(page) <= limit
        seen.extend(page)
        if cursor is None:
            return seen, pages


async def test_a_created_thread_reads_back_equal(registry: SqliteRegistry) -> None:
    created = record("t1", options={"depth": 2, "tags": ["ü", "研究"], "nested": {"a": None}})

    await registry.create(created)

    assert await registry.get("t1") == created


async def test_an_unknown_thread_reads_as_none(registry: SqliteRegistry) -> None:
    assert await registry.get("missing") is None


async def test_creating_a_duplicate_id_raises_thread_exists(registry: SqliteRegistry) -> None:
    await registry.create(record("t1"))

    with pytest.raises(ThreadExists):
        await registry.create(record("t1", owner="bob"))
    assert (await registry.get("t1")) == record("t1")


async def test_of_many_concurrent_creates_of_one_id_exactly_one_wins(
    registry: SqliteRegistry,
) -> None:
    owners = [f"owner{i}" for i in range(40)]
    outcomes = await asyncio.gather(
        *(registry.create(record("t1", owner=owner)) for owner in owners),
        return_exceptions=True,
    )
    winners = [owner for owner, outcome in zip(owners, outcomes, strict=True) if outcome is None]
    assert len(winners) == 1
    assert all(isinstance(o, ThreadExists) for o in outcomes if o is not None)
    # The record is the winner's alone, and only its owner lists it.
    assert await registry.get("t1") == record("t1", owner=winners[0])
    for owner in owners:
        listed, _ = await registry.list(owner)
        assert [r.thread_id for r in listed] == (["t1"] if owner == winners[0] else [])


async def test_times_are_kept_in_utc_and_naive_ones_are_taken_as_utc(
    registry: SqliteRegistry,
) -> None:
    plus_two = timezone(timedelta(hours=2))
    local = record("aware", created_at=datetime(2025, 1, 1, 14, 0, tzinfo=plus_two))
    naive = record("naive", created_at=datetime(2025, 1, 1, 12, 0))

    await registry.create(local)
    await registry.create(naive)

    for thread_id in ("aware", "naive"):
        stored = await registry.get(thread_id)
        assert stored is not None
        assert stored.created_at == T0
        assert stored.created_at.tzinfo == UTC


async def test_list_is_newest_first_and_scoped_to_the_owner(registry: SqliteRegistry) -> None:
    await registry.create(record("old", minutes=1))
    await registry.create(record("new", minutes=3))
    await registry.create(record("mid", minutes=2))
    await registry.create(record("bobs", owner="bob", minutes=5))

    page, cursor = await registry.list("alice")

    assert [r.thread_id for r in page] == ["new", "mid", "old"]
    assert cursor is None
    assert [r.thread_id for r in (await registry.list("bob"))[0]] == ["bobs"]
    assert await registry.list("nobody") == ([], None)


async def test_list_breaks_ties_in_created_at_by_thread_id_descending(
    registry: SqliteRegistry,
) -> None:
    for thread_id in ("b", "a", "c"):
        await registry.create(record(thread_id))

    page, _ = await registry.list("alice")

    assert [r.thread_id for r in page] == ["c", "b", "a"]


@pytest.mark.parametrize("limit", [1, 2, 3, 7, 25])
async def test_paging_returns_every_record_exactly_once_in_order(
    registry: SqliteRegistry, limit: int
) -> None:
    # Groups of equal created_at make sure the cursor handles ties at page boundaries.
    expected = []
    for n in range(25):
        created = record(f"t{n:02d}", minutes=n // 4)
        await registry.create(created)
        expected.append(created)
        await registry.create(record(f"x{n:02d}", owner="bob", minutes=n // 4))
    expected.sort(key=lambda r: (r.created_at, r.thread_id), reverse=True)

    seen, pages = await all_pages(registry, "alice", limit)

    assert seen == expected
    assert pages == -(-25 // limit)


async def test_the_last_full_page_has_no_next_cursor(registry: SqliteRegistry) -> None:
    for n in range(4):
        await registry.create(record(f"t{n}", minutes=n))

    first, cursor = await registry.list("alice", limit=2)
    second, end = await registry.list("alice", limit=2, cursor=cursor)

    assert [r.thread_id for r in first + second] == ["t3", "t2", "t1", "t0"]
    assert end is None


@pytest.mark.parametrize(
    "cursor",
    [
        "",
        "not a cursor",
        "!!!!",
        "ünïcode",
        base64.urlsafe_b64encode(b"{}").decode(),
        base64.urlsafe_b64encode(b'["2025-01-01", "t"]').decode(),
        base64.urlsafe_b64encode(b'["2025-01-01T12:00:00.000000+00:00"]').decode(),
        base64.urlsafe_b64encode(b'[1, "t"]').decode(),
    ],
)
async def test_a_bad_cursor_raises_value_error(registry: SqliteRegistry, cursor: str) -> None:
    with pytest.raises(ValueError):
        await registry.list("alice", cursor=cursor)


async def test_a_limit_below_one_raises_value_error(registry: SqliteRegistry) -> None:
    with pytest.raises(ValueError):
        await registry.list("alice", limit=0)


async def test_set_status_changes_status_error_and_updated_at(registry: SqliteRegistry) -> None:
    await registry.create(record("t1"))

    failed = await registry.set_status("t1", "failed", error="search backend down")

    assert failed.status == "failed"
    assert failed.error == "search backend down"
    assert failed.updated_at > T0
    assert failed.created_at == T0
    assert await registry.get("t1") == failed


async def test_set_status_without_an_error_clears_the_earlier_one(
    registry: SqliteRegistry,
) -> None:
    await registry.create(record("t1", status="failed", error="boom"))

    running = await registry.set_status("t1", "running")

    assert running.status == "running"
    assert running.error is None


async def test_a_completed_run_keeps_its_report_status_until_the_thread_runs_again(
    registry: SqliteRegistry,
) -> None:
    await registry.create(record("t1", status="running"))

    done = await registry.set_status("t1", "completed", report="partial")
    assert done.report == "partial"
    assert (await registry.get("t1")) == done
    page, _ = await registry.list("alice")
    assert [r.report for r in page] == ["partial"]
    # Pausing or failing later does not forget it; a new run does, until it writes its own.
    assert (await registry.set_status("t1", "cancelled")).report == "partial"
    assert (await registry.set_status("t1", "running")).report is None
    assert (await registry.get("t1")).report is None  # type: ignore[union-attr]


async def test_set_status_of_an_unknown_thread_raises_key_error(registry: SqliteRegistry) -> None:
    with pytest.raises(KeyError):
        await registry.set_status("missing", "running")


async def test_delete_removes_the_thread_and_reports_whether_it_existed(
    registry: SqliteRegistry,
) -> None:
    await registry.create(record("t1"))

    assert await registry.delete("t1") is True
    assert await registry.get("t1") is None
    assert await registry.delete("t1") is False
    await registry.create(record("t1"))


async def test_active_returns_queued_and_running_threads_oldest_first(
    registry: SqliteRegistry,
) -> None:
    statuses = [
        "running",
        "completed",
        "queued",
        "waiting_for_approval",
        "paused",
        "failed",
        "cancelled",
        "queued",
    ]
    for n, status in enumerate(statuses):
        await registry.create(record(f"t{n}", owner=f"owner{n % 2}", minutes=-n, status=status))

    active = await registry.active()

    assert [r.thread_id for r in active] == ["t7", "t2", "t0"]
    assert all(r.status in ACTIVE for r in active)


async def test_active_follows_status_changes(registry: SqliteRegistry) -> None:
    await registry.create(record("t1", status="running"))

    await registry.set_status("t1", "completed")

    assert await registry.active() == []


async def test_the_registry_survives_reopening(db: Path) -> None:
    async with open_sqlite(db, SqliteRegistry) as registry:
        await registry.create(record("t1", options={"max_rounds": 3}))
        updated = await registry.set_status("t1", "paused")

    async with open_sqlite(db, SqliteRegistry) as registry:
        assert await registry.get("t1") == updated
        with pytest.raises(ThreadExists):
            await registry.create(record("t1"))


async def test_writes_are_committed_at_once_for_other_connections(db: Path) -> None:
    async with open_sqlite(db, SqliteRegistry) as writer, open_sqlite(db, SqliteRegistry) as reader:
        await writer.create(record("t1"))
        updated = await writer.set_status("t1", "running")
        assert await reader.get("t1") == updated
        assert await writer.delete("t1")
        assert await reader.get("t1") is None


async def test_ping_answers_while_open_and_raises_after_close(db: Path) -> None:
    async with open_sqlite(db, SqliteRegistry) as registry:
        await registry.ping()

    with pytest.raises(ValueError):
        await registry.ping()


async def test_update_replaces_the_fields_given_and_keeps_the_rest(
    registry: SqliteRegistry,
) -> None:
    await registry.create(record("t1", status="new", topic="", metadata={"team": "a"}))
    updated = await registry.update("t1", topic="printing press", options={"max_iterations": 3})
    again = await registry.get("t1")
    assert updated == again
    assert again is not None
    assert (again.topic, again.options, again.metadata) == (
        "printing press",
        {"max_iterations": 3},
        {"team": "a"},
    )
    assert again.updated_at > again.created_at
    assert (await registry.update("t1", metadata={"team": "b"})).metadata == {"team": "b"}
    with pytest.raises(KeyError):
        await registry.update("nope", topic="x")
