"""`research-agent watch`: watch a thread, list the watches, show a watch's changes, stop one.

The commands file the watch in the data the service uses; its refreshes run while
`research-agent serve` (embedded) or a worker (Redis) runs.
"""

import asyncio
import re
from collections.abc import Awaitable, Callable
from typing import TypeVar

from rich.markup import escape
from rich.table import Table

from app.cli.console import fail, out
from app.runtime import open_runtime
from service.errors import ResearchError
from service.thread_ids import LOCAL_OWNER
from service.watches import WatchEntry, Watches, parse_every, view

T = TypeVar("T")

_SHORT = re.compile(r"(\d+)([mhdw])")
_UNITS = {"m": "PT{}M", "h": "PT{}H", "d": "P{}D", "w": "P{}W"}


def iso_every(text: str) -> str:
    """Return `30m`, `6h`, `1d` or `2w` as an ISO 8601 duration; an ISO one as it is."""
    short = _SHORT.fullmatch(text.strip().lower())
    return _UNITS[short[2]].format(short[1]) if short else text.strip().upper()


def _run(work: Callable[[Watches], Awaitable[T]]) -> T:
    """Open the runtime, do `work` with its watches, and turn a refusal into one line."""

    async def go() -> T:
        from app.cli.console import load_settings

        async with open_runtime(load_settings()) as runtime:
            return await work(runtime.watches)

    try:
        return asyncio.run(go())
    except ResearchError as exc:
        fail(exc.message)


def watch(thread_id: str, every: str, webhook: str | None) -> None:
    """Watch the thread: a refresh every `every`, each diffed with the previous one."""

    async def work(watches: Watches) -> None:
        stored = await watches.manager.resolve(LOCAL_OWNER, thread_id)
        interval = parse_every(iso_every(every), watches.min_every)
        shown = view(await watches.watch(LOCAL_OWNER, stored, interval, webhook))
        out.print(
            f"watching {escape(shown.thread_id)} every {shown.every}: the next refresh is due "
            f"{shown.next_due:%Y-%m-%d %H:%M:%S} UTC (refreshes run while `research-agent "
            "serve` or a worker runs)"
        )

    _run(work)


def stop(thread_id: str) -> None:
    """Stop watching the thread."""

    async def work(watches: Watches) -> None:
        stored = await watches.manager.resolve(LOCAL_OWNER, thread_id)
        await watches.unwatch(LOCAL_OWNER, stored)
        out.print(f"{escape(thread_id)} is no longer watched")

    _run(work)


def listing() -> None:
    """Print the watches: thread, interval, next due time, refreshes so far."""

    async def work(watches: Watches) -> None:
        found = [view(w) for w in await watches.of_owner(LOCAL_OWNER)]
        if not found:
            out.print("no thread is watched: `research-agent watch ID --every 1d` watches one")
            return
        table = Table("thread", "every", "next due (UTC)", "refreshes", "last refresh")
        for w in found:
            table.add_row(
                w.thread_id,
                w.every,
                f"{w.next_due:%Y-%m-%d %H:%M:%S}",
                str(w.refreshes),
                w.last_refresh or "-",
            )
        out.print(table)

    _run(work)


def describe(entry: WatchEntry) -> str:
    """Return one entry as lines: when, which runs, and what came, went or changed."""
    head = f"#{entry.seq} {entry.at:%Y-%m-%d %H:%M} {entry.thread_id} vs {entry.previous}"
    if entry.diff is None:
        return f"{head}: the refresh {entry.status}"
    d = entry.diff
    lines = [
        f"{head}: sources +{len(d.sources_added)} -{len(d.sources_removed)} "
        f"~{len(d.sources_changed)}, findings +{len(d.findings_added)} "
        f"-{len(d.findings_dropped)}" + ("" if entry.changed else " (no change)")
    ]
    lines += [f"  + {s.url}" for s in d.sources_added]
    lines += [f"  - {s.url}" for s in d.sources_removed]
    lines += [f"  ~ {s.url}" for s in d.sources_changed]
    lines += [f"  + {f}" for f in d.findings_added]
    lines += [f"  - {f}" for f in d.findings_dropped]
    return "\n".join(lines)


def changes(thread_id: str) -> None:
    """Print the watch's entries, newest first."""

    async def work(watches: Watches) -> None:
        stored = await watches.manager.resolve(LOCAL_OWNER, thread_id)
        entries = await watches.changes(LOCAL_OWNER, stored)
        if not entries:
            out.print(f"{escape(thread_id)} has not been refreshed yet")
        for entry in entries:
            out.print(escape(describe(entry)))

    _run(work)
