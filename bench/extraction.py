"""Main-text extraction: our extractor against the naive and trafilatura baselines.

Runs the scorer of the extraction dev set (its score.py; the set is not part of this repo)
once over its 205 annotated pages, with tools.extraction:extract_main_text, a BeautifulSoup
get_text dump and trafilatura's extract() with defaults, and prints precision, recall,
F1 and mean milliseconds per page for each, plus our F1 and time relative to trafilatura
measured in the same run.

    python bench/extraction.py [--dev-set PATH] [--limit N] [--json PATH]

PATH is the dev set's folder (the one holding score.py); it defaults to the
RESEARCH_EXTRACTION_DEVSET environment variable.

Timings vary by a few ms from run to run, and F1 differences below about 0.01 are
noise on this set (one snippet moves F1 by about 0.001).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DEV_SET_ENV = "RESEARCH_EXTRACTION_DEVSET"
OURS = "tools.extraction:extract_main_text"
BASELINES = ("naive", "trafilatura")
GOAL_F1 = 0.92


def score(dev_set: Path, limit: int | None) -> list[dict[str, Any]]:
    """Run score.py in a subprocess and return its per-extractor rows."""
    with tempfile.TemporaryDirectory() as tmp:
        rows_path = Path(tmp) / "rows.json"
        command = [
            sys.executable,
            str(dev_set / "score.py"),
            "--data",
            str(dev_set),
            "--pythonpath",
            str(REPO),
            "--extract",
            OURS,
            *(arg for name in BASELINES for arg in ("--baseline", name)),
            "--json",
            str(rows_path),
        ]
        if limit:
            command += ["--limit", str(limit)]
        done = subprocess.run(command, capture_output=True, text=True, cwd=REPO)
        if done.returncode:
            sys.exit(f"score.py failed:\n{done.stderr}")
        rows: list[dict[str, Any]] = json.loads(rows_path.read_text(encoding="utf-8"))
    return rows


def main(dev_set: Path | None, limit: int | None, json_path: Path | None) -> None:
    if dev_set is None:
        sys.exit(
            f"no dev set: pass --dev-set PATH or set {DEV_SET_ENV} to the extraction dev set's"
            " folder (the one holding score.py)"
        )
    dev_set = dev_set.expanduser().resolve()
    if not (dev_set / "score.py").is_file():
        sys.exit(f"no score.py in {dev_set}; pass --dev-set PATH (or set {DEV_SET_ENV})")
    rows = score(dev_set, limit)
    width = max(len(row["extractor"]) for row in rows)
    print(f"{'extractor':<{width}}  pages  precision  recall     F1  ms/page")
    for row in rows:
        print(
            f"{row['extractor']:<{width}}  {row['pages']:>5}  {row['precision']:>9.3f}"
            f"  {row['recall']:>6.3f}  {row['f1']:>5.3f}  {row['ms_per_page']:>7.1f}"
        )
    ours, reference = rows[0], rows[-1]
    time_ratio = ours["ms_per_page"] / reference["ms_per_page"]
    print(
        f"\nours vs trafilatura extract(): F1 {ours['f1'] - reference['f1']:+.3f}, "
        f"time x{time_ratio:.2f}"
    )
    met = ours["f1"] >= GOAL_F1 and time_ratio <= 1
    print(f"goal (F1 >= {GOAL_F1}, no slower than trafilatura): {'met' if met else 'not met'}")
    if json_path:
        json_path.write_text(json.dumps(rows, ensure_ascii=False, indent=1), encoding="utf-8")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--dev-set",
        type=Path,
        default=Path(os.environ[DEV_SET_ENV]) if os.environ.get(DEV_SET_ENV) else None,
        metavar="PATH",
        help=f"the dev set's folder, with score.py (default: ${DEV_SET_ENV})",
    )
    parser.add_argument("--limit", type=int, help="score only the first N pages")
    parser.add_argument(
        "--json", type=Path, metavar="PATH", help="also write per-page results (missed snippets)"
    )
    args = parser.parse_args()
    main(args.dev_set, args.limit, args.json)
