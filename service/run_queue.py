"""Runs as jobs on a Redis queue (saq), executed by workers in any process.

One saq job per thread, keyed by its id, carries the thread's next execution. A worker
holds the run under a lease (a Redis lock) that its heartbeat renews with the job's, so
two deliveries never execute at once. A dead worker's jobs are requeued by the sweep
(`service.saq_queue`) once their lease lapses; a stopping worker hands its jobs back;
cancel aborts the job.
"""

import asyncio
import contextlib
import logging
import signal
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, cast

from redis.exceptions import LockError
from saq import Job, Queue, Worker
from saq.job import TERMINAL_STATUSES

from service.errors import InvalidState, TooManyRuns
from service.execution import RunExecutor, RunInput, caused
from service.saq_queue import ResearchQueue, lease_key
from stores.redis_outage import AWAY, Outage
from stores.registry import Registry

if TYPE_CHECKING:
    from saq.types import PartialTimersDict, WorkerInfo

    from stores.redis_batches import RedisBatches

logger = logging.getLogger(__name__)

# The job function's name, as queued jobs in Redis carry it.
JOB_FUNCTION = "research_leg"
# Attempts per job: each worker death or stop costs one; a job that keeps killing its
# worker is given up (the run stays `running` until `recover` queues it again).
JOB_ATTEMPTS = 20
# How long a finished job's record stays readable (for cancel and debugging).
JOB_TTL_S = 600
# How long cancel waits for the worker that holds the run to stop it.
STOP_WAIT_S = 10.0
# How often cancel looks whether the job it aborted has closed.
CLOSE_POLL_S = 0.05
# How long a worker's wait for a job blocks on Redis before it asks again.
DEQUEUE_WAIT_S = 30.0
# Look for abandoned jobs and due retries every second, for aborts four times a second
# (saq's type says int; a fraction works).
TIMERS: "PartialTimersDict" = {
    "sweep": 1,
    "abort": 0.25,  # type: ignore[typeddict-item]
    "schedule": 1,
    "worker_info": 10,
}


class LeaseBusy(RuntimeError):
    """Another worker still holds the run: the queue retries this job later."""


class QueueLauncher:
    """Hands runs to workers through the queue; cancels them with saq's abort."""

    def __init__(self, queue: ResearchQueue, capacity: int, lease_seconds: int) -> None:
        self._queue = queue
        self._capacity = capacity
        self._lease = lease_seconds

    @contextlib.asynccontextmanager
    async def reserve(self, thread_id: str) -> AsyncIterator[None]:
        """Hold a place for the thread's new run until its job is queued; TooManyRuns if full.

        Decided in one Redis script, atomically across API processes; queuing the job
        takes the place in the same step, so no other request sees it held twice.
        """
        held = await self._queue.reserve(thread_id, self._capacity)
        if held < 0:
            raise TooManyRuns(f"{-held} runs are queued or running, the limit: retry later")
        try:
            yield
        finally:
            await self._queue.release(thread_id)

    def _job(self, thread_id: str, run_input: RunInput) -> Job:
        return Job(
            function=JOB_FUNCTION,
            kwargs={"thread_id": thread_id, **run_input.model_dump(mode="json")},
            key=thread_id,
            timeout=0,  # research takes as long as it takes; the heartbeat guards it
            heartbeat=self._lease,
            retries=JOB_ATTEMPTS,
            retry_delay=0.0,  # a swept job goes straight back to the queue
            ttl=JOB_TTL_S,
        )

    async def launch(self, thread_id: str, run_input: RunInput) -> None:
        """Queue the job; wait a moment for the thread's previous job to close first."""
        job = self._job(thread_id, run_input)
        for _ in range(5):
            if await self._queue.enqueue(job):
                return
            # The thread's previous job has recorded the run's stop but is not closed yet.
            await self._wait_closed(thread_id, 1.0)
        raise InvalidState("the run's previous step is still closing: retry in a moment")

    async def ensure_running(self, thread_id: str) -> None:
        """Queue a continuation unless the thread already has an unfinished job."""
        # Refused when the thread has a job already, which is then someone's to finish.
        await self._queue.enqueue(self._job(thread_id, RunInput(recovered=True)))

    async def requeue_lost(self, registry: Registry, quiet_for_s: float) -> list[str]:
        """Queue again the active runs that no job carries any more; return their ids.

        Runs whose status changed within `quiet_for_s` are left alone: their job may be on
        its way.
        """
        cutoff = datetime.now(UTC) - timedelta(seconds=quiet_for_s)
        quiet = [r.thread_id for r in await registry.active() if r.updated_at < cutoff]
        if not quiet:
            return []
        jobs = await self._queue.jobs(quiet)
        lost = [
            t
            for t, job in zip(quiet, jobs, strict=True)
            if job is None or job.status in TERMINAL_STATUSES
        ]
        for thread_id in lost:
            await self.ensure_running(thread_id)
        return lost

    async def keep_requeuing_lost(self, registry: Registry) -> None:
        """Queue lost runs again once per lease period, for as long as the worker runs."""
        while True:
            await asyncio.sleep(self._lease)
            try:
                async with self._queue.outage.tolerated():  # away: told once, tried next period
                    if lost := await self.requeue_lost(registry, self._lease):
                        logger.warning("queued %d lost runs again: %s", len(lost), lost)
            except Exception as exc:
                logger.warning("could not look for lost runs: %s", exc)

    async def stop(self, thread_id: str) -> None:
        """Abort the thread's job and wait until its worker has stopped it."""
        job = await self._queue.job(thread_id)
        if job is None or job.status in TERMINAL_STATUSES:
            return
        await job.abort("cancelled by its owner")
        await self._wait_closed(thread_id, STOP_WAIT_S)

    async def _wait_closed(self, thread_id: str, seconds: float) -> None:
        """Poll the job until it is closed (or gone), for at most `seconds`.

        Not saq's `refresh(until_complete=)`: it misses a close between its read and its
        subscription.
        """
        deadline = asyncio.get_running_loop().time() + seconds
        while True:
            job = await self._queue.job(thread_id)
            if job is None or job.status in TERMINAL_STATUSES:
                return
            if asyncio.get_running_loop().time() >= deadline:
                logger.info("job of %s did not close within %.1f s", thread_id, seconds)
                return
            await asyncio.sleep(CLOSE_POLL_S)

    async def close(self) -> None:
        """Do nothing: the workers keep the runs."""


class JobRunner:
    """The job function: one execution of a thread, under the run's lease."""

    def __init__(self, executor: RunExecutor, batches: "RedisBatches", lease_seconds: int) -> None:
        self._executor = executor
        self._batches = batches
        self._lease = lease_seconds

    async def run(
        self,
        ctx: dict[str, Any],
        *,
        thread_id: str,
        **run_input: Any,
    ) -> None:
        """Execute the thread (`run_input`: a `RunInput`'s fields) while holding the run's lease."""
        job: Job = ctx["job"]
        lease = self._batches.lock(
            lease_key(thread_id),
            timeout=self._lease,
            # A dead holder's lease runs out within `timeout`: wait that long, plus slack.
            blocking_timeout=self._lease + 2,
            thread_local=False,
        )
        if not await lease.acquire():
            raise LeaseBusy(f"another worker holds run {thread_id}")
        execution = asyncio.current_task()
        assert execution is not None
        beat = asyncio.create_task(self._heartbeat(job, lease, execution))
        try:
            parsed = RunInput.model_validate(run_input)
            if job.attempts > 1:  # a second attempt: the first one's worker stopped or died
                parsed = parsed.model_copy(update={"recovered": True})
            await self._executor.execute(thread_id, parsed)
        finally:
            beat.cancel()
            await asyncio.gather(beat, return_exceptions=True)
            try:
                with contextlib.suppress(LockError):  # expired, or taken over: not ours now
                    await lease.release()
            except AWAY as exc:  # it lapses on its own within the lease's time
                logger.warning("lease on %s not released (%s): it lapses", thread_id, exc)

    async def _heartbeat(self, job: Job, lease: Any, execution: "asyncio.Task[Any]") -> None:
        """Renew the job's heartbeat and the lease; stop the execution if the lease is lost."""
        while True:
            await asyncio.sleep(self._lease / 3)
            try:
                await job.update()
                await lease.extend(self._lease, replace_ttl=True)
            except LockError:
                logger.warning("lost the lease on %s: stopping its execution", job.key)
                execution.cancel()
                return
            except AWAY as exc:  # Redis away for a moment: try again next beat
                cast(ResearchQueue, job.get_queue()).outage.failed(exc)
            except Exception as exc:
                logger.warning("heartbeat of %s failed: %s", job.key, exc)


class ResearchWorker(Worker[Any]):
    """saq's worker whose periodic work skips its rounds quietly while Redis is away.

    Redis going and coming back is logged once each (`Outage`), not a traceback per round.
    """

    @property
    def outage(self) -> Outage:
        """The outage its upkeep and its queue report to."""
        return cast(ResearchQueue, self.queue).outage

    async def stop(self) -> None:
        """Stop as saq does, handing each stopped job back with one try.

        A retry that waited for Redis made a stop during an outage last as long as it; a
        job not handed back is left to a sweep.
        """
        cast(ResearchQueue, self.queue).stopping = True
        await super().stop()

    async def abort(self, abort_threshold: float) -> None:
        """Run saq's round of aborts; none while Redis is away."""
        async with self.outage.tolerated(confirms=False):
            await super().abort(abort_threshold)

    async def schedule(self, lock: int = 1) -> None:
        """Run saq's round of scheduled jobs; none while Redis is away."""
        async with self.outage.tolerated():
            await super().schedule(lock)

    async def worker_info(self, ttl: int = 60) -> "WorkerInfo":
        """Renew this worker's record as saq does; while Redis is away, skip the round."""
        try:
            info = await super().worker_info(ttl)
        except AWAY as exc:
            self.outage.failed(exc)
            return cast("WorkerInfo", {})
        self.outage.answered()
        return info


class EmbeddedWorker(ResearchWorker):
    """A worker inside the API process: the server, not saq, handles the signals."""

    SIGNALS: list[signal.Signals] = []


class QuietRetries(logging.Filter):
    """Turn saq's "Error processing job" for a job Redis being away stopped into one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Turn the record into a warning without traceback when Redis caused it."""
        failure = record.exc_info[1] if record.exc_info else None
        if (
            failure is not None
            and str(record.msg).startswith("Error processing job")
            and caused(failure, lambda e: isinstance(e, AWAY))
        ):
            job = record.args[0] if isinstance(record.args, tuple) and record.args else None
            record.levelno, record.levelname = logging.WARNING, "WARNING"
            record.msg = "job %s stopped while Redis was away (%s): it is queued again"
            record.args = (getattr(job, "key", job), failure)
            record.exc_info = record.exc_text = None
        return True


def research_worker(
    queue: Queue,
    executor: RunExecutor,
    batches: "RedisBatches",
    *,
    concurrency: int,
    lease_seconds: int,
    embedded: bool,
) -> Worker[Any]:
    """Return a saq worker that executes research runs from `queue`."""
    worker_class = EmbeddedWorker if embedded else ResearchWorker
    runner = JobRunner(executor, batches, lease_seconds)
    saq_log = logging.getLogger("saq")
    if not any(isinstance(f, QuietRetries) for f in saq_log.filters):
        saq_log.addFilter(QuietRetries())
    return worker_class(
        queue,
        functions=[(JOB_FUNCTION, runner.run)],
        concurrency=concurrency,
        timers=TIMERS,
        # Its BLMOVE returns within this, inside the client's command timeout (saq's
        # default, 0, blocks for ever and would time out instead).
        dequeue_timeout=DEQUEUE_WAIT_S,
    )
