"""A damaged data file, met at start or while serving: one clear line, or a clear 503.

The data file is a real one (threads researched through a real server), damaged the ways
disks and people damage files: cut short, garbage over its start or its middle, emptied.
`research-agent serve` must refuse it in one line naming the file and what to do; a
server whose file is damaged under it answers 503 `backend_unavailable`, never 500, and
says so at `/readyz`.
"""

import asyncio
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from app.api import create_app
from app.settings import Settings

from .servers import free_port, serve_port
from .sse import collect
from .support import TOPIC

CLI = Path(sys.executable).parent / "research-agent"
THREADS = 12
PAGE = 4096


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory, corpus_index: Path) -> Path:
    """A data directory holding finished threads, its server stopped (the file closed)."""
    data = tmp_path_factory.mktemp("sound")
    settings = Settings(data_dir=data, corpus_index=corpus_index, search_provider="local")

    async def research() -> None:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            for i in range(THREADS):
                started = await client.post("/v1/research", json={"topic": f"{TOPIC} {i}"})
                await collect(client, f"/v1/research/{started.json()['thread_id']}/events")

    with serve_port(create_app(settings), lifespan="on") as port:
        asyncio.run(research())
    assert not (data / "checkpoints.sqlite-wal").exists() or True
    return data


def _copy(data_dir: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "data"
    shutil.copytree(data_dir, copy)
    return copy


def _truncate(file: Path) -> None:
    with file.open("r+b") as f:
        f.truncate(file.stat().st_size // 2)


def _garbage_at_start(file: Path) -> None:
    with file.open("r+b") as f:
        f.write(os.urandom(100))


def _garbage_in_middle(file: Path) -> None:
    """Random bytes over the middle third of the file's pages (its header left sound)."""
    size = file.stat().st_size
    start = (size // 3) // PAGE * PAGE
    with file.open("r+b") as f:
        f.seek(start)
        f.write(os.urandom(size // 3))


def _empty(file: Path) -> None:
    file.write_bytes(b"")


def _env(data: Path, corpus_index: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESEARCH_")}
    env.update(
        RESEARCH_DATA_DIR=str(data),
        RESEARCH_CONFIG=str(data / "none.toml"),
        RESEARCH_CORPUS_INDEX=str(corpus_index),
        RESEARCH_SEARCH_PROVIDER="local",
        COLUMNS="80",  # a narrow terminal: the line must not be wrapped into several
    )
    return env


@pytest.mark.parametrize(
    "damage", [_truncate, _garbage_at_start, _garbage_in_middle, _empty], ids=lambda d: d.__name__
)
def test_serve_refuses_a_damaged_data_file_in_one_line(
    data_dir: Path, tmp_path: Path, corpus_index: Path, damage: Callable[[Path], None]
) -> None:
    data = _copy(data_dir, tmp_path)
    file = data / "checkpoints.sqlite"
    damage(file)
    before = file.read_bytes()
    env = _env(data, corpus_index)
    served = subprocess.run(
        [str(CLI), "serve", "--port", str(free_port())],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    said = (served.stdout + served.stderr).strip()
    assert served.returncode == 2, said
    assert "Traceback" not in said and "\n" not in said, said
    assert str(file) in said and ("restore it from a backup" in said or "move it away" in said)
    # Another command that opens the file says the same, in one line.
    shown = subprocess.run(
        [str(CLI), "show", "some-thread"], env=env, capture_output=True, text=True, timeout=60
    )
    said = (shown.stdout + shown.stderr).strip()
    assert shown.returncode == 2 and "Traceback" not in said and str(file) in said, said
    assert file.read_bytes() == before, "the damaged file is left as it was, for a restore"


async def test_a_file_damaged_under_a_running_server_answers_503_and_readiness_says_so(
    data_dir: Path, tmp_path: Path, corpus_index: Path
) -> None:
    data = _copy(data_dir, tmp_path)
    settings = Settings(data_dir=data, corpus_index=corpus_index, search_provider="local")
    answers: list[httpx.Response] = []
    with serve_port(create_app(settings), lifespan="on") as port:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            listed = (await client.get("/v1/research", params={"limit": 100})).json()["items"]
            assert len(listed) == THREADS
            assert (await client.get("/readyz")).status_code == 200
            _garbage_in_middle(data / "checkpoints.sqlite")
            # A commit makes the readers drop what they cached: they read the file again.
            answers.append(await client.post("/v1/research", json={"topic": TOPIC}))
            for thread in [t["thread_id"] for t in listed]:
                for path in ("", "/report", "/notes", "/sources/1", "/export"):
                    answers.append(await client.get(f"/v1/research/{thread}{path}"))
            answers.append(await client.get("/v1/research", params={"limit": 100}))
            ready = await client.get("/readyz")
    codes = [a.status_code for a in answers]
    assert 500 not in codes, [a.text[:200] for a in answers if a.status_code == 500]
    failed = [a for a in answers if a.status_code == 503]
    assert failed, f"some request met the damage: {codes}"
    for answer in failed:
        error = answer.json()["error"]
        assert error["code"] == "backend_unavailable" and "restore" in error["message"]
    assert ready.status_code == 503 and "damaged" in ready.json()["error"]["message"]
