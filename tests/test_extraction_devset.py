"""The extractor on the 205 pages of the scored extraction dev set, scored by its own script.

A floor against regressions, not the target: the figures that matter are printed by
bench/extraction.py. The dev set is not part of the repository: set
RESEARCH_EXTRACTION_DEVSET to its folder (the one holding score.py) to run this test;
it is skipped, saying why, otherwise.
"""

import importlib.util
import os
from pathlib import Path
from types import ModuleType

import pytest

from tools.extraction import extract_main_text

DEV_SET_ENV = "RESEARCH_EXTRACTION_DEVSET"
F1_FLOOR = 0.94


@pytest.fixture
def dev_set() -> Path:
    """The dev set's folder named by the environment; skip when it is unset or missing."""
    value = os.environ.get(DEV_SET_ENV, "").strip()
    if not value:
        pytest.skip(f"{DEV_SET_ENV} is not set (the extraction dev set's folder, with score.py)")
    folder = Path(value).expanduser()
    if not (folder / "score.py").is_file():
        pytest.skip(f"{DEV_SET_ENV}={value}: no such folder, or no score.py in it")
    return folder


def load_scorer(dev_set: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location("extraction_dev_score", dev_set / "score.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_extractor_stays_above_the_f1_floor_on_the_dev_set(dev_set: Path) -> None:
    scorer = load_scorer(dev_set)
    totals = {"tp": 0, "fp": 0, "fn": 0, "tn": 0}
    for _ident, entry, html in scorer.load_pages(str(dev_set), None, None):
        counts = scorer.score_page(entry, extract_main_text(html, entry.get("url")).text)
        for key in totals:
            totals[key] += counts[key]
    figures = scorer.summarise(totals)
    assert figures["f1"] >= F1_FLOOR, figures
    assert figures["exclusion"] >= 0.9, figures
