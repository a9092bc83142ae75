"""Wall time of a whole `research-agent run` from a shell, on the Wikipedia demo corpus.

    python bench/demo_run.py [--runs 5] [TOPIC ...]

Each run is a fresh process (imports, corpus, SQLite checkpoints, report), as a user sees
it. The corpus is fetched first if missing; its download is not part of the figure.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from app.settings import Settings
from tools.corpus_files import iter_documents
from tools.local_corpus import build_index
from tools.wiki_corpus import fetch_demo_corpus

TOPICS = ["history of the printing press", "causes of the French Revolution"]


def main(runs: int, topics: list[str]) -> None:
    index = Settings().corpus_index_path
    if not index.is_file():
        build_index(iter_documents(fetch_demo_corpus(index.parent, report=print)), index)
    cli = Path(sys.executable).parent / "research-agent"
    with tempfile.TemporaryDirectory() as tmp:
        env = os.environ | {
            "RESEARCH_CHECKPOINT_DB": str(Path(tmp) / "bench.sqlite"),
            "RESEARCH_CORPUS_INDEX": str(index),
        }
        for topic in topics:
            walls = []
            for _ in range(runs):
                started = time.perf_counter()
                subprocess.run([str(cli), "run", topic], env=env, capture_output=True, check=True)
                walls.append(time.perf_counter() - started)
            print(
                f"{topic!r}: median {statistics.median(walls):.2f} s, min {min(walls):.2f} s, max {max(walls):.2f} s over {runs} runs"
            )
        started = time.perf_counter()
        subprocess.run([str(cli), "--help"], env=env, capture_output=True, check=True)
        print(
            f"process start-up alone (research-agent --help): {time.perf_counter() - started:.2f} s"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("topics", nargs="*", default=TOPICS)
    args = parser.parse_args()
    main(args.runs, args.topics)
