"""The latest events of the streams followed in this process, and who waits for them.

A follower woken by a new event is served from here instead of a store round trip.
"""

import asyncio
import weakref
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable

from stores.events import CLOSING_EVENTS, Event

# Events kept per stream: a follower further behind reads the store.
RECENT_EVENTS = 64
# Memory over all streams: the least recently written streams are let go past it (a
# stream that never closes, such as a thread's run records, must not hold memory for ever).
RECENT_BYTES = 16 * 1024 * 1024


class RecentEvents:
    """Per stream, a contiguous run of its latest events; and who waits for the next."""

    def __init__(self, max_bytes: int | None = None) -> None:
        self._max_bytes = RECENT_BYTES if max_bytes is None else max_bytes
        # Least recently written first.
        self._streams: OrderedDict[str, deque[Event]] = OrderedDict()
        self._bytes = 0
        # An entry lives while some follower holds it, so idle streams cost nothing.
        self._waiters: weakref.WeakValueDictionary[str, asyncio.Event] = (
            weakref.WeakValueDictionary()
        )

    def __contains__(self, stream: object) -> bool:
        return stream in self._streams

    @property
    def held_bytes(self) -> int:
        """The payload bytes held, over all streams."""
        return self._bytes

    def after(self, stream: str, position: int) -> list[Event] | None:
        """Return the events after `position`, or None when memory does not reach back to it."""
        recent = self._streams.get(stream)
        if not recent or recent[0].id > position + 1:
            return None
        return [event for event in recent if event.id > position]

    async def look(
        self, stream: str, position: int, read: Callable[[int], Awaitable[list[Event]]]
    ) -> tuple[list[Event], asyncio.Event]:
        """Return a follower's next events after `position`, and what to wait on.

        From memory, or `read(position)` when memory does not reach back. The waiter is
        taken before looking, so an event stored in between still wakes the follower.
        """
        waiter = self.waiter(stream)
        events = self.after(stream, position)
        if events is None:
            events = await read(position)
        return events, waiter

    def last_id(self, stream: str) -> int:
        """Return the id of the stream's latest event held, 0 when none is."""
        recent = self._streams.get(stream)
        return recent[-1].id if recent else 0

    def remember(self, event: Event) -> None:
        """Keep a stored event (a closing one lets its stream go) and wake its followers."""
        stream = event.thread_id
        if event.id <= self.last_id(stream):
            return  # held already (read by the watch and by its writer)
        if event.name in CLOSING_EVENTS:
            self.forget(stream)
        else:
            recent = self._streams.get(stream)
            if recent is None:
                recent = self._streams[stream] = deque(maxlen=RECENT_EVENTS)
            self._streams.move_to_end(stream)
            if recent and recent[-1].id != event.id - 1:
                self._bytes -= sum(len(e.text) for e in recent)
                recent.clear()  # never leave a hole: memory holds a contiguous run of ids
            if len(recent) == recent.maxlen:
                self._bytes -= len(recent[0].text)
            recent.append(event)
            self._bytes += len(event.text)
            while self._bytes > self._max_bytes and len(self._streams) > 1:
                self.forget(next(iter(self._streams)))
        self.wake(stream)

    def forget(self, stream: str) -> None:
        """Let the stream's events go (it closed, was deleted, or is written elsewhere now)."""
        recent = self._streams.pop(stream, None)
        if recent is not None:
            self._bytes -= sum(len(e.text) for e in recent)

    def waiter(self, stream: str) -> asyncio.Event:
        """Return what a follower waits on: set at the stream's next `remember` or `wake`."""
        waiter = self._waiters.get(stream)
        if waiter is None:
            waiter = self._waiters[stream] = asyncio.Event()
        return waiter

    def wake(self, stream: str) -> None:
        """Wake the stream's followers (they look again)."""
        waiter = self._waiters.pop(stream, None)
        if waiter is not None:
            waiter.set()

    def wake_all(self) -> None:
        """Wake every follower (the log closes: they raise)."""
        for waiter in list(self._waiters.values()):
            waiter.set()
