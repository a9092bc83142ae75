import asyncio
import sqlite3
import uuid
from collections.abc import AsyncIterator
from contextlib import aclosing, asynccontextmanager, closing
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis

from stores import redis_events
from stores.events import (
    TERMINAL_EVENT,
    Event,
    EventLog,
    EventLogClosed,
)
from stores.recent_events import RECENT_BYTES
from stores.redis_events import RedisEventLog
from stores.sqlite_events import SqliteEventLog
from stores.sqlite_writer import open_sqlite

from .servers import free_port

# A safety net against a hang, never a means of synchronisation.
TIMEOUT_S = 10.0


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "data" / "service.sqlite"


@asynccontextmanager
async def redis_event_log(url: str) -> AsyncIterator[RedisEventLog]:
    """A Redis log of its own (a fresh prefix) on the test server."""
    client = Redis.from_url(url)
    opened = RedisEventLog(client, prefix=f"test:{uuid.uuid4().hex}:")
    try:
        yield opened
    finally:
        await opened.close()
        await client.aclose()


@pytest.fixture
async def redis_log(redis_url: str) -> AsyncIterator[RedisEventLog]:
    async with redis_event_log(redis_url) as opened:
        yield opened


@pytest.fixture(params=["sqlite", "redis"])
async def log(request: pytest.FixtureRequest, db: Path) -> AsyncIterator[EventLog]:
    """Each behaviour of the protocol, on both implementations."""
    if request.param == "sqlite":
        async with open_sqlite(db, SqliteEventLog) as opened:
            yield opened
        return
    async with redis_event_log(request.getfixturevalue("redis_url")) as opened_log:
        yield opened_log


async def collect(log: EventLog, thread_id: str, after: int = 0) -> list[Event]:
    async def drain() -> list[Event]:
        return [event async for event in log.follow(thread_id, after)]

    return await asyncio.wait_for(drain(), TIMEOUT_S)


def ids(events: list[Event]) -> list[int]:
    return [event.id for event in events]


async def test_the_sqlite_log_satisfies_the_event_log_protocol(log: SqliteEventLog) -> None:
    as_protocol: EventLog = log
    await as_protocol.ping()


async def test_ids_start_at_one_and_increase_per_thread_independently(
    log: SqliteEventLog,
) -> None:
    a1 = await log.append("a", "step", {})
    b1 = await log.append("b", "step", {})
    a2 = await log.append("a", "step", {})
    b2 = await log.append("b", "step", {})
    a3 = await log.append("a", "step", {})

    assert [a1.id, a2.id, a3.id] == [1, 2, 3]
    assert [b1.id, b2.id] == [1, 2]
    assert await log.last_id("a") == 3
    assert await log.last_id("b") == 2


async def test_append_returns_the_event_as_stored(log: SqliteEventLog) -> None:
    appended = await log.append("t", "plan", {"steps": ["a", "b"]})

    assert await log.read("t") == [appended]
    assert appended.thread_id == "t"
    assert appended.created_at.tzinfo is not None


async def test_last_id_of_an_unknown_thread_is_zero(log: SqliteEventLog) -> None:
    assert await log.last_id("nobody") == 0
    assert await log.read("nobody") == []


async def test_read_after_returns_exactly_the_later_events(log: SqliteEventLog) -> None:
    for n in range(5):
        await log.append("t", "step", {"n": n})

    assert ids(await log.read("t")) == [1, 2, 3, 4, 5]
    assert ids(await log.read("t", after=2)) == [3, 4, 5]
    assert ids(await log.read("t", after=5)) == []
    assert ids(await log.read("t", after=1, limit=2)) == [2, 3]
    assert [e.data["n"] for e in await log.read("t", after=3)] == [3, 4]


async def test_a_negative_read_limit_is_refused(log: SqliteEventLog) -> None:
    with pytest.raises(ValueError):
        await log.read("t", limit=-1)


async def test_concurrent_appends_to_one_thread_get_ids_without_gaps_or_duplicates(
    log: SqliteEventLog,
) -> None:
    appended = await asyncio.gather(*(log.append("t", "step", {"n": n}) for n in range(200)))

    assert sorted(ids(list(appended))) == list(range(1, 201))
    stored = await log.read("t")
    assert ids(stored) == list(range(1, 201))
    assert sorted(e.data["n"] for e in stored) == list(range(200))


async def test_concurrent_appends_to_many_threads_number_each_thread_from_one(
    log: SqliteEventLog,
) -> None:
    threads = [f"t{k}" for k in range(20)]
    await asyncio.gather(*(log.append(t, "step", {}) for _ in range(10) for t in threads))

    for thread_id in threads:
        assert ids(await log.read(thread_id)) == list(range(1, 11))


async def test_data_round_trips_nested_and_unicode(log: SqliteEventLog) -> None:
    data: dict[str, Any] = {
        "title": "Übersicht — 研究 🔬",
        "nested": {"list": [1, 2.5, None, True, {"deep": ["x", "ÿ"]}], "empty": {}},
        "quote": 'he said "hi"\n',
    }
    await log.append("t", "note", data)

    [event] = await log.read("t")
    assert event.data == data
    assert event.name == "note"


async def test_follow_replays_then_yields_events_appended_later(log: SqliteEventLog) -> None:
    await log.append("t", "step", {"n": 1})
    await log.append("t", "step", {"n": 2})
    caught_up = asyncio.Event()
    seen: list[Event] = []

    async def follower() -> None:
        async with aclosing(log.follow("t")) as events:
            async for event in events:
                seen.append(event)
                if event.id == 2:
                    caught_up.set()

    async def producer() -> None:
        await caught_up.wait()  # everything after this point is live, not backlog
        await log.append("t", "step", {"n": 3})
        await log.append("t", TERMINAL_EVENT, {})

    await asyncio.wait_for(asyncio.gather(follower(), producer()), TIMEOUT_S)

    assert ids(seen) == [1, 2, 3, 4]
    assert seen[-1].name == TERMINAL_EVENT


async def test_follow_sees_an_event_appended_between_its_replay_and_its_wait(
    log: SqliteEventLog,
) -> None:
    await log.append("t", "step", {})

    async with aclosing(log.follow("t")) as events:
        first = await asyncio.wait_for(anext(events), TIMEOUT_S)
        # The follower is suspended after its replay query and before it starts waiting.
        await log.append("t", "step", {})
        await log.append("t", TERMINAL_EVENT, {})
        rest = await asyncio.wait_for(_rest(events), TIMEOUT_S)

    assert first.id == 1
    assert ids(rest) == [2, 3]


async def _rest(events: AsyncIterator[Event]) -> list[Event]:
    return [event async for event in events]


async def test_follow_ends_at_done_in_the_backlog(log: SqliteEventLog) -> None:
    await log.append("t", "step", {})
    await log.append("t", TERMINAL_EVENT, {})
    await log.append("t", "after_done", {})

    followed = await collect(log, "t")

    assert [e.name for e in followed] == ["step", TERMINAL_EVENT]


async def test_follow_ends_when_done_arrives_live(log: SqliteEventLog) -> None:
    started = asyncio.Event()

    async def producer() -> None:
        await started.wait()
        await log.append("t", "step", {})
        await log.append("t", TERMINAL_EVENT, {})

    async def follower() -> list[Event]:
        seen = []
        async with aclosing(log.follow("t")) as events:
            started.set()
            async for event in events:
                seen.append(event)
        return seen

    seen, _ = await asyncio.wait_for(asyncio.gather(follower(), producer()), TIMEOUT_S)

    assert [e.name for e in seen] == ["step", TERMINAL_EVENT]


async def test_a_follower_started_after_k_never_yields_ids_up_to_k(log: SqliteEventLog) -> None:
    for _ in range(5):
        await log.append("t", "step", {})
    await log.append("t", TERMINAL_EVENT, {})

    assert ids(await collect(log, "t", after=3)) == [4, 5, 6]


async def test_a_follower_ahead_of_the_log_waits_for_ids_past_its_position(
    log: SqliteEventLog,
) -> None:
    await log.append("t", "step", {})
    await log.append("t", "step", {})
    follower = asyncio.create_task(collect(log, "t", after=3))

    for _ in range(2):
        await log.append("t", "step", {})
    await log.append("t", TERMINAL_EVENT, {})

    assert ids(await follower) == [4, 5]


async def test_every_follower_of_a_thread_gets_every_event_once(log: SqliteEventLog) -> None:
    followers = [asyncio.create_task(collect(log, "t")) for _ in range(5)]

    appended = [await log.append("t", "step", {"n": n}) for n in range(300)]
    appended.append(await log.append("t", TERMINAL_EVENT, {}))

    for follower in followers:
        assert await follower == appended


async def test_a_follower_of_one_thread_ignores_other_threads(log: SqliteEventLog) -> None:
    follower = asyncio.create_task(collect(log, "mine"))

    await log.append("other", "step", {})
    await log.append("other", TERMINAL_EVENT, {})
    await log.append("mine", TERMINAL_EVENT, {})

    assert [(e.thread_id, e.id) for e in await follower] == [("mine", 1)]


async def test_events_survive_reopening_and_ids_continue(db: Path) -> None:
    async with open_sqlite(db, SqliteEventLog) as log:
        for n in range(3):
            await log.append("t", "step", {"n": n})
        before = await log.read("t")

    async with open_sqlite(db, SqliteEventLog) as log:
        assert await log.read("t") == before
        assert await log.last_id("t") == 3
        appended = await log.append("t", "step", {"n": 3})

    assert appended.id == 4


async def test_delete_removes_the_thread_and_its_ids_restart_at_one(
    log: SqliteEventLog,
) -> None:
    await log.append("gone", "step", {})
    await log.append("gone", "step", {})
    await log.append("kept", "step", {})

    await log.delete("gone")

    assert await log.read("gone") == []
    assert await log.last_id("gone") == 0
    assert ids(await log.read("kept")) == [1]
    assert (await log.append("gone", "step", {})).id == 1


async def test_delete_is_durable_across_reopening(db: Path) -> None:
    async with open_sqlite(db, SqliteEventLog) as log:
        await log.append("t", "step", {})
        await log.delete("t")

    async with open_sqlite(db, SqliteEventLog) as log:
        assert await log.read("t") == []
        assert (await log.append("t", "step", {})).id == 1


async def test_an_unserialisable_payload_fails_only_its_own_append(log: SqliteEventLog) -> None:
    with pytest.raises(TypeError):
        await log.append("t", "bad", {"value": object()})

    assert (await log.append("t", "good", {})).id == 1


async def test_a_failed_append_skips_no_id_and_the_log_recovers(db: Path) -> None:
    async with open_sqlite(db, SqliteEventLog) as log:
        await log.append("t", "step", {})
        # Another writer breaks the single-writer assumption and takes the next id.
        with closing(sqlite3.connect(db)) as other, other:
            other.execute(
                "INSERT INTO event_log (thread_id, id, name, data, created_at) "
                "VALUES ('t', 2, 'foreign', '{}', '2025-01-01T00:00:00+00:00')"
            )

        with pytest.raises(sqlite3.IntegrityError):
            await log.append("t", "step", {})
        appended = await log.append("t", "step", {})

        assert appended.id == 3
        assert ids(await log.read("t")) == [1, 2, 3]


async def test_the_log_shares_its_file_with_other_tables(db: Path) -> None:
    db.parent.mkdir(parents=True)
    with closing(sqlite3.connect(db)) as other, other:
        other.execute("CREATE TABLE neighbours (name TEXT)")
        other.execute("INSERT INTO neighbours VALUES ('before')")

    async with open_sqlite(db, SqliteEventLog) as log:
        await log.append("t", "step", {})
        with closing(sqlite3.connect(db)) as other, other:
            other.execute("INSERT INTO neighbours VALUES ('during')")
        await log.append("t", "step", {})
        assert ids(await log.read("t")) == [1, 2]

    with closing(sqlite3.connect(db)) as other:
        rows = other.execute("SELECT name FROM neighbours ORDER BY name").fetchall()
    assert rows == [("before",), ("during",)]


async def test_ping_answers_while_open_and_raises_after_close(db: Path) -> None:
    async with open_sqlite(db, SqliteEventLog) as log:
        await log.ping()

    with pytest.raises(EventLogClosed):
        await log.ping()
    with pytest.raises(EventLogClosed):
        await log.append("t", "step", {})


async def test_closing_the_log_ends_waiting_followers_with_an_error(db: Path) -> None:
    async with open_sqlite(db, SqliteEventLog) as log:
        await log.append("t", "step", {})
        events = log.follow("t")
        assert (await asyncio.wait_for(anext(events), TIMEOUT_S)).id == 1

        async def next_event() -> Event:
            return await anext(events)

        waiting = asyncio.create_task(next_event())

    with pytest.raises(EventLogClosed):
        await asyncio.wait_for(waiting, TIMEOUT_S)
    await events.aclose()


async def test_memory_for_recent_events_is_let_go_and_bounded(db: Path) -> None:
    """A Platform run's stream closes with `end`, a run-records stream never closes."""
    async with open_sqlite(db, SqliteEventLog) as log:
        recent = log._recent
        for run in range(20):
            await log.append(f"platform-run:{run}", "updates", {"chunk": "x" * 2000})
            await log.append(f"platform-run:{run}", "end", {"status": "success"})
            await log.append("platform-runs:thread", "run", {"run": run})
        assert "platform-runs:thread" in recent
        assert not any(f"platform-run:{run}" in recent for run in range(20)), "closed: nothing"
        # Streams that never close, 1/100 of the bound each: half as much again as it holds
        # (the service's own bound: 25 MB written in a fifth of a second).
        chunk = "y" * (RECENT_BYTES // 100)
        for stream in range(150):
            await log.append(f"open-{stream}", "updates", {"chunk": chunk})
        held = sum(len(e.text) for s in range(150) for e in recent.after(f"open-{s}", 0) or [])
        assert held == recent.held_bytes <= RECENT_BYTES
        assert "open-149" in recent and "open-0" not in recent
        # What memory let go of is read from the file, ids continuing.
        assert (await log.append("open-0", "more", {})).id == 2
        assert [e.id for e in await log.read("open-0")] == [1, 2]


# -- Redis: followers of streams this process writes -----------------------------------


@asynccontextmanager
async def log_pair(
    url: str, **here_options: Any
) -> AsyncIterator[tuple[RedisEventLog, RedisEventLog, Redis]]:
    """Two logs of one prefix, as two processes have: `here` runs executions, `elsewhere` not."""
    client = Redis.from_url(url)
    prefix = f"test:{uuid.uuid4().hex}:"
    here = RedisEventLog(client, prefix=prefix, **here_options)
    elsewhere = RedisEventLog(client, prefix=prefix)
    try:
        yield here, elsewhere, client
    finally:
        await here.close()
        await elsewhere.close()
        await client.aclose()


@pytest.fixture
async def redis_pair(redis_url: str) -> AsyncIterator[tuple[RedisEventLog, RedisEventLog, Redis]]:
    async with log_pair(redis_url) as pair:
        yield pair


class Follower:
    """A follower of one stream, whose events can be awaited one by one."""

    def __init__(self, log: EventLog, thread_id: str) -> None:
        self._queue: asyncio.Queue[Event] = asyncio.Queue()
        self._task = asyncio.create_task(self._follow(log, thread_id))

    async def _follow(self, log: EventLog, thread_id: str) -> list[Event]:
        events = []
        async for event in log.follow(thread_id):
            events.append(event)
            self._queue.put_nowait(event)
        return events

    async def next(self) -> Event:
        """The next event (a hang fails after TIMEOUT_S)."""
        return await asyncio.wait_for(self._queue.get(), TIMEOUT_S)

    async def all(self) -> list[Event]:
        """Every event, once the stream ended (a hang fails after TIMEOUT_S)."""
        return await asyncio.wait_for(self._task, TIMEOUT_S)


async def command_calls(client: Redis, command: str) -> int:
    stats: dict[str, Any] = await client.info("commandstats")
    return int(stats.get(f"cmdstat_{command}", {}).get("calls", 0))


async def blocked_readers(client: Redis) -> int:
    """How many connections block in XREAD now."""
    clients: list[dict[str, Any]] = await client.client_list()
    return sum(1 for c in clients if c.get("cmd") == "xread")


async def blocked_readers_once_blocking(client: Redis, within_s: float = 5.0) -> int:
    """`blocked_readers`, once at least one blocks (polled: a busy machine takes a while)."""
    deadline = asyncio.get_running_loop().time() + within_s
    while (count := await blocked_readers(client)) == 0:
        if asyncio.get_running_loop().time() > deadline:
            break
        await asyncio.sleep(0.02)
    return count


async def calls_reach(client: Redis, command: str, count: int) -> None:
    """Return once the server has run `command` `count` times (polled; fails after TIMEOUT_S)."""
    async with asyncio.timeout(TIMEOUT_S):
        while await command_calls(client, command) < count:
            await asyncio.sleep(0.01)


async def test_a_follower_of_a_stream_this_process_writes_is_served_from_memory(
    redis_pair: tuple[RedisEventLog, RedisEventLog, Redis],
) -> None:
    here, _, client = redis_pair
    with here.writing("t", "run:1"):
        follower = Follower(here, "t")
        await here.append("t", "step", {"n": 0})
        assert (await follower.next()).id == 1  # it follows: it waits for the next event
        before = await command_calls(client, "xread"), await command_calls(client, "xrange")
        for step in range(1, 40):
            await here.append("t", "step", {"n": step})
            await asyncio.sleep(0)  # the follower may take each event as it comes
        await here.append("t", TERMINAL_EVENT, {})
        events = await follower.all()
        after = await command_calls(client, "xread"), await command_calls(client, "xrange")
    assert ids(events) == list(range(1, 42))
    assert [e.data for e in events[:2]] == [{"n": 0}, {"n": 1}]
    assert after[0] == before[0], "no XREAD while this process writes the stream"
    assert after[1] - before[1] <= 2, "memory, not a read per event"


async def test_events_another_process_appends_in_between_are_not_missed(
    redis_pair: tuple[RedisEventLog, RedisEventLog, Redis],
) -> None:
    here, elsewhere, _ = redis_pair
    with here.writing("t"):
        follower = asyncio.create_task(collect(here, "t"))
        await here.append("t", "mine", {})
        await elsewhere.append("t", "theirs", {})  # a gap in this process's memory
        await here.append("t", "mine", {})
        await elsewhere.append("t", "theirs", {})  # nothing follows it here: found idle
        await elsewhere.append("t", TERMINAL_EVENT, {})
        events = await follower
    assert [(e.id, e.name) for e in events] == [
        (1, "mine"),
        (2, "theirs"),
        (3, "mine"),
        (4, "theirs"),
        (5, TERMINAL_EVENT),
    ]


async def test_followers_read_redis_again_once_the_leg_here_ends(
    redis_pair: tuple[RedisEventLog, RedisEventLog, Redis],
) -> None:
    """The next execution may run in another process: its events come from Redis."""
    here, elsewhere, client = redis_pair
    with here.writing("t"):
        await here.append("t", "status", {"status": "waiting_for_approval"})
        follower = Follower(here, "t")
        assert (await follower.next()).id == 1
    assert await blocked_readers_once_blocking(client) == 1, "the watch reads it now"
    await elsewhere.append("t", "status", {"status": "running"})
    await elsewhere.append("t", TERMINAL_EVENT, {})
    events = await follower.all()
    assert [e.name for e in events] == ["status", "status", TERMINAL_EVENT]
    assert "t" not in here._recent, "memory of the stream is let go once it closes"


async def test_a_late_follower_of_a_stream_written_here_replays_from_redis(
    redis_pair: tuple[RedisEventLog, RedisEventLog, Redis],
) -> None:
    here, _, _ = redis_pair
    with here.writing("t"):
        for step in range(300):  # more than memory keeps, more than a page
            here.emit("t", "step", {"n": step})
        await here.append("t", "step", {"n": 300})
        follower = asyncio.create_task(collect(here, "t"))
        await here.append("t", TERMINAL_EVENT, {})
        events = await follower
    assert ids(events) == list(range(1, 303))


# -- Redis: followers of streams other processes write ---------------------------------


async def test_followers_of_streams_written_elsewhere_share_one_blocking_read(
    redis_pair: tuple[RedisEventLog, RedisEventLog, Redis],
) -> None:
    """An API replica following many workers' runs: one connection, not one per follower."""
    here, elsewhere, client = redis_pair
    streams = [f"run-{i}" for i in range(20)]
    followers = [asyncio.create_task(collect(here, s)) for s in streams for _ in range(2)]
    # They wait, and the watch blocks on their streams.
    assert await blocked_readers_once_blocking(client) == 1
    before = await command_calls(client, "xread")
    for step in range(5):
        await asyncio.gather(*(elsewhere.append(s, "step", {"n": step}) for s in streams))
    await asyncio.gather(*(elsewhere.append(s, TERMINAL_EVENT, {}) for s in streams))
    results = await asyncio.gather(*followers)
    reads = await command_calls(client, "xread") - before
    for events in results:
        assert [(e.id, e.name) for e in events] == [
            *((n, "step") for n in range(1, 6)),
            (6, TERMINAL_EVENT),
        ]
        assert [e.data for e in events[:2]] == [{"n": 0}, {"n": 1}]
    # Redis answers a blocked read as soon as the first append of a batch lands, so a
    # batch takes a read or two; a read per follower would be 240 (40 followers x 6).
    assert reads <= 3 * 6 + 1, f"a read or two per batch of appends for all 40, not {reads}"


async def test_a_follower_joining_a_blocked_read_gets_its_events_without_waiting_it_out(
    redis_url: str,
) -> None:
    # Followers that never read the stream again on their own, a watch whose read would
    # block for 600 s: only an unblocked read brings the second follower its events.
    async with log_pair(redis_url, recheck_s=600.0, block_ms=600_000) as (here, elsewhere, client):
        first = Follower(here, "first")
        assert await blocked_readers_once_blocking(client) == 1  # the watch, on `first` alone
        own_reads = await command_calls(client, "xrange")
        second = Follower(here, "second")
        await calls_reach(client, "xrange", own_reads + 1)  # it read the stream once: empty
        await elsewhere.append("second", "step", {})
        await elsewhere.append("second", TERMINAL_EVENT, {})
        assert ids(await second.all()) == [1, 2]
        await elsewhere.append("first", TERMINAL_EVENT, {})
        assert ids(await first.all()) == [1]


async def test_the_watch_takes_over_a_stream_once_the_leg_here_ends(redis_url: str) -> None:
    """The run waits for approval here; its next execution runs in another process."""
    async with log_pair(redis_url, recheck_s=600.0) as (here, elsewhere, client):
        with here.writing("t"):
            follower = Follower(here, "t")
            await here.append("t", "status", {"status": "waiting_for_approval"})
            assert (await follower.next()).id == 1
            assert await blocked_readers(client) == 0, "nothing to read: the stream is written here"
        assert await blocked_readers_once_blocking(client) == 1, "the watch reads it now"
        await elsewhere.append("t", "status", {"status": "running"})
        await elsewhere.append("t", TERMINAL_EVENT, {})
        events = await follower.all()
    assert [(e.id, e.name) for e in events] == [(1, "status"), (2, "status"), (3, TERMINAL_EVENT)]


async def test_followers_read_for_themselves_while_the_shared_read_fails(redis_url: str) -> None:
    """The shared read's connection is refused (nothing listens there); the log's own works."""
    unreachable = Redis.from_url(f"redis://127.0.0.1:{free_port()}/0")
    try:
        async with log_pair(redis_url, follow_client=unreachable, recheck_s=0.05) as pair:
            here, elsewhere, _ = pair
            follower = Follower(here, "t")
            await elsewhere.append("t", "step", {})
            await elsewhere.append("t", TERMINAL_EVENT, {})
            assert ids(await follower.all()) == [1, 2]
    finally:
        await unreachable.aclose()


async def test_a_late_follower_of_a_long_stream_written_elsewhere_gets_all_of_it(
    redis_pair: tuple[RedisEventLog, RedisEventLog, Redis],
) -> None:
    here, elsewhere, _ = redis_pair
    for step in range(700):  # pages of history, then live events
        elsewhere.emit("t", "step", {"n": step})
    await elsewhere.append("t", "step", {"n": 700})
    follower = asyncio.create_task(collect(here, "t"))
    early = asyncio.create_task(collect(here, "t", after=650))
    for step in range(701, 720):
        await elsewhere.append("t", "step", {"n": step})
    await elsewhere.append("t", TERMINAL_EVENT, {})
    async with asyncio.timeout(10):
        assert ids(await follower) == list(range(1, 722))
        assert ids(await early) == list(range(651, 722))


async def test_a_batch_of_appends_fails_only_where_a_stream_cannot_take_it(
    redis_pair: tuple[RedisEventLog, RedisEventLog, Redis],
) -> None:
    """One script call appends a batch of many streams: a bad key fails its events alone."""
    here, _, client = redis_pair
    await client.set(here._key("broken"), "not a stream")
    emitted = [
        here.emit(thread, "step", {"n": n}) for n in range(3) for thread in ("a", "broken", "b")
    ]
    outcomes = await asyncio.gather(*emitted, return_exceptions=True)
    assert outcomes[0::3] == [1, 2, 3]  # "a"
    assert outcomes[2::3] == [1, 2, 3]  # "b"
    assert all("WRONGTYPE" in str(outcome) for outcome in outcomes[1::3])
    assert ids(await here.read("a")) == ids(await here.read("b")) == [1, 2, 3]


async def test_a_batch_larger_than_one_script_call_keeps_every_streams_order(
    redis_pair: tuple[RedisEventLog, RedisEventLog, Redis],
) -> None:
    here, _, _ = redis_pair
    count = 3 * redis_events._APPEND_CHUNK + 7
    emitted = [here.emit(f"t{n % 5}", "step", {"n": n}) for n in range(count)]
    assert await asyncio.gather(*emitted) == [n // 5 + 1 for n in range(count)]
    events = await here.read("t3")
    assert [event.data["n"] for event in events] == list(range(3, count, 5))


async def test_appends_go_on_after_the_server_forgot_the_script(
    redis_pair: tuple[RedisEventLog, RedisEventLog, Redis],
) -> None:
    here, _, client = redis_pair
    await here.append("t", "step", {})
    await client.script_flush()  # as a restarted server has
    assert (await here.append("t", "step", {})).id == 2


async def test_an_event_emitted_again_under_its_key_is_stored_once(
    redis_log: RedisEventLog,
) -> None:
    first = [redis_log.emit("t", "note", {"n": n}, key=f"step#{n}") for n in range(2)]
    # A retried execution runs the step again: the same keys, then one event further.
    again = [redis_log.emit("t", "note", {"n": n}, key=f"step#{n}") for n in range(3)]
    assert await asyncio.gather(*first) == [1, 2]
    assert await asyncio.gather(*again) == [1, 2, 3]
    events = await redis_log.read("t")
    assert [(e.id, e.data) for e in events] == [(1, {"n": 0}), (2, {"n": 1}), (3, {"n": 2})]


async def test_a_leg_stores_nothing_after_a_lost_event_or_a_failed_checkpoint_write(
    redis_log: RedisEventLog,
) -> None:
    with redis_log.writing("t"):
        assert await redis_log.emit("t", "note", {"n": 0}) == 1
        async with redis_log.ordered("t"):
            pass  # a checkpoint write after its events
        with pytest.raises(ConnectionError):
            async with redis_log.ordered("t"):
                raise ConnectionError("the write timed out")
        later = redis_log.emit("t", "note", {"n": 1})
        with pytest.raises(ConnectionError):
            await later
    # The next execution (a retry) starts clean.
    with redis_log.writing("t"):
        assert await redis_log.emit("t", "note", {"n": 1}) == 2
    assert [e.data for e in await redis_log.read("t")] == [{"n": 0}, {"n": 1}]


async def test_a_lost_event_fails_the_checkpoint_write_after_it(
    redis_log: RedisEventLog, redis_url: str
) -> None:
    blocker = Redis.from_url(redis_url)
    try:
        with redis_log.writing("t"):
            await blocker.set(redis_log._key("t"), "not a stream")  # the append fails
            lost = redis_log.emit("t", "note", {"n": 0})
            with pytest.raises(Exception, match="WRONGTYPE"):
                await lost
            await blocker.delete(redis_log._key("t"))
            written = False
            with pytest.raises(Exception, match="WRONGTYPE"):
                async with redis_log.ordered("t"):
                    written = True
            assert not written
            with pytest.raises(Exception, match="WRONGTYPE"):
                await redis_log.emit("t", "note", {"n": 1})
        assert await redis_log.read("t") == []
    finally:
        await blocker.aclose()
