"""Usage records for one node step."""

import time

from graph.models import NodeUsage, Usage


def spent(node: str, started: float, requests: int = 0) -> Usage:
    """Usage of one call of `node` that began at `started` (a `time.perf_counter()` value)."""
    return Usage(
        nodes={node: NodeUsage(calls=1, seconds=time.perf_counter() - started, requests=requests)}
    )
