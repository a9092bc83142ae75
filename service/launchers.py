"""Where runs execute: tasks in this process (`LocalLauncher`), or queue jobs (`QueueLauncher`)."""

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from typing import Protocol

from service.errors import TooManyRuns
from service.execution import RunExecutor, RunInput


class Launcher(Protocol):
    """Starts and stops the execution of runs: tasks of this process, or queue jobs."""

    def reserve(self, thread_id: str) -> AbstractAsyncContextManager[None]:
        """Hold a place for the thread's new run until it is launched (or the context exits).

        Raises:
            TooManyRuns: as many runs are running and queued as the service takes.
        """
        ...

    async def launch(self, thread_id: str, run_input: RunInput) -> None:
        """Have the thread (it is `queued`) executed from `run_input`."""
        ...

    async def ensure_running(self, thread_id: str) -> None:
        """Make sure an active thread whose executor may have died is executed."""
        ...

    async def stop(self, thread_id: str) -> None:
        """Stop the thread's execution, queued or running; return once it has ended."""
        ...

    async def close(self) -> None:
        """Stop this process's executions, leaving their runs to be continued later."""
        ...


class LocalLauncher:
    """Runs execute as tasks of this process, at most `max_concurrent` at a time."""

    def __init__(self, executor: RunExecutor, max_concurrent: int, max_queued: int) -> None:
        self._executor = executor
        self._slots = asyncio.Semaphore(max_concurrent)
        self._capacity = max_concurrent + max_queued
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._reserved = 0

    @contextlib.asynccontextmanager
    async def reserve(self, thread_id: str) -> AsyncIterator[None]:
        """Hold a place for the thread's new run while it is registered and launched; TooManyRuns if full.

        The check and the hold happen with no await between them.
        """
        held = len(self._tasks) + self._reserved
        if held >= self._capacity:
            raise TooManyRuns(f"{held} runs are queued or running, the limit: retry later")
        self._reserved += 1
        try:
            yield
        finally:
            self._reserved -= 1

    async def launch(self, thread_id: str, run_input: RunInput) -> None:
        """Start the execution as a task; it waits for a free slot."""
        task = asyncio.create_task(self._run(thread_id, run_input), name=f"research-{thread_id}")
        self._tasks[thread_id] = task
        task.add_done_callback(lambda done: self._forget(thread_id, done))

    async def ensure_running(self, thread_id: str) -> None:
        """Launch a continuation unless a task already holds the thread."""
        if thread_id not in self._tasks:
            await self.launch(thread_id, RunInput(recovered=True))

    async def _run(self, thread_id: str, run_input: RunInput) -> None:
        async with self._slots:
            await self._executor.execute(thread_id, run_input)

    def _forget(self, thread_id: str, task: asyncio.Task[None]) -> None:
        # A resumed run may already have a newer task under the same id: keep that one.
        if self._tasks.get(thread_id) is task:
            del self._tasks[thread_id]

    async def stop(self, thread_id: str) -> None:
        """Cancel the thread's task and wait until it has ended."""
        task = self._tasks.get(thread_id)
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def close(self) -> None:
        """Cancel every task; their runs stay active for `recover`."""
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
