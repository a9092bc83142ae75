"""Watches: a finished thread refreshed on a schedule, each refresh's diff kept as an entry.

A watch re-runs its thread (`refresh`: search and read again, the thread's topic, options
and plan) every `every`; each refresh is a new thread, compared (`service.run_diff`) with
the previous refresh (the watched run itself, the first time), and the diff is the
watch's entry for that refresh.

The scheduler (`Watches.tick`, run by the embedded service, or by every worker on Redis)
moves each watch through two steps, each a compare-and-set on the watch's record
(`stores.watches`), so however many processes tick, one wins each step:

1. due and idle: claim the next refresh (its sequence number, its thread id, derived from
   both, so a claim can only ever start that one thread), then start it;
2. in flight: once its run has stopped, record the entry (written only once per
   sequence number) together with its deliveries, and release the watch.

A delivery (telling the entry on the owner's event stream, POSTing it to the webhook) is
made only once its entry is recorded, and is kept with the entry until done, so a kill
loses none; each try is claimed (a compare-and-set) so one process makes it. An event
whose try was cut is told again only if the stream does not hold it, so a client of
`/v1/watches/events` never sees one entry twice.

A process killed between the two (or during either) leaves a record that says what to do
next: a claimed refresh whose thread does not exist is started by the next tick (after
`claim_grace_s`, the time its claimant had to start it), one that runs is continued by
the runs' own recovery, one that stopped is recorded. Due times that pass while a refresh
still runs are skipped (counted), not stacked; due times missed while no process ran
come to one refresh.
"""

import asyncio
import logging
import re
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

from pydantic import BaseModel, Field, TypeAdapter, ValidationError

from service.errors import InvalidState, NotFound, Unprocessable
from service.run_diff import RunDiff
from service.runs import RunManager
from service.thread_ids import public_id
from stores.registry import TERMINAL, RunStatus, ThreadExists
from stores.watches import Delivery, WatchEntryRecord, WatchRecord, WatchStore

logger = logging.getLogger(__name__)

MIN_EVERY = timedelta(hours=1)
MAX_EVERY = timedelta(days=90)
# An ISO 8601 duration: P, then date parts, then T and time parts (pydantic parses it).
_ISO_DURATION = re.compile(
    r"P(?!$)(\d+Y)?(\d+M)?(\d+W)?(\d+D)?(T(?=\d)(\d+H)?(\d+M)?(\d+(\.\d+)?S)?)?"
)
_DURATION: TypeAdapter[timedelta] = TypeAdapter(timedelta)
# The namespace of refresh thread ids: uuid5(watch id, sequence number).
_REFRESHES = uuid.UUID("8f0a6a4e-3c1b-4b43-9d7e-5a2f0c9e1d42")
# The stream of a key's watch entries in the event log (a name no thread can have).
EVENTS_PREFIX = "watches:"
ENTRY_EVENT = "watch_entry"


def parse_every(text: str, minimum: timedelta = MIN_EVERY) -> timedelta:
    """Return the interval an ISO 8601 duration names; Unprocessable if it is none or out of bounds."""
    if _ISO_DURATION.fullmatch(text) is None:
        raise Unprocessable(
            f"every: {text!r} is not an ISO 8601 duration such as PT6H, P1D or P1W",
            {"field": "every"},
        )
    try:
        every = _DURATION.validate_python(text)
    except ValidationError:
        raise Unprocessable(f"every: {text!r} is not a duration", {"field": "every"}) from None
    if not minimum <= every <= MAX_EVERY:
        raise Unprocessable(
            f"every: {text} is {every}; a watch refreshes between every {minimum} and every "
            f"{MAX_EVERY.days} days",
            {"field": "every"},
        )
    return every


def iso_duration(seconds: float) -> str:
    """Return an interval as an ISO 8601 duration (days, hours, minutes, seconds)."""
    days, rest = divmod(round(seconds, 3), 86_400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    time = "".join(f"{n:g}{unit}" for n, unit in ((hours, "H"), (minutes, "M"), (secs, "S")) if n)
    return "P" + (f"{days:g}D" if days else "") + (f"T{time}" if time else "" if days else "T0S")


def refresh_id(watch: WatchRecord, seq: int) -> str:
    """Return the thread id of the watch's refresh number `seq`: the same for every claimant."""
    return uuid.uuid5(_REFRESHES, f"{watch.watch_id}:{seq}").hex


def events_stream(owner: str) -> str:
    """Return the event-log stream of the owner's watch entries."""
    return f"{EVENTS_PREFIX}{owner}"


class WatchView(BaseModel):
    """A watch as the API shows it."""

    thread_id: str
    every: str = Field(description="The interval, as an ISO 8601 duration.")
    every_seconds: float
    webhook: str | None = None
    created_at: datetime
    next_due: datetime = Field(description="When the next refresh is due.")
    refreshes: int = Field(description="Refreshes started so far.")
    in_flight: str | None = Field(None, description="The refresh running now (its thread id).")
    last_refresh: str | None = Field(
        None, description="The last completed refresh, which the next one is compared with."
    )
    skipped: int = Field(0, description="Due times that passed while a refresh still ran.")
    refused: str | None = Field(
        None,
        description="Why the last due refresh could not start (e.g. a collection it searches "
        "was deleted); tried again at the next due time.",
    )


class WatchEntry(BaseModel):
    """One refresh of a watched thread and what changed since the previous one."""

    seq: int = Field(description="The refresh's number: 1 for the first.")
    at: datetime = Field(description="When the refresh stopped.")
    watched: str = Field(description="The watched thread.")
    thread_id: str = Field(description="The refresh's own thread.")
    previous: str = Field(description="The run it is compared with.")
    status: RunStatus
    changed: bool = Field(description="Whether any source or finding came, went or changed.")
    diff: RunDiff | None = Field(None, description="The diff; none when the refresh failed.")


def view(watch: WatchRecord) -> WatchView:
    """Return the API's view of a stored watch."""
    return WatchView(
        thread_id=public_id(watch.thread_id),
        every=iso_duration(watch.every_s),
        every_seconds=watch.every_s,
        webhook=watch.webhook,
        created_at=watch.created_at,
        next_due=watch.next_due,
        refreshes=watch.tick,
        in_flight=public_id(watch.current) if watch.current else None,
        last_refresh=public_id(watch.previous) if watch.previous != watch.thread_id else None,
        skipped=watch.skipped,
        refused=watch.refused,
    )


def entry_view(watched: str, entry: WatchEntryRecord) -> WatchEntry:
    """Return the API's view of a stored entry."""
    return WatchEntry(
        seq=entry.seq,
        at=entry.at,
        watched=public_id(watched),
        thread_id=entry.thread_id,
        previous=entry.previous,
        status=entry.status,
        changed=entry.changed,
        diff=RunDiff.model_validate(entry.diff) if entry.diff is not None else None,
    )


def _changed(diff: RunDiff) -> bool:
    return bool(
        diff.sources_added
        or diff.sources_removed
        or diff.sources_changed
        or diff.findings_added
        or diff.findings_dropped
    )


def _next_due(due: datetime, every: timedelta, now: datetime) -> datetime:
    """Return the due time after `due`; due times already past come to one (now + every)."""
    following = due + every
    return following if following > now else now + every


# Makes the claimed try of a recorded delivery (a webhook POST) and records its outcome.
Deliver = Callable[[Delivery, WatchEntry], Awaitable[None]]
# Returns a webhook URL as it will be called, or raises Unprocessable (the SSRF rules).
CheckURL = Callable[[str], Awaitable[str]]


class Watches:
    """Watch commands (for the API and the CLI) and the scheduler's tick."""

    def __init__(
        self,
        manager: RunManager,
        store: WatchStore,
        min_every: timedelta = MIN_EVERY,
        claim_grace_s: float = 0.0,
        deliver: Deliver | None = None,
        check_url: CheckURL | None = None,
        delivery_lease_s: float = 60.0,
    ) -> None:
        """Act through `manager` on the watches of `store`.

        `claim_grace_s`: how long a claimed refresh's claimant has to start it before
        another process does (0 when this process is the only scheduler);
        `delivery_lease_s`: how long a delivery's try is its claimant's.
        """
        self.manager = manager
        self.store = store
        self.min_every = min_every
        self._grace = timedelta(seconds=claim_grace_s)
        self._deliver = deliver
        self._check_url = check_url
        self._lease = timedelta(seconds=delivery_lease_s)

    # -- commands ----------------------------------------------------------------------

    async def watch(
        self, owner: str, thread_id: str, every: timedelta, webhook: str | None = None
    ) -> WatchRecord:
        """Watch the caller's finished thread (or change its watch's interval and webhook)."""
        record = await self.manager.get(owner, thread_id)
        if record.status not in TERMINAL or record.status == "cancelled":
            raise InvalidState(f"only a finished run can be watched; this one is {record.status}")
        values = (await self.manager.snapshot(thread_id)).values or {}
        if values.get("task_plan") is None:
            raise InvalidState("this run has no plan: a refresh re-runs a plan")
        if webhook is not None:
            if self._check_url is None:
                raise Unprocessable("webhook: this server delivers no webhooks")
            webhook = await self._check_url(webhook)
        now = datetime.now(UTC)
        while True:
            found = await self.store.get(thread_id)
            if found is None:
                new = WatchRecord(
                    thread_id=thread_id,
                    owner=owner,
                    watch_id=uuid.uuid4().hex,
                    every_s=every.total_seconds(),
                    webhook=webhook,
                    created_at=now,
                    next_due=now + every,
                    previous=thread_id,
                )
                if await self.store.create(new):
                    return new
                continue
            changed = found.model_copy(
                update={
                    "every_s": every.total_seconds(),
                    "webhook": webhook,
                    "next_due": now + every,
                }
            )
            stored = await self.store.replace(found, changed)
            if stored is not None:
                return stored

    async def get(self, owner: str, thread_id: str) -> WatchRecord:
        """Return the caller's thread's watch; NotFound if it is not watched."""
        await self.manager.get(owner, thread_id)
        watch = await self.store.get(thread_id)
        if watch is None:
            raise NotFound(
                f"thread {public_id(thread_id)!r} is not watched: POST .../watch to watch it"
            )
        return watch

    async def unwatch(self, owner: str, thread_id: str) -> None:
        """Stop watching the thread; its entries go with the watch, its refreshes stay."""
        await self.get(owner, thread_id)
        await self.store.delete(thread_id)

    async def changes(self, owner: str, thread_id: str, limit: int = 100) -> list[WatchEntry]:
        """Return the watch's entries, newest first."""
        await self.get(owner, thread_id)
        return [entry_view(thread_id, e) for e in await self.store.entries(thread_id, limit)]

    async def of_owner(self, owner: str) -> list[WatchRecord]:
        """Return the owner's watches; a deleted thread's watch goes with it here."""
        kept = []
        for watch in await self.store.of_owner(owner):
            if await self.manager.registry.get(watch.thread_id) is None:
                await self.store.delete(watch.thread_id)
            else:
                kept.append(watch)
        return kept

    # -- the scheduler -----------------------------------------------------------------

    async def tick(self, now: datetime | None = None) -> None:
        """Move every due or in-flight watch one step, then start the deliveries due.

        A delivery is due when new, when its backoff's wait is over, or when the process
        that tried it stopped before the end of its lease.
        """
        now = now or datetime.now(UTC)
        for watch in await self.store.due(now):
            try:
                await self._advance(watch, now)
            except Exception:
                logger.exception("watch of %s: could not advance it", watch.thread_id)
        await self._deliver_due(now)

    async def _deliver_due(self, now: datetime) -> None:
        """Claim each due delivery (one process wins it) and make it."""
        for delivery in await self.store.deliveries_due(now):
            if delivery.kind == "webhook" and self._deliver is None:
                continue  # this process sends no webhooks
            try:
                await self._deliver_one(delivery, now)
            except Exception:
                logger.exception("watch entry %s: could not deliver it", delivery.key())

    async def _deliver_one(self, delivery: Delivery, now: datetime) -> None:
        claimed = await self.store.replace_delivery(
            delivery,
            delivery.model_copy(
                update={"attempts": delivery.attempts + 1, "next_try": now + self._lease}
            ),
        )
        if claimed is None:  # another process took it
            return
        stored = await self.store.entry(delivery.thread_id, delivery.seq)
        if stored is None:  # its watch is gone
            await self.store.finish_delivery(claimed)
            return
        entry = entry_view(delivery.thread_id, stored)
        if claimed.kind == "event":
            await self._tell(claimed, entry)
        elif self._deliver is not None:
            await self._deliver(claimed, entry)

    async def _tell(self, delivery: Delivery, entry: WatchEntry) -> None:
        """Tell the entry on the owner's event stream, unless a cut try told it already."""
        stream = events_stream(delivery.owner)
        # A try before this one may have told it and died before recording so.
        if delivery.attempts == 1 or not await self._told(stream, entry):
            # Keyed too: the Redis log stores an event emitted twice once.
            await self.manager.events.emit(
                stream, ENTRY_EVENT, entry.model_dump(mode="json"), key=entry.thread_id
            )
        await self.store.finish_delivery(delivery)

    async def _told(self, stream: str, entry: WatchEntry) -> bool:
        """Return whether the stream holds the entry's event (its refresh names it)."""
        for event in await self.manager.events.read(stream):
            data = event.data
            if (
                event.name == ENTRY_EVENT
                and isinstance(data, dict)
                and data.get("thread_id") == entry.thread_id
            ):
                return True
        return False

    async def run(self, poll_s: float) -> None:
        """Tick every `poll_s` seconds, for as long as the task runs."""
        while True:
            try:
                await self.tick()
            except Exception as exc:  # a store away: the next tick tries again
                logger.warning("watches: tick failed (%s): next in %.1f s", exc, poll_s)
            await asyncio.sleep(poll_s)

    async def _advance(self, watch: WatchRecord, now: datetime) -> None:
        every = timedelta(seconds=watch.every_s)
        if watch.current is None:
            if watch.next_due > now:
                return
            if await self.manager.registry.get(watch.thread_id) is None:  # deleted
                await self.store.delete(watch.thread_id)
                return
            seq = watch.tick + 1
            claimed = watch.model_copy(
                update={
                    "tick": seq,
                    "current": refresh_id(watch, seq),
                    "claimed_at": now,
                    "next_due": _next_due(watch.next_due, every, now),
                }
            )
            stored = await self.store.replace(watch, claimed)
            if stored is not None:
                await self._start(stored)
            return
        record = await self.manager.registry.get(watch.current)
        if record is None:
            # Claimed, never started: its claimant died (or is starting it right now).
            if watch.claimed_at is not None and now - watch.claimed_at < self._grace:
                return
            stored = await self.store.replace(watch, watch.model_copy(update={"claimed_at": now}))
            if stored is not None:
                await self._start(stored)
            return
        if record.status not in TERMINAL:
            if watch.next_due <= now:  # due again while the refresh runs: skip, do not stack
                skipped = watch.model_copy(
                    update={
                        "next_due": _next_due(watch.next_due, every, now),
                        "skipped": watch.skipped + 1,
                    }
                )
                await self.store.replace(watch, skipped)
            return
        await self._record(watch, record.status, record.updated_at, now)

    async def _start(self, watch: WatchRecord) -> None:
        """Start the claimed refresh as the thread its claim names."""
        assert watch.current is not None
        try:
            await self.manager.rerun(
                watch.owner, watch.thread_id, "refresh", stored_id=watch.current
            )
        except ThreadExists:  # another process started it first
            return
        except (NotFound, InvalidState, Unprocessable) as exc:
            # The request cannot start as stored: no thread is made, the claim is released
            # and the refresh of this number tried again when the watch is next due.
            logger.warning(
                "watch of %s: refresh %d cannot start (%s): next due %s",
                watch.thread_id,
                watch.tick,
                exc.message,
                watch.next_due.isoformat(),
            )
            released = {"tick": watch.tick - 1, "current": None, "claimed_at": None}
            await self.store.replace(
                watch, watch.model_copy(update={**released, "refused": exc.message})
            )
            return
        if watch.refused is not None:
            await self.store.replace(watch, watch.model_copy(update={"refused": None}))
        logger.info(
            "watch of %s: refresh %d started as %s", watch.thread_id, watch.tick, watch.current
        )

    async def _record(
        self, watch: WatchRecord, status: RunStatus, at: datetime, now: datetime
    ) -> None:
        """Record the stopped refresh as the watch's entry and its deliveries, release the watch."""
        assert watch.current is not None
        diff = (
            await self.manager.diff(watch.previous, watch.current)
            if status == "completed"
            else None
        )
        stored = WatchEntryRecord(
            seq=watch.tick,
            at=at,
            thread_id=public_id(watch.current),
            previous=public_id(watch.previous),
            status=status,
            changed=diff is not None and _changed(diff),
            diff=diff.model_dump(mode="json") if diff is not None else None,
        )
        deliveries = []
        if stored.changed or status != "completed":  # a change worth telling
            # Told only once recorded: this tick's _deliver_due tells it (see _tell).
            kinds = ["event", "webhook"] if watch.webhook else ["event"]
            deliveries = [
                Delivery(
                    thread_id=watch.thread_id,
                    seq=watch.tick,
                    kind=kind,
                    owner=watch.owner,
                    url=watch.webhook if kind == "webhook" else None,
                    next_try=now,
                )
                for kind in kinds
            ]
        # Recorded with the entry, in one write: a kill after it loses no delivery.
        await self.store.add_entry(watch.thread_id, stored, deliveries)
        released = watch.model_copy(
            update={
                "current": None,
                "claimed_at": None,
                "previous": watch.current if status == "completed" else watch.previous,
            }
        )
        await self.store.replace(watch, released)
