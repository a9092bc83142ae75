"""Run an ASGI app under uvicorn on a loopback port, in a background thread."""

import asyncio
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import httpx
import uvicorn

from app.api import create_app
from app.settings import Settings

# The two API keys of the isolation tests: every id one can name is tried with the other.
KEY_A, KEY_B = "key-alice", "key-bob"

STARTUP_TIMEOUT_S = 10.0


def free_port() -> int:
    """A port nothing listens on (for testing unreachable services)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _serve_then_close(server: uvicorn.Server, sock: socket.socket) -> None:
    """Serve until told to exit, then close the connections clients still hold open.

    uvicorn leaves open a connection accepted as it stops (a browser connecting again):
    closed here, its socket never outlives the server's loop, to be reported as a
    resource left open in whatever test runs next.
    """
    await server.serve(sockets=[sock])
    await asyncio.sleep(0)  # connections accepted just before the end join the set
    for connection in list(server.server_state.connections):
        connection.transport.close()
    await asyncio.sleep(0)  # the transports' close callbacks run


@contextmanager
def serve_port(app: Any, **config: Any) -> Iterator[int]:
    """Serve `app` on a socket bound before the thread starts (no port race); yield its port."""
    # IPPROTO_TCP spelled out: asyncio sets TCP_NODELAY only when the socket says so, and
    # without it a keep-alive response waits ~40 ms for a delayed ACK.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    options: dict[str, Any] = {
        "lifespan": "off",
        "ws": "none",
        "http": "h11",
        "loop": "asyncio",
        "log_level": "warning",
        "timeout_graceful_shutdown": 2,
    }
    server = uvicorn.Server(uvicorn.Config(app, **(options | config)))
    thread = threading.Thread(
        target=asyncio.run, args=(_serve_then_close(server, sock),), daemon=True
    )
    thread.start()
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test server did not start (see its log above)")
        time.sleep(0.001)  # polling the started flag, not a timed wait
    try:
        yield int(sock.getsockname()[1])
    finally:
        server.should_exit = True
        thread.join()
        sock.close()


@contextmanager
def serve(app: Any) -> Iterator[str]:
    """Serve `app` over plain HTTP on loopback; yield its base URL."""
    with serve_port(app) as port:
        yield f"http://127.0.0.1:{port}"


def bearer(key: str) -> dict[str, str]:
    """The headers that present `key`."""
    return {"Authorization": f"Bearer {key}"}


@asynccontextmanager
async def two_key_clients(
    settings: Settings,
) -> AsyncIterator[tuple[httpx.AsyncClient, httpx.AsyncClient]]:
    """A live server of `settings` (keys KEY_A and KEY_B), and a client for each key."""
    with serve_port(create_app(settings), lifespan="on") as port:
        base = f"http://127.0.0.1:{port}"
        async with (
            httpx.AsyncClient(base_url=base, headers=bearer(KEY_A), timeout=30) as a,
            httpx.AsyncClient(base_url=base, headers=bearer(KEY_B), timeout=30) as b,
        ):
            yield a, b
