"""`research-agent rerun`, `export` and `import`: a run's record, from the terminal.

A re-run is followed and printed like `run`; an export writes the run whole (record,
state, events, evidence) as one JSON file, which `import` registers as a finished thread
of this data directory (or Redis), where `show`, the web page and the API find it.
"""

import asyncio
import json
from pathlib import Path
from typing import Literal

from pydantic import ValidationError
from rich.markup import escape

from app.auth import owner_id
from app.cli_common import err, fail, load_settings
from app.cli_runs import (
    _finish,
    _follow,
    _runtime,
    _unknown_thread,
    require_data,
    stores_and_graph,
    until_interrupted,
)
from app.settings import Settings
from core.models import explain
from service.errors import InvalidState, NotFound
from service.reproduction import RunArchive, export_archive, import_archive
from service.thread_ids import LOCAL_OWNER, check_client_id, public_id, scoped
from stores.registry import ThreadExists


async def _rerun(
    settings: Settings, thread_id: str, mode: Literal["replay", "refresh"], out_file: Path | None
) -> None:
    require_data(settings, thread_id)
    async with _runtime(settings) as runtime:
        try:
            await runtime.manager.get(LOCAL_OWNER, thread_id)
            record = await runtime.manager.rerun(LOCAL_OWNER, thread_id, mode)
        except NotFound:
            _unknown_thread(thread_id)
        except InvalidState as exc:
            fail(f"thread {thread_id!r}: {exc.message}")
        err.print(f"thread {escape(record.thread_id)} · {mode} of {escape(thread_id)}")
        error = await _follow(runtime, record.thread_id, 0, interactive=True)
        await _finish(runtime, record.thread_id, out_file, error)


def rerun(thread_id: str, mode: Literal["replay", "refresh"], out_file: Path | None) -> None:
    """Re-run a thread's topic, options and plan as a new thread, and print its report."""
    until_interrupted(_rerun(load_settings(), thread_id, mode, out_file), thread_id)


async def _export(settings: Settings, thread_id: str, out_file: Path) -> None:
    async with stores_and_graph(settings) as (graph, stores):
        record = await stores.registry.get(thread_id)
        if record is None or record.owner != LOCAL_OWNER:
            _unknown_thread(thread_id)
        archive = await export_archive(graph, stores.events, stores.evidence, record)
    out_file.write_text(archive.model_dump_json(), encoding="utf-8")
    evidence = archive.evidence
    err.print(
        f"thread {escape(thread_id)} written to {escape(str(out_file))}: {len(archive.events)} "
        f"events, {len(evidence.records)} evidence records, {len(evidence.contents)} texts"
    )


def export(thread_id: str, out_file: Path | None) -> None:
    """Write a thread whole to a JSON file (default: research-<id>.json here)."""
    settings = load_settings()
    require_data(settings, thread_id)
    target = out_file or Path(f"research-{thread_id}.json")
    asyncio.run(_export(settings, thread_id, target))


def _read_archive(path: Path) -> RunArchive:
    try:
        return RunArchive.model_validate_json(path.read_bytes())
    except OSError as exc:
        fail(f"cannot read {path}: {exc.strerror or exc}")
    except ValidationError as exc:
        fail(f"{path} is not a run exported by `research-agent export`: {explain(exc)[:500]}")
    except json.JSONDecodeError as exc:  # pragma: no cover - pydantic reports bad JSON itself
        fail(f"{path} is not JSON: {exc}")


def _owner(settings: Settings, key: str | None) -> str:
    """Who an imported thread belongs to: the key given, the only key, or the local owner."""
    keys = [k.get_secret_value() for k in settings.api_keys]
    if key is not None:
        if not keys:
            fail("--key: this service has no API keys (RESEARCH_API_KEYS): import without it")
        if key not in keys:
            fail("--key is not one of this service's API keys (RESEARCH_API_KEYS)")
        return owner_id(key)
    if len(keys) > 1:
        fail("this service has several API keys: say which one owns the thread with --key")
    return owner_id(keys[0]) if keys else LOCAL_OWNER


async def _import(settings: Settings, path: Path, thread_id: str | None, key: str | None) -> None:
    owner = _owner(settings, key)
    archive = _read_archive(path)
    wanted = thread_id or archive.thread.thread_id
    try:
        check_client_id(wanted)
    except ValueError as exc:
        fail(f"--thread {wanted!r}: {exc}")
    async with stores_and_graph(settings) as (graph, stores):
        parts = (graph, stores.events, stores.registry, stores.evidence)
        try:
            record = await import_archive(parts, owner, archive, scoped(owner, wanted))
        except ThreadExists:
            fail(f"thread {wanted!r} already exists here: import it under another --thread")
        except InvalidState as exc:
            fail(f"{path}: {exc.message}")
        except ValueError as exc:
            fail(f"{path}: its state does not fit this version: {str(exc)[:500]}")
    shown = public_id(record.thread_id)
    # A key's thread is that key's to read, over HTTP; the CLI reads the local owner's.
    see = f"research-agent show {shown}" if owner == LOCAL_OWNER else f"GET /v1/research/{shown}"
    err.print(
        f"[green]imported[/] thread {escape(shown)} · {escape(record.topic)} · `{escape(see)}`",
        soft_wrap=True,
    )


def import_run(path: Path, thread_id: str | None, key: str | None = None) -> None:
    """Register an exported run as a finished thread here, owned by `key` (see `_owner`)."""
    asyncio.run(_import(load_settings(), path, thread_id, key))
