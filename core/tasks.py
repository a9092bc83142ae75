"""Ending tasks that may swallow a cancellation.

On Python 3.11 a cancellation can be lost inside a task: `asyncio.wait_for` returns its
future's result when it is cancelled just as that future is done (langchain_openai bounds
each streamed chunk with it; redis clients wait with it). A task cancelled once then runs
on, and whoever awaits its end waits for ever. `stop` cancels again until the task ends.
"""

import asyncio
from collections.abc import Iterable
from typing import Any

# How often, and how many times, a task is cancelled again while it runs on.
_STOP_POLL_S = 0.02
_STOP_TRIES = 250
# Tasks that ran on past every cancellation: held so the loop does not drop them mid-run.
_STRAGGLERS: set[asyncio.Future[Any]] = set()


async def stop(task: asyncio.Future[Any]) -> None:
    """Cancel `task` and wait for its end, cancelling again while it swallows cancellations.

    Its result or failure is dropped: the caller asked it to stop.
    """
    for _ in range(_STOP_TRIES):
        if task.done():
            break
        task.cancel()
        await asyncio.wait({task}, timeout=_STOP_POLL_S)
    if not task.done():
        _STRAGGLERS.add(task)
        task.add_done_callback(_STRAGGLERS.discard)
    elif not task.cancelled():
        task.exception()  # retrieved, so the loop does not log it as never retrieved


async def stop_all(tasks: Iterable[asyncio.Future[Any]]) -> None:
    """Stop each task (`stop`), all at once."""
    await asyncio.gather(*(stop(task) for task in list(tasks)))
