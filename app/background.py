"""Work a route starts that must outlive its request, owned by the app and ended with it."""

import asyncio
from collections.abc import Coroutine
from typing import Any

from core.tasks import stop_all


class BackgroundWork:
    """The app's background tasks: kept while they run, cancelled and awaited at shutdown."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False

    def start(self, work: Coroutine[Any, Any, None]) -> None:
        """Run `work` to its end though the request that started it is gone."""
        if self._closed:  # the app is shutting down: its stores are about to close
            work.close()
            return
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    @property
    def running(self) -> int:
        """How many tasks have not ended yet."""
        return len(self._tasks)

    async def close(self) -> None:
        """Cancel the tasks still running, wait for them to end, and start no more."""
        self._closed = True
        await stop_all(self._tasks)
