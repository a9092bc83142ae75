"""The app's background work: kept while it runs, cancelled and awaited at shutdown."""

import asyncio

from app.background import BackgroundWork


async def test_shutdown_cancels_running_work_and_refuses_new_work() -> None:
    work = BackgroundWork()
    started = asyncio.Event()
    cancelled = asyncio.Event()

    async def forever() -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    work.start(forever())
    await started.wait()
    assert work.running == 1
    await work.close()
    assert cancelled.is_set() and work.running == 0

    ran = asyncio.Event()

    async def late() -> None:
        ran.set()

    work.start(late())  # after shutdown: closed, never run (and no "never awaited" warning)
    await asyncio.sleep(0)
    assert not ran.is_set() and work.running == 0


async def test_finished_work_is_forgotten() -> None:
    work = BackgroundWork()
    done = asyncio.Event()

    async def quick() -> None:
        done.set()

    work.start(quick())
    await done.wait()
    await asyncio.sleep(0)
    assert work.running == 0
