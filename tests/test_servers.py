"""The suite's loopback server: stopping it leaves no socket open for a later test to meet."""

import gc
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Iterator
from typing import Any

import pytest

from .servers import serve_port


async def answer(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "http":
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})


def keep_connecting(port: int, stop: threading.Event) -> None:
    """What a browser does as a server goes away: connect again and again, a few held open."""
    held: deque[socket.socket] = deque()
    while not stop.is_set():
        try:
            held.append(socket.create_connection(("127.0.0.1", port), timeout=0.2))
        except OSError:
            pass
        while len(held) > 200:
            held.popleft().close()
    for sock in held:
        sock.close()


@pytest.fixture
def unraisable() -> Iterator[list[str]]:
    """What the interpreter could not raise (a socket's unclosed warning among them)."""
    seen: list[str] = []
    before = sys.unraisablehook
    sys.unraisablehook = lambda raised: seen.append(repr(raised.exc_value))
    try:
        yield seen
    finally:
        sys.unraisablehook = before


def test_a_server_stopped_while_a_client_keeps_connecting_leaves_no_socket_open(
    unraisable: list[str],
) -> None:
    for _ in range(5):
        stop = threading.Event()
        with serve_port(answer, timeout_graceful_shutdown=0.2) as port:
            client = threading.Thread(target=keep_connecting, args=(port, stop))
            client.start()
            time.sleep(0.05)  # connections come and go; some are open as the server stops
        stop.set()
        client.join()
        gc.collect()
    assert unraisable == []
