"""Group writes: what is queued while one batch is being written goes into the next one.

The busy stores (the SQLite writer, both event logs) queue their writes here, so one round
trip or transaction carries a whole batch, in the order the writes were queued.
"""

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class Batcher(Generic[T]):
    """Writes queued items in batches, one batch at a time, in the order they were queued.

    Args:
        write_batch: writes one batch and sets each item's outcome (`set_outcome`). It
            must not raise: an exception would leave the batch's callers waiting.
    """

    def __init__(self, write_batch: Callable[[list[T]], Awaitable[None]]) -> None:
        self._write_batch = write_batch
        self._pending: list[T] = []
        self._flusher: asyncio.Task[None] | None = None

    def add(self, item: T) -> None:
        """Queue `item` for the next batch, starting a flusher when none runs."""
        self._pending.append(item)
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush())

    async def drain(self) -> None:
        """Wait until every queued item has been written (a caller's cancel leaves it be)."""
        while (flusher := self._flusher) is not None and not flusher.done():
            await asyncio.wait([flusher])

    async def _flush(self) -> None:
        while self._pending:
            batch, self._pending = self._pending, []
            await self._write_batch(batch)


def set_outcome(done: "asyncio.Future[Any]", outcome: object) -> None:
    """Give a queued write's caller its outcome, unless the caller stopped waiting."""
    if done.done():
        return  # its caller was cancelled; the write stands all the same
    if isinstance(outcome, BaseException):
        done.set_exception(outcome)
    else:
        done.set_result(outcome)


@contextmanager
def committed_together(*writes: Awaitable[Any]) -> Iterator[None]:
    """Wrap a write queued with `writes`: if it fails, mark their failures as retrieved.

    Writes queued together commit together; when the caller's own write raises, the
    others' futures would otherwise log "exception was never retrieved".
    """
    try:
        yield
    except BaseException:
        ignore_failures(*writes)
        raise


def ignore_failures(*writes: Awaitable[Any]) -> None:
    """Mark the failures of queued writes as retrieved: whoever waited on them knows."""
    for write in writes:
        if isinstance(write, asyncio.Future):
            write.add_done_callback(_retrieve)


def _retrieve(future: "asyncio.Future[Any]") -> None:
    if not future.cancelled():
        future.exception()
