"""Stopping tasks that swallow a cancellation: the app's background work still ends."""

import asyncio

from app.background import BackgroundWork
from core.tasks import stop

# A bound on a hang, not a timing: every stop here ends in a few event-loop turns.
HANG_S = 10.0


async def swallows_one_cancellation(ticks: list[int]) -> None:
    """A loop that, like a client's `wait_for` on Python 3.11, loses the first cancellation."""
    swallowed = False
    while True:
        try:
            await asyncio.sleep(0.01)
        except asyncio.CancelledError:
            if swallowed:
                raise
            swallowed = True  # lost on the way: the loop goes on
        ticks.append(1)


async def test_a_task_that_swallows_a_cancellation_is_stopped() -> None:
    ticks: list[int] = []
    task = asyncio.create_task(swallows_one_cancellation(ticks))
    await asyncio.sleep(0.05)
    async with asyncio.timeout(HANG_S):
        await stop(task)
    assert task.cancelled()


async def test_background_work_ends_though_a_task_swallows_its_cancellation() -> None:
    work = BackgroundWork()
    ticks: list[int] = []
    work.start(swallows_one_cancellation(ticks))
    await asyncio.sleep(0.05)
    async with asyncio.timeout(HANG_S):  # cancelled once and awaited, it ran for ever
        await work.close()
    assert work.running == 0


async def test_a_failed_task_stopped_is_not_reported_as_never_retrieved() -> None:
    async def fails() -> None:
        raise ValueError("gone")

    task = asyncio.create_task(fails())
    await asyncio.sleep(0)
    await stop(task)
    assert task.done() and isinstance(task.exception(), ValueError)
