"""Local corpus: index build time and query latency on the Wikipedia demo corpus.

    python bench/local_search.py [--queries 300]

Fetches the demo corpus into the data directory first if it is not there.
"""

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path

from app.settings import Settings
from tools.corpus_files import iter_documents
from tools.local_corpus import LocalCorpus, build_index
from tools.wiki_corpus import fetch_demo_corpus

HAND_WRITTEN = [
    "history of the printing press",
    "Johannes Gutenberg",
    "causes of the French Revolution",
    "Estates General 1789",
    "photosynthesis",
    "fall of the Roman Empire",
    "quantum mechanics",
    "climate change effects",
    "printing press impact society",
    "movable type invention",
]


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main(count: int) -> None:
    settings = Settings()
    jsonl = fetch_demo_corpus(settings.corpus_index_path.parent, report=print)
    documents = list(iter_documents(jsonl))
    rng = random.Random(7)
    queries = list(HAND_WRITTEN)
    while len(queries) < count:
        words = rng.choice(documents).text.split()
        start = rng.randrange(max(1, len(words) - 4))
        queries.append(" ".join(words[start : start + rng.randint(2, 4)]))

    with tempfile.TemporaryDirectory() as tmp:
        index = Path(tmp) / "index.sqlite"
        stats = build_index(documents, index)
        size_mb = index.stat().st_size / 1e6
        corpus = LocalCorpus(index)
        for query in queries[:30]:
            corpus.search_sync(query, 10)  # warm the page cache
        latencies = []
        for query in queries:
            started = time.perf_counter()
            corpus.search_sync(query, 10)
            latencies.append((time.perf_counter() - started) * 1000)
        corpus.close()

    print(f"documents {stats.documents}, passages {stats.passages}, index {size_mb:.1f} MB")
    print(f"index build {stats.seconds:.2f} s")
    print(
        f"query latency over {len(latencies)} queries (top 10, with text): "
        f"p50 {percentile(latencies, 0.50):.2f} ms, p99 {percentile(latencies, 0.99):.2f} ms, "
        f"mean {statistics.mean(latencies):.2f} ms"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--queries", type=int, default=300)
    main(parser.parse_args().queries)
