"""Garbage collection for a long-lived service process.

A service holds a large heap that never dies (LangGraph, LangChain, pydantic, FastAPI)
and allocates fast while it runs many research runs at once; with CPython's defaults a
good share of a run's CPU goes to collections that walk that heap and find nothing
(bench/graph_overhead.py measures it). Freezing the heap once it is built moves it out
of the collector's sight, and a larger young generation makes collections rarer; cycles
are still collected, only later.
"""

import gc

# Allocations between collections of the youngest generation (CPython's default: 700),
# and how many collections of each generation trigger one of the next (default 10, 10).
YOUNG_THRESHOLD = 10_000
MIDDLE_THRESHOLD = 50
OLD_THRESHOLD = 100


def freeze_heap() -> None:
    """Freeze what exists now (call once start-up has built it) and collect less often."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_THRESHOLD, MIDDLE_THRESHOLD, OLD_THRESHOLD)
