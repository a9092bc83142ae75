"""The Redis run queue's sweep against a real server: abandoned jobs only."""

import asyncio
import contextlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import redis
from redis.asyncio import Redis
from saq import Job
from saq.job import Status
from saq.utils import now

from service.errors import TooManyRuns
from service.execution import RunInput
from service.run_queue import JOB_FUNCTION, QueueLauncher
from service.saq_queue import ResearchQueue, abandoned, lease_key
from stores import redis_outage
from stores.redis_connection import redis_client
from stores.redis_registry import RedisRegistry
from stores.registry import RunStatus, ThreadRecord

from .redis_server import counting_client, redis_server, round_trips

HEARTBEAT_S = 5


@pytest.fixture
async def queue(redis_url: str) -> AsyncIterator[ResearchQueue]:
    # A queue of its own on the session's server.
    client = redis_client(redis_url)
    research = ResearchQueue(client, client, name=f"sweep-test-{now()}")
    yield research
    await research.disconnect()


def job(status: Status, touched_ago_s: float) -> Job:
    stamp = now() - int(touched_ago_s * 1000)
    return Job(
        JOB_FUNCTION, timeout=0, heartbeat=HEARTBEAT_S, status=status, touched=stamp, queued=stamp
    )


def test_a_job_is_abandoned_only_once_its_heartbeat_has_been_silent_a_whole_period() -> None:
    assert not abandoned(job(Status.QUEUED, 0.1)), "just moved to active by a worker"
    assert abandoned(job(Status.QUEUED, HEARTBEAT_S + 1)), "moved there by a worker that died"
    assert not abandoned(job(Status.ACTIVE, 1))
    assert abandoned(job(Status.ACTIVE, HEARTBEAT_S + 1))


async def test_the_sweep_leaves_a_job_a_worker_just_took_and_requeues_a_dead_ones(
    queue: ResearchQueue,
) -> None:
    taken = await queue.enqueue(
        JOB_FUNCTION, key="taken", timeout=0, heartbeat=HEARTBEAT_S, retries=3
    )
    assert taken is not None
    # What a worker's dequeue does first: move the job to the active list. saq's own sweep
    # aborts it right here, before the worker marks it active.
    assert await queue.dequeue(timeout=1) is not None
    assert await queue.sweep(lock=1) == []
    assert await queue.count("active") == 1

    # The worker died right there: its job stays untouched for longer than its heartbeat.
    stored = await queue.job("taken")
    assert stored is not None
    stored.touched = stored.queued = now() - (HEARTBEAT_S + 1) * 1000
    await queue.redis.set(stored.id, queue.serialize(stored))
    await queue.redis.delete(queue.namespace("sweep"))  # the lock that spaces sweeps
    assert await queue.sweep(lock=1) == [stored.id]
    again = await queue.job("taken")
    assert again is not None and again.status == Status.QUEUED
    assert await queue.count("queued") == 1 and await queue.count("active") == 0


async def test_the_sweep_takes_up_every_orphan_at_once_and_never_a_leased_job(
    queue: ResearchQueue,
) -> None:
    """A worker died holding four runs; another's two runs look silent but hold leases."""
    tag = now()
    orphans = [f"orphan-{tag}-{i}" for i in range(4)]
    leased = [f"leased-{tag}-{i}" for i in range(2)]
    for key in orphans + leased:
        assert await queue.enqueue(
            JOB_FUNCTION, key=key, timeout=0, heartbeat=HEARTBEAT_S, retries=3
        )
        taken = await queue.dequeue(timeout=1)
        assert taken is not None
        # Marked active by its worker, then silent for longer than a heartbeat period
        # (the survivor's two: its sweep read a snapshot that went stale meanwhile).
        taken.status = Status.ACTIVE
        taken.attempts = 1
        taken.touched = now() - (HEARTBEAT_S + 1) * 1000
        await queue.redis.set(taken.id, queue.serialize(taken))
    for key in leased:  # their worker renews their leases
        await queue.redis.set(lease_key(key), "worker-b", px=HEARTBEAT_S * 1000)
    try:
        swept = await queue.sweep(lock=1)
        assert sorted(swept) == sorted(queue.job_id(key) for key in orphans), "all, in one sweep"
        for key in orphans:
            job = await queue.job(key)
            assert job is not None and job.status == Status.QUEUED
        for key in leased:
            job = await queue.job(key)
            assert job is not None and job.status == Status.ACTIVE and job.attempts == 1
            assert not await queue.redis.exists(job.abort_id), "never asked to abort"
        assert await queue.count("active") == len(leased)
        await queue.redis.delete(queue.namespace("sweep"))
        assert await queue.sweep(lock=1) == [], "each taken up once"
    finally:
        await queue.redis.delete(*(lease_key(key) for key in leased))


async def test_a_retry_held_up_by_an_outage_leaves_a_job_a_sweep_took_up_meanwhile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Redis stops while a worker hands its job back; once Redis is back a sweep takes the
    silent job up and another execution starts before the worker's retry gets through: that
    retry must not queue the job a second time (two executions of one run side by side)."""
    monkeypatch.setattr(redis_outage, "PAUSE_S", (2.0, 2.0))  # the retry's tries, 2 s apart
    data = tmp_path / "redis"
    data.mkdir()
    with redis_server(data_dir=data) as url:
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        client = redis_client(url)
        queue = ResearchQueue(client, client, name="handback")
        assert await queue.enqueue(JOB_FUNCTION, key="run", timeout=0, heartbeat=1, retries=3)
        first = await queue.dequeue(timeout=1)
        assert first is not None
        first.status, first.attempts, first.started = Status.ACTIVE, 1, now()
        first.touched = now() - 2000  # its heartbeat silent for two periods by then
        await queue.redis.set(first.id, queue.serialize(first))
        with contextlib.suppress(redis.ConnectionError):
            redis.Redis.from_url(url).shutdown(save=True)
        handing_back = asyncio.create_task(queue.retry(first, error="Redis went away"))
        while not queue.outage.ongoing:  # its first try failed: it waits for Redis
            await asyncio.sleep(0.01)
        with redis_server(port=port, data_dir=data):
            assert await queue.sweep(lock=1) == [first.id]
            second = await queue.dequeue(timeout=1)
            assert second is not None
            second.status, second.attempts, second.started = Status.ACTIVE, 2, now()
            await queue.redis.set(second.id, queue.serialize(second))
            await handing_back
            stored = await queue.job("run")
            assert stored is not None
            assert (stored.status, stored.attempts) == (Status.ACTIVE, 2), "the second runs on"
            assert await queue.count("queued") == 0 and await queue.count("active") == 1
            await queue.disconnect()


async def test_active_runs_no_job_carries_are_queued_again(queue: ResearchQueue) -> None:
    registry = RedisRegistry(queue.redis, prefix=f"{queue.name}:")
    launcher = QueueLauncher(queue, capacity=10, lease_seconds=HEARTBEAT_S)
    long_ago = datetime.now(UTC) - timedelta(seconds=HEARTBEAT_S * 3)

    async def register(thread_id: str, status: RunStatus, at: datetime) -> None:
        await registry.create(
            ThreadRecord(
                thread_id=thread_id,
                owner="o",
                topic="t",
                status=status,
                created_at=at,
                updated_at=at,
                options={},
            )
        )

    await register("lost", "running", long_ago)  # its worker's job ran out of attempts
    await register("carried", "running", long_ago)  # a long execution, its job still running
    await launcher.launch("carried", RunInput())
    await register("just-started", "queued", datetime.now(UTC))  # its job is on its way
    await register("waiting", "waiting_for_approval", long_ago)  # nothing to execute

    assert await launcher.requeue_lost(registry, quiet_for_s=HEARTBEAT_S) == ["lost"]
    adopted = await queue.job("lost")
    assert adopted is not None and adopted.kwargs is not None
    job = dict(adopted.kwargs)
    assert job.pop("thread_id") == "lost"
    assert RunInput.model_validate(job) == RunInput(recovered=True), "a continuation"
    assert await launcher.requeue_lost(registry, quiet_for_s=HEARTBEAT_S) == [], "once only"


async def test_a_queued_run_holds_one_place_not_two(queue: ResearchQueue) -> None:
    """A run whose job is queued but whose request has not returned yet holds one place."""
    launcher = QueueLauncher(queue, capacity=2, lease_seconds=HEARTBEAT_S)
    async with launcher.reserve("first"):
        await launcher.launch("first", RunInput())
        # The first request is still inside its reservation: the second place is free.
        async with launcher.reserve("second"):
            with pytest.raises(TooManyRuns, match="2 runs are queued or running"):
                async with launcher.reserve("third"):
                    pass
    async with launcher.reserve("second"):
        pass  # never queued: its place comes back
    async with launcher.reserve("third"):
        await launcher.launch("third", RunInput())
    with pytest.raises(TooManyRuns, match="2 runs are queued or running"):
        async with launcher.reserve("fourth"):
            pass


async def info_calls(queue: ResearchQueue) -> int:
    """How many INFO commands the server had answered before this one."""
    stats = await queue.redis.info("commandstats")
    return int(stats.get("cmdstat_info", {}).get("calls", 0))


async def test_dequeue_slots_starting_at_once_ask_no_version(queue: ResearchQueue) -> None:
    for i in range(3):
        assert await queue.enqueue(JOB_FUNCTION, key=f"slot-{i}", timeout=0) is not None
    before = await info_calls(queue)
    taken = await asyncio.gather(*(queue.dequeue(timeout=1) for _ in range(3)))
    assert None not in taken
    assert await info_calls(queue) - before == 1, "only this count's own INFO"


async def test_a_jobs_update_stores_and_announces_it_in_one_round_trip(redis_url: str) -> None:
    client = counting_client(redis_url)
    queue = ResearchQueue(client, client, name=f"update-test-{now()}")
    listener = Redis.from_url(redis_url)
    pubsub = listener.pubsub()
    try:
        queued = await queue.enqueue(JOB_FUNCTION, key="updated", timeout=0)
        assert queued is not None
        await pubsub.subscribe(queued.id)
        round_trips()
        await queued.update(status=Status.ACTIVE)
        assert round_trips() == 1, "the SET and the PUBLISH go out together"
        async with asyncio.timeout(10):
            while (heard := await pubsub.get_message(True, timeout=1.0)) is None:
                pass
        assert heard["data"] == b"active"
        stored = await queue.job("updated")
        assert stored is not None and stored.status == Status.ACTIVE
    finally:
        await pubsub.aclose()  # type: ignore[no-untyped-call]
        await listener.aclose()
        await queue.disconnect()
