"""A full disk under the data file, on a real (small) tmpfs: clear answers, nothing lost.

While the disk is full, a write answers 507 `insufficient_storage` in the error shape,
`/readyz` is 503, reads go on, and a run that meets it ends `failed` saying why once
there is room again, its stream closed; after space is freed the service takes writes
and readiness comes back by itself. Mounting a tmpfs needs root: skipped otherwise.
"""

import asyncio
import contextlib
import errno
import logging
import os
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from app.api import create_app
from app.settings import Settings
from stores.sqlite_writer import open_sqlite_writer

from .servers import serve_port
from .sse import collect
from .support import TOPIC
from .test_sqlite_writer import SCHEMA, insert

# Room for what the runs admitted before the disk refused writes do once it has room again
# (up to 40 of them: on 16 MB they filled it again, and the run after them never started).
DISK_BYTES = 64 * 1024 * 1024
RUN_STEP_MS = 150  # a simulated run's steps: long enough to fill the disk during one


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 64 MB tmpfs, mounted for the test and unmounted after."""
    mount = tmp_path / "disk"
    mount.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={DISK_BYTES}", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {mounted.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _fill(disk: Path) -> Path:
    """Write a file until the disk has no room left; the file."""
    filler = disk / "filler"
    with filler.open("wb", buffering=0) as f:
        for chunk in (1024 * 1024, 4096, 512):
            with contextlib.suppress(OSError):
                while True:
                    f.write(b"\0" * chunk)
    with pytest.raises(OSError) as full, (disk / "probe").open("wb", buffering=0) as probe:
        probe.write(b"\0" * 4096)
    assert full.value.errno == errno.ENOSPC
    return filler


async def test_a_full_disk_answers_507_and_the_service_recovers_when_space_returns(
    small_disk: Path, corpus_index: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    settings = Settings(
        data_dir=small_disk / "data",
        corpus_index=corpus_index,
        search_provider="local",
        simulate_latency_ms=RUN_STEP_MS,
    )
    with serve_port(create_app(settings), lifespan="on") as port:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
            done = (await client.post("/v1/research", json={"topic": TOPIC})).json()["thread_id"]
            await collect(client, f"/v1/research/{done}/events")
            going = (await client.post("/v1/research", json={"topic": TOPIC})).json()["thread_id"]
            filler = _fill(small_disk)

            # Writes: 507 in each API's error shape. A few may still fit in the room the
            # database's log already holds (more after a run that wrote a long report).
            answers = []
            while len(answers) < 40 and not any(a.status_code == 507 for a in answers):
                answers.append(await client.post("/v1/research", json={"topic": TOPIC}))
            codes = [a.status_code for a in answers]
            assert set(codes) <= {202, 507} and 507 in codes, codes
            refused = next(a for a in answers if a.status_code == 507).json()["error"]
            assert refused["code"] == "insufficient_storage" and "disk" in refused["message"]
            platform = await client.post("/threads", json={})
            assert platform.status_code in (200, 507), platform.text
            if platform.status_code == 507:
                assert "disk" in platform.json()["detail"]
            ready = await client.get("/readyz")
            assert ready.status_code == 503 and "full" in ready.json()["error"]["message"]
            # Reads go on.
            assert (await client.get(f"/v1/research/{done}/report")).status_code == 200
            assert (await client.get("/v1/research")).status_code == 200

            # The run going on met the full disk: its end waits for room (another run
            # admitted meanwhile may meet it too: the message must name this one).
            for _ in range(200):
                if any(
                    f"run {going}: its end waits for room" in r.getMessage() for r in caplog.records
                ):
                    break
                await asyncio.sleep(0.05)
            else:
                raise AssertionError("the run never met the full disk")
            # Its end is tried again and again: one that finds a write's worth of room in the
            # database's log is stored at once (a nearly full disk takes small writes).
            meanwhile = (await client.get(f"/v1/research/{going}")).json()
            assert meanwhile["status"] in ("running", "failed"), meanwhile

            # Room again: readiness comes back, the run that met the full disk ends.
            filler.unlink()
            for _ in range(100):
                if (await client.get("/readyz")).status_code == 200:
                    break
                await asyncio.sleep(0.1)
            assert (await client.get("/readyz")).status_code == 200
            frames = await collect(client, f"/v1/research/{going}/events")
            assert frames[-1].event == "done"
            detail = (await client.get(f"/v1/research/{going}")).json()
            assert detail["status"] == "failed", detail
            assert "disk holding the data file is full" in detail["error"]
            assert [f.event for f in frames].count("error") == 1
            # New work is taken again, and what was stored before is all there.
            again = await client.post("/v1/research", json={"topic": TOPIC})
            assert again.status_code == 202, again.text
            await collect(client, f"/v1/research/{again.json()['thread_id']}/events")
            assert (await client.get(f"/v1/research/{done}")).json()["status"] == "completed"
            # Every run ends: the ones admitted as the disk filled may still be at work.
            for _ in range(1200):
                listed = (await client.get("/v1/research", params={"limit": 100})).json()["items"]
                if all(t["status"] not in ("queued", "running") for t in listed):
                    break
                await asyncio.sleep(0.1)
            for thread in listed:
                assert thread["status"] not in ("queued", "running"), thread
    leaked = [r for r in caplog.records if "never retrieved" in r.getMessage()]
    assert not leaked, [r.getMessage() for r in leaked]


async def test_readiness_waits_for_room_not_for_one_write_that_fits(small_disk: Path) -> None:
    """A nearly full disk takes small writes in the room the WAL holds: not ready for that."""
    db = small_disk / "data.sqlite"
    async with open_sqlite_writer(db) as writer:
        await writer.run(lambda conn: conn.execute(SCHEMA))
        filler = _fill(small_disk)
        with pytest.raises(sqlite3.OperationalError, match="full"):
            for n in range(10_000):  # until the WAL has no room either
                await writer.run(insert(f"{n}", b"\0" * 65536))
        with pytest.raises(sqlite3.OperationalError, match="full"):
            await writer.check_writable()
        # A little room back: a small write fits, but the disk is as good as full.
        os.truncate(filler, filler.stat().st_size - 256 * 1024)
        await writer.run(insert("small"))
        with pytest.raises(sqlite3.OperationalError, match="full"):
            await writer.check_writable()
        filler.unlink()
        await writer.check_writable()  # room again: ready
        await writer.check_writable()
