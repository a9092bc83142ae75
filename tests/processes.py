"""The service's own processes (`research-agent serve` and `worker`) started for a test.

`server` and `worker` start one process; `together` starts several at once (their Python
start-ups overlap) and yields once every one is ready, as a deployment's would.
"""

import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

CLI = Path(sys.executable).parent / "research-agent"
STARTUP_TIMEOUT_S = 60.0
WORKER_READY = b"worker: executing"


@dataclass(frozen=True)
class Launch:
    """A process to start, and how to tell it is ready."""

    command: list[str]
    env: dict[str, str]
    log: Path
    ready: Callable[[], bool]
    stop_s: float = 30.0  # how long it may take to stop after SIGTERM before the test fails


def serving(env: dict[str, str], port: int, log: Path, *options: str) -> Launch:
    """`research-agent serve` on `port`, ready once `/readyz` answers 200."""

    def ready() -> bool:
        try:
            return httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).status_code == 200
        except httpx.TransportError:
            return False

    return Launch([str(CLI), "serve", "--port", str(port), *options], env, log, ready)


def working(env: dict[str, str], log: Path, stop_s: float = 30.0) -> Launch:
    """`research-agent worker`, ready once it says it is executing runs."""
    return Launch([str(CLI), "worker"], env, log, lambda: WORKER_READY in log.read_bytes(), stop_s)


@contextmanager
def server(
    env: dict[str, str], port: int, log: Path, *options: str
) -> Iterator[subprocess.Popen[bytes]]:
    """`research-agent serve` on `port`, once `/readyz` answers 200; stopped on exit."""
    with together(serving(env, port, log, *options)) as (process,):
        yield process


@contextmanager
def worker(
    env: dict[str, str], log: Path, stop_s: float = 30.0
) -> Iterator[subprocess.Popen[bytes]]:
    """`research-agent worker`, once it says it is executing runs; stopped on exit.

    `stop_s`: how long it may take to stop after SIGTERM before the test fails.
    """
    with together(working(env, log, stop_s)) as (process,):
        yield process


@contextmanager
def together(*launches: Launch) -> Iterator[list[subprocess.Popen[bytes]]]:
    """Start every process at once; yield them once each is ready; stop them on exit.

    On exit each is sent SIGTERM (the last started first), then each must stop within its
    `stop_s`.
    """
    with ExitStack() as stack:
        processes: list[subprocess.Popen[bytes]] = []
        stack.callback(_stop, launches, processes)
        for launch in launches:
            with launch.log.open("ab") as output:
                processes.append(
                    subprocess.Popen(launch.command, env=launch.env, stdout=output, stderr=output)
                )
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        waiting = list(zip(launches, processes, strict=True))
        while waiting := [(launch, p) for launch, p in waiting if not launch.ready()]:
            for launch, process in waiting:
                assert process.poll() is None, launch.log.read_text()
                assert time.monotonic() < deadline, f"{launch.command[1]} never became ready"
            time.sleep(0.05)  # polling readiness, bounded by the deadline
        yield processes


def _stop(launches: tuple[Launch, ...], processes: list[subprocess.Popen[bytes]]) -> None:
    running = [
        (launch, p) for launch, p in zip(launches, processes, strict=False) if p.poll() is None
    ]
    for _, process in reversed(running):
        process.terminate()
    for launch, process in reversed(running):
        process.wait(timeout=launch.stop_s)
