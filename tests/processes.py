"""The service's own processes (`research-agent serve` and `worker`) started for a test."""

import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

CLI = Path(sys.executable).parent / "research-agent"
STARTUP_TIMEOUT_S = 60.0
WORKER_READY = b"worker: executing"


@contextmanager
def server(
    env: dict[str, str], port: int, log: Path, *options: str
) -> Iterator[subprocess.Popen[bytes]]:
    """`research-agent serve` on `port`, once `/readyz` answers 200; stopped on exit."""

    def ready() -> bool:
        try:
            return httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).status_code == 200
        except httpx.TransportError:
            return False

    with _process([str(CLI), "serve", "--port", str(port), *options], env, log, ready) as process:
        yield process


@contextmanager
def worker(
    env: dict[str, str], log: Path, stop_s: float = 30.0
) -> Iterator[subprocess.Popen[bytes]]:
    """`research-agent worker`, once it says it is executing runs; stopped on exit.

    `stop_s`: how long it may take to stop after SIGTERM before the test fails.
    """
    with _process(
        [str(CLI), "worker"], env, log, lambda: WORKER_READY in log.read_bytes(), stop_s
    ) as process:
        yield process


@contextmanager
def _process(
    command: list[str],
    env: dict[str, str],
    log: Path,
    ready: Callable[[], bool],
    stop_s: float = 30.0,
) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("ab") as output:
        process = subprocess.Popen(command, env=env, stdout=output, stderr=output)
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while not ready():
            assert process.poll() is None, log.read_text()
            assert time.monotonic() < deadline, f"{command[1]} never became ready"
            time.sleep(0.05)  # polling readiness, bounded by the deadline
        yield process
    finally:
        if process.poll() is None:
            process.terminate()
            process.wait(timeout=stop_s)
