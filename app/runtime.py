"""Everything a service process runs research with: stores, executor, run manager (and the Redis queue)."""

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING

from app.composition import open_deps, page_policy
from app.settings import Settings
from app.stores import Stores, open_stores
from core.tasks import stop_all
from graph.builder import build_graph
from service.collections import CollectionLimits, Collections
from service.execution import RunExecutor
from service.launchers import LocalLauncher
from service.runs import RunManager
from service.signals import MemorySignals
from service.watches import Watches
from service.webhooks import WebhookSender

if TYPE_CHECKING:
    from saq import Queue

    from service.run_queue import QueueLauncher


@dataclass
class Runtime:
    """The stores, the executor and the manager of one process."""

    settings: Settings
    stores: Stores
    executor: RunExecutor
    manager: RunManager
    queue: "Queue | None" = None
    queued: "QueueLauncher | None" = None
    webhooks: WebhookSender | None = None
    watches: Watches = field(init=False)

    def __post_init__(self) -> None:
        # Several processes schedule on Redis: a claimed refresh is its claimant's to
        # start for a few leases before another takes it over.
        grace = 0.0 if self.queue is None else 3.0 * self.settings.worker_lease_seconds
        self.watches = Watches(
            self.manager,
            self.stores.watches,
            min_every=timedelta(seconds=self.settings.watch_min_seconds),
            claim_grace_s=grace,
            deliver=self.webhooks.deliver if self.webhooks else None,
            check_url=self.webhooks.check if self.webhooks else None,
            delivery_lease_s=self.webhooks.lease_s if self.webhooks else 60.0,
        )


@asynccontextmanager
async def open_runtime(settings: Settings) -> AsyncIterator[Runtime]:
    """Open the process's runtime (the engine and tools first, then the stores)."""
    async with AsyncExitStack() as stack:
        # The engine and tools first: a missing key or corpus stops before any store is written.
        deps = await stack.enter_async_context(open_deps(settings))
        stores = await stack.enter_async_context(open_stores(settings))
        graph = build_graph(stores.saver)
        collections = _collections(settings, stores)
        # Webhooks obey the scraper's SSRF rules (`page_allow_private`, `page_allowed_ports`).
        webhooks = WebhookSender(
            page_policy(settings), stores.watches, settings.watch_webhook_retry_s
        )
        stack.push_async_callback(webhooks.close)
        if stores.redis is None:
            executor = RunExecutor(
                graph,
                deps,
                stores.events,
                stores.registry,
                MemorySignals(),
                (),
                stores.evidence,
                collections,
            )
            launcher = LocalLauncher(
                executor, settings.max_concurrent_runs, settings.max_queued_runs
            )
            manager = RunManager(executor, launcher, stores.saver.adelete_thread)
            yield Runtime(settings, stores, executor, manager, webhooks=webhooks)
            return

        from redis.exceptions import ConnectionError as RedisConnectionError
        from redis.exceptions import TimeoutError as RedisTimeoutError

        from service.run_queue import DEQUEUE_WAIT_S, QueueLauncher
        from service.saq_queue import research_queue
        from stores.redis_connection import redis_client
        from stores.redis_signals import RedisSignals

        assert settings.redis_url is not None
        signals = RedisSignals(stores.redis)
        stack.push_async_callback(signals.aclose)
        transient = (RedisConnectionError, RedisTimeoutError)
        executor = RunExecutor(
            graph,
            deps,
            stores.events,
            stores.registry,
            signals,
            transient,
            stores.evidence,
            collections,
        )
        # saq's own clients: one for its commands, and one whose connections block waiting
        # for jobs (one per worker slot), with a socket timeout that allows for the wait.
        queue = research_queue(
            redis_client(settings.redis_url, max_connections=64),
            redis_client(
                settings.redis_url,
                max_connections=settings.max_concurrent_runs + 8,
                blocking_s=DEQUEUE_WAIT_S,
            ),
        )
        stack.push_async_callback(_disconnect, queue)
        capacity = settings.max_concurrent_runs + settings.max_queued_runs
        queued = QueueLauncher(queue, capacity, settings.worker_lease_seconds)
        manager = RunManager(executor, queued, stores.saver.adelete_thread, sole_writer=False)
        yield Runtime(settings, stores, executor, manager, queue, queued, webhooks)


def _collections(settings: Settings, stores: Stores) -> Collections | None:
    """Return the keys' collections, searched through indexes under the data directory."""
    if stores.collections is None:
        return None
    limits = CollectionLimits(
        max_file_bytes=settings.collection_max_file_bytes,
        max_files=settings.collection_max_files,
        max_documents=settings.collection_max_documents,
        max_collections=settings.collection_max_collections,
    )
    return Collections(stores.collections, settings.collections_dir, limits)


async def _disconnect(queue: "Queue") -> None:
    """Close the queue's connections; a Redis gone or stalled has nothing left to close."""
    from stores.redis_outage import AWAY

    with contextlib.suppress(*AWAY):
        await queue.disconnect()


@asynccontextmanager
async def running_worker(
    runtime: Runtime, embedded: bool = True
) -> AsyncIterator["asyncio.Task[None]"]:
    """Run a queue worker, and the task that requeues lost runs, while the context lasts; yield the worker's task."""
    queue, queued, redis = runtime.queue, runtime.queued, runtime.stores.redis
    if queue is None or queued is None or redis is None:
        raise RuntimeError("workers need RESEARCH_REDIS_URL: without it runs execute here")
    from service.run_queue import research_worker

    settings = runtime.settings
    worker = research_worker(
        queue,
        runtime.executor,
        redis,
        concurrency=settings.max_concurrent_runs,
        lease_seconds=settings.worker_lease_seconds,
        embedded=embedded,
    )
    task = asyncio.create_task(worker.start(), name="research-worker")
    requeuing = asyncio.create_task(queued.keep_requeuing_lost(runtime.stores.registry))
    # Every worker schedules watches; each step is a compare-and-set, so one wins it.
    scheduling = asyncio.create_task(runtime.watches.run(settings.watch_poll_seconds))
    try:
        yield task
    finally:
        await worker.stop()
        await stop_all((task, requeuing, scheduling))
