"""The service's heap after start-up: frozen, collected less often."""

import subprocess
import sys


def test_freeze_heap_freezes_the_heap_and_raises_the_thresholds() -> None:
    # In a fresh interpreter: freezing the test process's heap would outlive this test.
    probe = (
        "import gc; from app.heap import freeze_heap, YOUNG_THRESHOLD; "
        "before = gc.get_freeze_count(); freeze_heap(); "
        "assert before == 0 and gc.get_freeze_count() > 0, gc.get_freeze_count(); "
        "assert gc.get_threshold()[0] == YOUNG_THRESHOLD > 700, gc.get_threshold(); "
        "print('ok')"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
