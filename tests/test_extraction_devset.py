"""The extractor on the 205 pages of the shared development set, scored by its own script.

A floor against regressions, not the target: the figures that matter are printed by
bench/extraction.py. Skipped where the shared folder is not beside the repository.
"""

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from tools.extraction import extract_main_text

DEV_SET = Path(__file__).resolve().parents[2] / "shared" / "extraction-dev"
F1_FLOOR = 0.94


def load_scorer() -> ModuleType:
    spec = importlib.util.spec_from_file_location("extraction_dev_score", DEV_SET / "score.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(not (DEV_SET / "score.py").is_file(), reason=f"no development set at {DEV_SET}")
def test_the_extractor_stays_above_the_f1_floor_on_the_dev_set() -> None:
    scorer = load_scorer()
    totals = {"tp": 0, "fp": 0, "fn": 0, "tn": 0}
    for _ident, entry, html in scorer.load_pages(str(DEV_SET), None, None):
        counts = scorer.score_page(entry, extract_main_text(html, entry.get("url")).text)
        for key in totals:
            totals[key] += counts[key]
    figures = scorer.summarise(totals)
    assert figures["f1"] >= F1_FLOOR, figures
    assert figures["exclusion"] >= 0.9, figures
