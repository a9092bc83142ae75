"""Garbage collection for a long-lived service: freeze the start-up heap, collect less often."""

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
