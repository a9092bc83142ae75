"""Garbage collection for a long-lived service process.

The heap built at start-up (LangGraph, LangChain, pydantic, FastAPI) never dies; frozen,
the collector stops walking it, and a larger young generation makes collections rarer.
"""

import gc

# CPython's defaults: 700, 10, 10.
YOUNG_THRESHOLD = 10_000
MIDDLE_THRESHOLD = 50
OLD_THRESHOLD = 100


def freeze_heap() -> None:
    """Freeze what exists now (call once start-up has built it) and collect less often."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_THRESHOLD, MIDDLE_THRESHOLD, OLD_THRESHOLD)
