"""saq's Redis queue, with a sweep that only requeues jobs that are really abandoned.

`ResearchQueue` also reserves places for runs about to be queued, atomically across
processes, waits for jobs on a client of its own, and sends saq's per-job commands through
shared pipelines (`stores.redis_batches`). What it copies of saq is fingerprinted in
`COPIED` (checked by `tests/test_upstream.py`).
"""

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from saq import Job
from saq.job import Status
from saq.queue.redis import RedisQueue
from saq.utils import millis, now

from core.upstream import Copied, require_version
from stores.redis_batches import BatchedLock, RedisBatches
from stores.redis_connection import awaited
from stores.redis_outage import AWAY, Outage

if TYPE_CHECKING:
    from redis.asyncio import Redis
    from redis.commands.core import AsyncScript

require_version("saq", "0.26.4", "0.27")
# saq's per-job commands (queue, read once dequeued, mark active, announce) in shared
# pipelines, against saq's own methods (dequeue on the waiting client either way).
_BATCHED = (
    "bench/service_load.py --backend both --runs 200, 8 A/B pairs in both orders, medians: "
    "http redis server CPU per run 34.9 ms with the copies, 39.9 ms with saq's own; "
    "runs/s 15.1 against 13.4; TTFE p50 1.8 s against 2.5 s"
)
COPIED = {
    # Abandoned jobs requeued from one snapshot, by lease, without saq's abort-and-wait.
    "saq.queue.redis.RedisQueue.sweep": Copied(
        "ac8aad56cb810ab0",
        "a burst of 200 runs (018e565): saq's sweep took 99 jobs from live workers and left "
        "a run stuck, this one none; the killed-worker drill of tests/test_workers.py "
        "(fb2d7ad): 20 orphans requeued 11.0-20.8 s after the kill and 40 runs restarted "
        "with saq's, 10.6 s and 20 with this one",
    ),
    "saq.queue.redis.RedisQueue.dequeue": Copied(
        "dc334b743beecf58",
        "bench/service_load.py --backend both --runs 200 (a0eaf9b): waiting on a client of "
        "its own, Redis server CPU per run 27.4 -> 19.6 ms; with 2 workers 23.8 -> 19.7 ms "
        "and 59.5 -> 73.2 runs/s",
    ),
    "saq.queue.redis.RedisQueue.notify": Copied("2bb3138f984741ef", _BATCHED),
    "saq.queue.redis.RedisQueue._update": Copied("f7c307f5b49724e9", _BATCHED),
    "saq.queue.redis.RedisQueue._get_job_by_id": Copied("73fbbd311ed4c41f", _BATCHED),
    "saq.queue.redis.RedisQueue._enqueue": Copied("3ce26b61ee7f3d1c", _BATCHED),
}

logger = logging.getLogger(__name__)

QUEUE_NAME = "research"

# saq 0.26's sweep script: under a lock of `lock` seconds, every job id in the active
# list with its stored job.
_ACTIVE_JOBS = """
local id_jobs = {}
if redis.call('EXISTS', KEYS[1]) == 0 then
    redis.call('SETEX', KEYS[1], ARGV[1], 1)
    for i, v in ipairs(redis.call('LRANGE', KEYS[2], 0, -1)) do
        id_jobs[i] = {v, redis.call('GET', v)}
    end
end
return id_jobs
"""


# saq 0.26's enqueue script: store and queue the job unless it is queued already, or
# its abort is still pending. Queued, the job takes the place reserved for it: it is
# never counted twice, as unfinished and as reserved.
_ENQUEUE = """
if not redis.call('ZSCORE', KEYS[1], KEYS[2]) and redis.call('EXISTS', KEYS[4]) == 0 then
    redis.call('SET', KEYS[2], ARGV[1])
    redis.call('ZADD', KEYS[1], ARGV[2], KEYS[2])
    redis.call('ZREM', KEYS[5], KEYS[2])
    if ARGV[2] == '0' then redis.call('RPUSH', KEYS[3], KEYS[2]) end
    return 1
else
    return nil
end
"""


# Reserve a place for one run's job, atomically across processes: the queue's unfinished
# jobs plus the places reserved (by requests that have not queued their job yet; a
# reservation of a process that died expires) must stay below the capacity.
_RESERVE = """
local now = tonumber(ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local held = redis.call('ZCARD', KEYS[1]) + redis.call('ZCARD', KEYS[2])
if held >= tonumber(ARGV[2]) then
    return -held
end
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[3]), ARGV[4])
return held + 1
"""
# A reservation is released when its request has queued its job; this bounds one whose
# process died first.
RESERVATION_TTL_MS = 30_000
# How long a job's retry or end waits for a Redis that is away before a sweep is left
# to take the job up.
OUTAGE_WAIT_S = 120.0
# How long the lock on handing a job back to the queue is held at most.
HANDBACK_LOCK_S = 10


def abandoned(job: Job) -> bool:
    """Return whether no worker drives this job of the active list any more.

    saq takes a job not yet marked active for abandoned, but under a burst a live worker
    marks it active only after a sweep; here the heartbeat must be silent for a period.
    """
    if job.status in (Status.ACTIVE, Status.ABORTING):
        return job.stuck
    return now() - max(job.touched, job.queued) > millis(job.heartbeat)


class ResearchQueue(RedisQueue):
    """saq's Redis queue whose sweep only requeues jobs that are really abandoned.

    `waiting`: the client that blocks waiting for jobs (with a longer socket timeout),
    apart from the one every other command uses.
    """

    _active_jobs: "AsyncScript | None" = None
    _reserve: "AsyncScript | None" = None

    def __init__(self, redis: "Redis", waiting: "Redis", name: str) -> None:
        super().__init__(redis, name=name)
        self._waiting = waiting
        # The places held for jobs about to be queued (`reserve`).
        self._reserved = self.namespace("reserved")
        # Every POST reserves a place and gives it back: a burst of them shares pipelines.
        self._commands = RedisBatches(redis)
        # Redis being away, as this process's queue and its worker's upkeep see it.
        self.outage = Outage("the run queue")
        # Set once its worker stops: a job's retry or finish then tries Redis once.
        self.stopping = False

    async def retry(self, job: Job, error: str | None) -> None:
        """Retry as saq does, waiting for Redis while it is away (up to `OUTAGE_WAIT_S`)."""
        retry = super().retry
        await self._persisted(lambda: retry(job, error), job, "queued again")

    async def finish(
        self,
        job: Job,
        status: Status,
        *,
        result: Any = None,
        error: str | None = None,
        **kwargs: Any,
    ) -> None:
        """Finish as saq does, waiting for Redis while it is away, as `retry` does."""
        finish = super().finish
        await self._persisted(
            lambda: finish(job, status, result=result, error=error, **kwargs), job, "closed"
        )

    async def _persisted(self, action: Callable[[], Awaitable[None]], job: Job, done: str) -> None:
        """Run `action` for `job`, waiting for Redis; past the wait, leave it to a sweep.

        Once Redis was away, a sweep may have taken the job up meanwhile (its heartbeat
        went silent, its lease lapsed): the action is tried again only if the stored job
        is still this execution's, read under the hand-back lock a sweep takes too, so
        that the job is handed back once and no second execution starts beside another.
        """
        execution = (job.attempts, job.started)  # saq's retry and finish clear `started`
        tries = 0

        async def once_ours() -> None:
            nonlocal tries
            tries += 1
            if tries == 1:
                await action()
                return
            async with self._handing_back(job):
                current = await self._get_job_by_id(job.id)
                if current is None or (current.attempts, current.started) != execution:
                    logger.warning(
                        "job %s was taken up while Redis was away: not %s", job.key, done
                    )
                    return
                await action()

        try:
            await self.outage.persist(once_ours, 0.0 if self.stopping else OUTAGE_WAIT_S)
        except AWAY as exc:
            logger.warning("job %s could not be %s (%s): a sweep takes it up", job.key, done, exc)

    def _handing_back(self, job: Job) -> BatchedLock:
        """Return the lock under which a job is judged and handed back to the queue."""
        return self._commands.lock(
            f"research:handback:{job.key}",
            timeout=HANDBACK_LOCK_S,
            blocking_timeout=HANDBACK_LOCK_S + 2,
            thread_local=False,
        )

    async def dequeue(self, timeout: float = 0.0, poll_interval: float = 0.0) -> Job | None:
        """Dequeue as saq does on Redis 6.2+ (the event log needs 7), on the waiting client."""
        job_id = await awaited(
            self._waiting.blmove(self._queued, self._active, timeout, "LEFT", "RIGHT")  # type: ignore[arg-type]
        )
        if job_id is not None:
            return await self._get_job_by_id(job_id)
        logger.debug("Dequeue timed out")
        return None

    async def notify(self, job: Job) -> None:
        """Announce the job's status on its channel, as saq does."""
        await self._announce(job)

    def _announce(self, job: Job) -> "asyncio.Future[Any]":
        return self._commands.command(lambda pipe: pipe.publish(job.id, job.status))

    async def _update(self, job: Job, status: Status | None = None, **kwargs: object) -> None:
        """Store the job with its status, then announce it, as saq does (one batch for both)."""
        if not status:
            stored = await self.job(job.key)
            status = stored.status if stored else None
        job.status = status or job.status
        serialized = self.serialize(job)
        # Both queued before either is awaited, and awaited together, so that a cancelled
        # update leaves no failure unretrieved.
        stored_now = self._commands.command(lambda pipe: pipe.set(job.id, serialized))
        await asyncio.gather(stored_now, self._announce(job))

    async def _get_job_by_id(self, job_id: bytes | str) -> Job | None:
        """Return the stored job, as saq does."""
        async with self._op_sem:
            return self.deserialize(await self._commands.command(lambda pipe: pipe.get(job_id)))

    async def _enqueue(self, job: Job) -> Job | None:
        """Queue the job unless it is queued already, as saq does; None if it was."""
        if self._enqueue_script is None:
            self._enqueue_script = self.redis.register_script(_ENQUEUE)
        keys = [self._incomplete, job.id, self._queued, job.abort_id, self._reserved]
        async with self._op_sem:
            queued = self._commands.call(
                self._enqueue_script, keys, [self.serialize(job), job.scheduled]
            )
            if not await queued:
                return None
        logger.info("Enqueuing %s", job.info(logger.isEnabledFor(logging.DEBUG)))
        return job

    async def reserve(self, job_key: str, capacity: int) -> int:
        """Hold a place for the job about to be queued; return the places held, negative if full.

        Queuing the job takes its place; `release` gives back one whose job was not queued.
        """
        if self._reserve is None:
            self._reserve = self.redis.register_script(_RESERVE)
        keys = [self._incomplete, self._reserved]
        args: list[int | str] = [now(), capacity, RESERVATION_TTL_MS, self.job_id(job_key)]
        return int(await self._commands.call(self._reserve, keys, args))

    async def release(self, job_key: str) -> None:
        """Give back a place held by `reserve` (none is left once the job was queued)."""
        job_id = self.job_id(job_key)
        await self._commands.command(lambda pipe: pipe.zrem(self._reserved, job_id))

    async def disconnect(self) -> None:
        """Close the pub/sub and both clients, whatever fails first (saq's stops at a failure)."""
        try:
            await super().disconnect()
        finally:
            try:
                await self.redis.connection_pool.disconnect()
            finally:
                if self._waiting is not self.redis:
                    await self._waiting.aclose()

    async def sweep(self, lock: int = 60, abort: float = 0) -> list[str]:
        """Return the jobs `_swept` requeued; none while Redis is away."""
        try:
            swept = await self._swept(lock)
        except AWAY as exc:
            self.outage.failed(exc)
            return []
        self.outage.answered()
        return swept

    async def _swept(self, lock: int) -> list[str]:
        """Requeue every abandoned job at once; the run's lease decides, not a confirmation.

        saq's sweep aborts each job and waits for a dead worker to confirm. Here jobs are
        judged from one snapshot, a job whose lease is held is left alone, and each other
        one is read again just before it is requeued (or, out of attempts, ended).
        """
        if self._active_jobs is None:
            self._active_jobs = self.redis.register_script(_ACTIVE_JOBS)
        id_jobs = await self._active_jobs(
            keys=[self._sweep, self._active], args=[lock], client=self.redis
        )
        swept: list[str] = []
        silent: list[Job] = []
        for job_id, job_bytes in id_jobs:
            job = self.deserialize(job_bytes)
            if job is None:  # its record expired: only its place in the lists is left
                pipe = self.redis.pipeline(transaction=True)
                pipe.lrem(self._active, 0, job_id)
                pipe.zrem(self._incomplete, job_id)
                await pipe.execute()
                swept.append(job_id.decode())
            elif abandoned(job):
                silent.append(job)
        held = await asyncio.gather(*(self._leased(job) for job in silent))
        orphans = [job for job, leased in zip(silent, held, strict=True) if not leased]
        taken = await asyncio.gather(*(self._recover(job) for job in orphans))
        return swept + [job.id for job, took in zip(orphans, taken, strict=True) if took]

    async def _leased(self, job: Job) -> bool:
        """Return whether the job's run lease is held: a worker still drives it."""
        return bool(await awaited(self.redis.exists(lease_key(job.key))))

    async def _recover(self, job: Job) -> bool:
        """Requeue (or end) an abandoned job, unless its record says otherwise now.

        Judged and handed back under the lock its own worker's delayed retry or finish
        takes (`_persisted`); once, without waiting for a Redis that is away.
        """
        async with self._handing_back(job):
            current = await self._get_job_by_id(job.id)
            if current is None or not abandoned(current):
                return False
            logger.warning("taking up abandoned job %s (its worker is gone)", job.key)
            if current.retryable:
                await super().retry(current, error=self.swept_error_message)
            else:
                await super().finish(current, Status.ABORTED, error=self.swept_error_message)
        return True


def lease_key(thread_id: str) -> str:
    """Return the Redis key of a run's lease: held by the worker executing it."""
    return f"research:lease:{thread_id}"


def research_queue(client: "Redis", waiting: "Redis") -> ResearchQueue:
    """Return the research queue: commands on `client`, waits for jobs on `waiting`."""
    return ResearchQueue(client, waiting, name=QUEUE_NAME)
