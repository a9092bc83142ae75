"""What a run records: its statuses, in the registry, and its events, in the event log.

Shared by everything that moves a run along (its leg, an admission, a cancel): a status
is always written to both places, in the order a client may rely on (`set_status`).
"""

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from core.state import ReportStatus
from service.platform_runs import PlatformRuns
from service.signals import RunSignals
from stores.batching import committed_together
from stores.events import TERMINAL_EVENT, EventLog
from stores.registry import ACTIVE, TERMINAL, Registry, RunStatus, ThreadRecord

logger = logging.getLogger(__name__)


class RunRecorder:
    """Records runs' statuses and events, and tells observers of every status."""

    def __init__(self, events: EventLog, registry: Registry, signals: RunSignals) -> None:
        self.platform = PlatformRuns(events)
        self.events = events
        self.registry = registry
        self.signals = signals
        self._observers: list[Callable[[ThreadRecord], None]] = []
        # Writes queued but not yet known to be stored (progress events, the status), per thread.
        self._unsettled: dict[str, list[Awaitable[object]]] = {}

    def observe(self, observer: Callable[[ThreadRecord], None]) -> None:
        """Call `observer` with every status recorded here."""
        self._observers.append(observer)

    def notify(self, record: ThreadRecord) -> None:
        """Tell the observers of a status recorded elsewhere (a new thread's first)."""
        for observer in self._observers:
            observer(record)

    async def publish(self, thread_id: str, name: str, data: dict[str, Any]) -> None:
        """Append an event and wait until it is stored."""
        await self.events.append(thread_id, name, data)

    def _emit(
        self, thread_id: str, name: str, data: dict[str, Any], key: str | None = None
    ) -> None:
        """Queue a progress event without waiting for its commit (`_settle_events` waits)."""
        self._track(thread_id, self.events.emit(thread_id, name, data, key=key))

    def _track(self, thread_id: str, pending: Awaitable[object]) -> None:
        self._unsettled.setdefault(thread_id, []).append(pending)

    async def _settle_events(self, thread_id: str) -> None:
        """Wait until every event emitted for the thread is stored (raise if one failed)."""
        pending = self._unsettled.pop(thread_id, [])
        if pending:
            await asyncio.gather(*pending)

    async def set_status(
        self,
        thread_id: str,
        status: RunStatus,
        error: str | None = None,
        recovered: bool = False,
        report: ReportStatus | None = None,
    ) -> ThreadRecord:
        """Record a status (and the report's, when a run completes) and publish it as an event.

        A status that ends, pauses or questions the run is recorded before its event is
        stored: a client that acts on the event (answers, starts the next run) finds it
        recorded. One that keeps the run active is written with its event (`activate`).
        """
        if status in ACTIVE and error is None and report is None:
            # Awaited here, not through `activate`'s task: a task starts a turn later.
            return await self._activated(
                thread_id, status, self._status_emitted(thread_id, status, recovered)
            )
        record = await self.registry.set_status(thread_id, status, error, report)
        self.notify(record)
        await self.publish(thread_id, "status", _status_event(status, error, report, recovered))
        return record

    def activate(
        self, thread_id: str, status: RunStatus, recovered: bool = False
    ) -> "asyncio.Future[ThreadRecord]":
        """Record that the run is queued or running; its status event is queued at once.

        The record and the event are written together, not one after the other: under
        load each write waits a turn of the event loop. Set under the thread's admission
        lock or by the run's own leg, an active status changes nothing a client may do,
        so the event may be stored a moment before the record. Queued before this
        returns, the event comes before any the caller emits next.
        """
        event = self._status_emitted(thread_id, status, recovered)
        return asyncio.ensure_future(self._activated(thread_id, status, event))

    def _status_emitted(self, thread_id: str, status: RunStatus, recovered: bool) -> Awaitable[int]:
        assert status in ACTIVE
        return self.events.emit(thread_id, "status", _status_event(status, None, None, recovered))

    async def _activated(
        self, thread_id: str, status: RunStatus, event: Awaitable[int]
    ) -> ThreadRecord:
        """Record an active status whose event is queued already; the record."""
        with committed_together(event):
            record = await self.registry.set_status(thread_id, status)
        self.notify(record)
        await event
        return record

    async def finish(
        self,
        thread_id: str,
        status: RunStatus,
        error: str | None = None,
        report: ReportStatus | None = None,
    ) -> ThreadRecord:
        """Close the run with a terminal status (and its report's) and the stream's last event."""
        assert status in TERMINAL
        try:
            await self._settle_events(thread_id)
        except Exception:  # the run ends either way; its status must still be recorded
            logger.exception("events of %s could not be stored", thread_id)
        await self.signals.clear(thread_id)
        record = await self.set_status(thread_id, status, error, report=report)
        await self.publish(thread_id, TERMINAL_EVENT, {"status": status})
        # The thread's Platform run, executing, waiting or queued, ends here too.
        await self.platform.close_open(thread_id, status, error)
        return record


def _status_event(
    status: RunStatus, error: str | None, report: ReportStatus | None, recovered: bool
) -> dict[str, Any]:
    """The payload of a `status` event."""
    data: dict[str, Any] = {"status": status}
    if error:
        data["error"] = error
    if report:
        data["report"] = report
    if recovered:
        data["recovered"] = True
    return data
