"""The service's stores (checkpoints, events, registry, evidence): the SQLite file, or Redis shared by replicas."""

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

from langgraph.checkpoint.base import BaseCheckpointSaver

from app.settings import Settings
from stores.collections import CollectionStore, FileCollectionStore
from stores.events import EventLog
from stores.evidence import EvidenceStore
from stores.registry import Registry, SqliteRegistry
from stores.sqlite_events import SqliteEventLog
from stores.sqlite_evidence import SqliteEvidenceStore
from stores.sqlite_saver import GroupCommitSqliteSaver
from stores.sqlite_writer import SqliteWriter, open_sqlite, open_sqlite_writer
from stores.watches import SqliteWatchStore, WatchStore

if TYPE_CHECKING:
    from stores.redis_batches import RedisBatches
    from stores.redis_flat_saver import FlatRedisSaver


@dataclass(frozen=True, slots=True)
class Stores:
    """Where a service keeps its state."""

    saver: BaseCheckpointSaver[str]
    events: EventLog
    registry: Registry
    evidence: EvidenceStore  # what runs read and asked (`stores.evidence`)
    watches: WatchStore  # watched threads and their refreshes' diffs (`stores.watches`)
    # The Redis stores' client, through the pipelines they share: for signals and leases.
    redis: "RedisBatches | None" = None
    # The keys' document collections (`stores.collections`).
    collections: CollectionStore | None = None


class BackendSetupError(ValueError):
    """The checkpointer's store cannot be used; the message says what to run or fix."""


@asynccontextmanager
async def open_checkpointer(
    settings: Settings, writer: SqliteWriter | None = None
) -> AsyncIterator[BaseCheckpointSaver[str]]:
    """Open the checkpointer: Redis when `RESEARCH_REDIS_URL` is set, else the SQLite file (`writer`: shared)."""
    if settings.redis_url is None:
        async with open_sqlite(settings.checkpoint_path, GroupCommitSqliteSaver, writer) as saver:
            yield saver
    else:
        async with _redis_saver(settings.redis_url) as redis:
            yield redis


@asynccontextmanager
async def _redis_saver(url: str) -> AsyncIterator["FlatRedisSaver"]:
    """Open the Redis saver; raise `BackendSetupError` when Redis is unreachable."""
    from redis.exceptions import ConnectionError as RedisConnectionError

    from stores.redis_flat_saver import redis_saver

    async with AsyncExitStack() as stack:
        try:
            saver = await stack.enter_async_context(redis_saver(url))
        except (RedisConnectionError, OSError) as exc:
            raise BackendSetupError(
                f"RESEARCH_REDIS_URL {redact_url(url)} is unreachable "
                f"({type(exc).__name__}): start Redis or fix the URL"
            ) from exc
        yield saver


def redact_url(url: str) -> str:
    """Return the URL without its password, for messages and logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    user = f"{parts.username}:***@" if parts.username else ":***@"
    netloc = f"{user}{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


@asynccontextmanager
async def open_stores(settings: Settings) -> AsyncIterator[Stores]:
    """Open the stores the settings choose; close them on exit."""
    async with AsyncExitStack() as stack:
        if settings.redis_url is None:
            # One file, one writer: the three stores' writes share its transactions.
            path = settings.checkpoint_path
            writer = await stack.enter_async_context(open_sqlite_writer(path))
            saver = await stack.enter_async_context(open_checkpointer(settings, writer))
            events: EventLog = await stack.enter_async_context(
                open_sqlite(path, SqliteEventLog, writer)
            )
            registry: Registry = await stack.enter_async_context(
                open_sqlite(path, SqliteRegistry, writer)
            )
            evidence = await stack.enter_async_context(
                open_sqlite(path, SqliteEvidenceStore, writer)
            )
            watches = await stack.enter_async_context(open_sqlite(path, SqliteWatchStore, writer))
            collections = FileCollectionStore(settings.collections_dir)
            yield Stores(saver, events, registry, evidence, watches, collections=collections)
        else:
            redis_saver = await stack.enter_async_context(_redis_saver(settings.redis_url))
            from stores.redis_batches import RedisBatches
            from stores.redis_collections import RedisCollectionStore
            from stores.redis_connection import redis_client
            from stores.redis_events import FOLLOW_BLOCK_S, RedisEventLog
            from stores.redis_evidence import RedisEvidenceStore
            from stores.redis_registry import RedisRegistry
            from stores.redis_watches import RedisWatchStore

            client = redis_client(settings.redis_url)
            stack.push_async_callback(client.aclose)
            # The one XREAD that serves every follower blocks a connection of this pool.
            followers = redis_client(
                settings.redis_url, max_connections=2, blocking_s=FOLLOW_BLOCK_S
            )
            stack.push_async_callback(followers.aclose)
            # The stores, the pause signals and the runs' locks share pipelines.
            batches = RedisBatches(client)
            redis_events = RedisEventLog(client, follow_client=followers, batches=batches)
            stack.push_async_callback(redis_events.close)
            redis_saver.ordered_by(redis_events.ordered)  # a step's events before its writes
            redis_evidence = RedisEvidenceStore(client)
            stack.push_async_callback(redis_evidence.flush)
            registry = RedisRegistry(client, batches=batches)
            redis_watches = RedisWatchStore(client)
            yield Stores(
                redis_saver,
                redis_events,
                registry,
                redis_evidence,
                redis_watches,
                batches,
                RedisCollectionStore(client),
            )
