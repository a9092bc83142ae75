"""Runs as jobs on a Redis queue (saq), executed by workers in any process.

One saq job per thread, keyed by its id, carries the thread's next leg. A worker holds
the run under a lease (a Redis lock) that its heartbeat renews together with the job's:

- a worker that dies (SIGKILL, lost machine) stops renewing; saq's sweep sees the job's
  heartbeat go stale and queues it again, and the next worker, once the dead one's lease
  has run out, continues the thread from its last checkpoint;
- a worker that stops (SIGTERM) hands its jobs back to the queue at once;
- cancel aborts the job, which reaches the task of the worker that holds it.

The lease also fences: two deliveries of the same leg can never execute at once.
"""

import asyncio
import logging
import signal
from typing import TYPE_CHECKING, Any

from redis.exceptions import LockError
from saq import Job, Queue, Worker
from saq.job import TERMINAL_STATUSES
from saq.queue.redis import RedisQueue

from app.errors import InvalidState, TooManyRuns
from app.execution import RunExecutor, RunInput

if TYPE_CHECKING:
    from redis.asyncio import Redis
    from saq.types import PartialTimersDict

logger = logging.getLogger(__name__)

QUEUE_NAME = "research"
JOB_FUNCTION = "research_leg"
# Attempts per leg: each worker death or stop costs one; a leg that keeps killing its
# worker is given up (the run stays `running` until `recover` adopts it again).
JOB_ATTEMPTS = 20
# How long a finished job's record stays readable (for cancel and debugging).
JOB_TTL_S = 600
# How long cancel waits for the worker that holds the run to stop it.
STOP_WAIT_S = 10.0
# saq's sweep waits this long for an abandoned job's worker to confirm the abort before
# queuing it again (saq's default, 5 s, only adds to every takeover).
SWEEP_ABORT_WAIT_S = 0.5
# Look for abandoned jobs, aborts and due retries every second: takeovers and cancels are quick.
TIMERS: "PartialTimersDict" = {"sweep": 1, "abort": 1, "schedule": 1, "worker_info": 10}


class ResearchQueue(RedisQueue):
    """saq's Redis queue with a shorter wait in the sweep of abandoned jobs."""

    async def sweep(self, lock: int = 60, abort: float = SWEEP_ABORT_WAIT_S) -> list[str]:
        """Requeue abandoned jobs, waiting `abort` seconds for each one's abort."""
        return await super().sweep(lock, abort)


def research_queue(client: "Redis") -> ResearchQueue:
    """The queue of research legs on `client` (bytes responses, as saq expects)."""
    return ResearchQueue(client, name=QUEUE_NAME)


class LeaseBusy(RuntimeError):
    """Another worker still holds the run: the queue retries this leg later."""


class QueueLauncher:
    """Hands legs to workers through the queue; cancels them with saq's abort."""

    def __init__(self, queue: Queue, capacity: int, lease_seconds: int) -> None:
        self._queue = queue
        self._capacity = capacity
        self._lease = lease_seconds

    async def ensure_capacity(self) -> None:
        """Raise TooManyRuns when the queue holds as many unfinished runs as allowed."""
        waiting = await self._queue.count("incomplete")
        if waiting >= self._capacity:
            raise TooManyRuns(f"{waiting} runs are queued or running, the limit: retry later")

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
        """Queue the leg; wait a moment for the thread's previous job to close first."""
        job = self._job(thread_id, run_input)
        for _ in range(5):
            if await self._queue.enqueue(job):
                return
            # The thread's previous job has settled the run but is not closed yet.
            await self._wait_closed(thread_id, 1.0)
        raise InvalidState("the run's previous step is still closing: retry in a moment")

    async def adopt(self, thread_id: str) -> None:
        """Queue a continuation unless the thread already has an unfinished job."""
        # Refused when the thread has a job already, which is then someone's to finish.
        await self._queue.enqueue(self._job(thread_id, RunInput(recovered=True)))

    async def stop(self, thread_id: str) -> None:
        """Abort the thread's job and wait until its worker has stopped it."""
        job = await self._queue.job(thread_id)
        if job is None or job.status in TERMINAL_STATUSES:
            return
        await job.abort("cancelled by its owner")
        await self._wait_closed(thread_id, STOP_WAIT_S)

    async def _wait_closed(self, thread_id: str, seconds: float) -> None:
        job = await self._queue.job(thread_id)
        if job is None or job.status in TERMINAL_STATUSES:
            return
        try:
            await job.refresh(until_complete=seconds)
        except (TimeoutError, RuntimeError):  # still open, or its record expired
            logger.info("job of %s did not close within %.1f s", thread_id, seconds)

    async def close(self) -> None:
        """Nothing runs here: the workers keep the runs."""


class LegRunner:
    """The job function: one leg of a thread, under the run's lease."""

    def __init__(self, executor: RunExecutor, client: "Redis", lease_seconds: int) -> None:
        self._executor = executor
        self._client = client
        self._lease = lease_seconds

    async def run(
        self,
        ctx: dict[str, Any],
        *,
        thread_id: str,
        decision: dict[str, Any] | None = None,
        after: str | None = None,
        recovered: bool = False,
    ) -> None:
        """Execute the leg while holding the run's lease."""
        job: Job = ctx["job"]
        lease = self._client.lock(
            f"research:lease:{thread_id}",
            timeout=self._lease,
            # A dead holder's lease runs out within `timeout`: wait that long, plus slack.
            blocking_timeout=self._lease + 2,
            thread_local=False,
        )
        if not await lease.acquire():
            raise LeaseBusy(f"another worker holds run {thread_id}")
        leg = asyncio.current_task()
        assert leg is not None
        beat = asyncio.create_task(self._heartbeat(job, lease, leg))
        try:
            # A second attempt means the first one's worker stopped or died.
            retaken = recovered or job.attempts > 1
            run_input = RunInput(decision=decision, after=after, recovered=retaken)
            await self._executor.execute(thread_id, run_input)
        finally:
            beat.cancel()
            await asyncio.gather(beat, return_exceptions=True)
            try:
                await lease.release()
            except LockError:  # expired, or taken over: nothing of ours to release
                pass

    async def _heartbeat(self, job: Job, lease: Any, leg: "asyncio.Task[Any]") -> None:
        """Renew the job's heartbeat and the lease; stop the leg if the lease is lost."""
        while True:
            await asyncio.sleep(self._lease / 3)
            try:
                await job.update()
                await lease.extend(self._lease, replace_ttl=True)
            except LockError:
                logger.warning("lost the lease on %s: stopping this leg", job.key)
                leg.cancel()
                return
            except Exception as exc:  # Redis away for a moment: try again next beat
                logger.warning("heartbeat of %s failed: %s", job.key, exc)


class EmbeddedWorker(Worker[Any]):
    """A worker inside the API process: the server, not saq, handles the signals."""

    SIGNALS: list[signal.Signals] = []


def research_worker(
    queue: Queue,
    executor: RunExecutor,
    client: "Redis",
    *,
    concurrency: int,
    lease_seconds: int,
    embedded: bool,
) -> Worker[Any]:
    """A saq worker that executes research legs from `queue`."""
    worker_class = EmbeddedWorker if embedded else Worker
    runner = LegRunner(executor, client, lease_seconds)
    return worker_class(
        queue,
        functions=[(JOB_FUNCTION, runner.run)],
        concurrency=concurrency,
        timers=TIMERS,
    )
