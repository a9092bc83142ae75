"""The watch scheduler's steps on the real stores, with several schedulers at once.

Several `Watches` over the same store stand for API replicas and workers ticking at the
same moment; a record left claimed but not started is what a kill between a claim and
its start leaves behind.
"""

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from app.runtime import Runtime, open_runtime, running_worker
from app.settings import Settings
from core.options import ResearchRequest
from service.collections import Upload
from service.thread_ids import LOCAL_OWNER
from service.watches import Watches, refresh_id, view
from stores.registry import TERMINAL

from .support import TOPIC

WAIT_S = 90.0


async def until(check: Callable[[], Awaitable[bool]], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not await check():
        assert time.monotonic() < deadline, f"gave up waiting: {what}"
        await asyncio.sleep(0.05)


@pytest.fixture
async def runtime(
    tmp_path: Path, corpus_index: Path, stores: dict[str, Any]
) -> AsyncIterator[Runtime]:
    settings = Settings(
        data_dir=tmp_path / "data",
        corpus_index=corpus_index,
        search_provider="local",
        watch_min_seconds=0.5,
        watch_poll_seconds=600,  # the worker's own scheduler ticks once, then stays out
        **stores,
    )
    async with AsyncExitStack() as stack:
        ready = await stack.enter_async_context(open_runtime(settings))
        if ready.queue is not None:
            await stack.enter_async_context(running_worker(ready))
        yield ready
        # The Redis server is the session's: leave no watch for the next test's ticks.
        for watch in await ready.stores.watches.of_owner(LOCAL_OWNER):
            await ready.stores.watches.delete(watch.thread_id)
        await ready.manager.shutdown()


async def finished(runtime: Runtime, thread_id: str) -> None:
    async def stopped() -> bool:
        record = await runtime.stores.registry.get(thread_id)
        return record is not None and record.status in TERMINAL

    await until(stopped, f"{thread_id} to stop")


async def threads(runtime: Runtime) -> list[str]:
    """The threads since the watched one (the newest first; other tests' are older)."""
    records, _ = await runtime.stores.registry.list(LOCAL_OWNER, 100)
    ids = [r.thread_id for r in records]
    return ids[: ids.index(WATCHED[0]) + 1]


WATCHED: list[str] = []


async def test_schedulers_ticking_at_once_start_one_refresh_and_record_it_once(
    runtime: Runtime,
) -> None:
    manager = runtime.manager
    watched = (await manager.start(LOCAL_OWNER, ResearchRequest(topic=TOPIC))).thread_id
    WATCHED[:] = [watched]
    await finished(runtime, watched)
    watch = await runtime.watches.watch(LOCAL_OWNER, watched, timedelta(seconds=1))
    schedulers = [Watches(manager, runtime.stores.watches) for _ in range(4)]
    due = watch.next_due + timedelta(seconds=1)

    await asyncio.gather(*(s.tick(due) for s in schedulers))
    claimed = await runtime.stores.watches.get(watched)
    assert claimed is not None and claimed.tick == 1 and claimed.current is not None
    assert sorted(await threads(runtime)) == sorted([watched, claimed.current])

    await finished(runtime, claimed.current)
    await asyncio.gather(*(s.tick(due) for s in schedulers))
    released = await runtime.stores.watches.get(watched)
    assert released is not None and released.current is None
    assert released.previous == claimed.current
    entries = await runtime.stores.watches.entries(watched)
    assert [e.seq for e in entries] == [1]


async def test_a_refresh_claimed_but_never_started_is_started_once_after_the_grace(
    runtime: Runtime,
) -> None:
    manager = runtime.manager
    watched = (await manager.start(LOCAL_OWNER, ResearchRequest(topic=TOPIC))).thread_id
    WATCHED[:] = [watched]
    await finished(runtime, watched)
    store = runtime.stores.watches
    watch = await runtime.watches.watch(LOCAL_OWNER, watched, timedelta(seconds=1))
    now = datetime.now(UTC)
    # What a claimant killed right after its claim leaves: claimed (the next refresh due
    # in a day), no thread.
    orphan = watch.model_copy(
        update={
            "tick": 1,
            "current": refresh_id(watch, 1),
            "claimed_at": now,
            "next_due": now + timedelta(days=1),
        }
    )
    assert await store.replace(watch, orphan) is not None

    patient = Watches(manager, store, claim_grace_s=60)
    await patient.tick(now + timedelta(seconds=1))  # its claimant may still be starting it
    assert await threads(runtime) == [watched]

    takers = [Watches(manager, store, claim_grace_s=60) for _ in range(3)]
    later = now + timedelta(seconds=61)
    await asyncio.gather(*(t.tick(later) for t in takers))
    assert sorted(await threads(runtime)) == sorted([watched, refresh_id(watch, 1)])
    await finished(runtime, refresh_id(watch, 1))
    await patient.tick(later)
    entries = await store.entries(watched)
    assert [(e.seq, e.status) for e in entries] == [(1, "completed")]


async def test_a_refresh_that_cannot_start_waits_for_the_next_due_time_and_says_why(
    runtime: Runtime, tmp_path: Path
) -> None:
    manager, store = runtime.manager, runtime.stores.watches
    collections = runtime.executor.collections
    assert collections is not None
    shelf = await collections.create(LOCAL_OWNER, f"shelf-{uuid.uuid4().hex[:8]}")
    notes = tmp_path / "notes.md"
    notes.write_text("# Printing\n\nThe printing press spread movable type across Europe.\n")
    await collections.add(LOCAL_OWNER, shelf.id, [Upload("notes.md", notes)])
    request = ResearchRequest.model_validate(
        {"topic": TOPIC, "options": {"collections": [shelf.id]}}
    )
    watched = (await manager.start(LOCAL_OWNER, request)).thread_id
    WATCHED[:] = [watched]
    await finished(runtime, watched)
    watch = await runtime.watches.watch(LOCAL_OWNER, watched, timedelta(seconds=60))
    await collections.delete(LOCAL_OWNER, shelf.id)

    due = watch.next_due + timedelta(seconds=1)
    scheduler = Watches(manager, store)
    await scheduler.tick(due)
    refused = await store.get(watched)
    assert refused is not None and refused.current is None and refused.tick == 0
    assert refused.refused is not None and "collection" in refused.refused
    assert refused.next_due > due  # tried again when next due, not at every tick
    await scheduler.tick(due + timedelta(seconds=1))
    assert await store.get(watched) == refused
    assert await threads(runtime) == [watched]
    assert view(await runtime.watches.get(LOCAL_OWNER, watched)).refused == refused.refused
