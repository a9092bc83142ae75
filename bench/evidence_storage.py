"""What keeping every run's evidence costs on disk: bytes per run and per text, with dedup.

    python bench/evidence_storage.py [--runs 50]

Runs offline research (extractive engine, the Wikipedia demo corpus) through the run
service on a fresh SQLite data file, then reads the evidence tables. Topics come in
pairs about one subject (its history, its impact), as a team researching related
questions would, so the runs share some of what they read. "Without dedup" is what the
same records would take if every run stored its own copy of each text it read. Then it
replays a tenth of the runs and says what the replays added.
"""

import argparse
import asyncio
import sqlite3
import tempfile
import time
from pathlib import Path

from app.runtime import open_runtime
from app.settings import Settings
from core.options import ResearchRequest, RunOptions
from service.thread_ids import LOCAL_OWNER
from tools.corpus_files import iter_documents
from tools.local_corpus import build_index
from tools.wiki_corpus import fetch_demo_corpus

SUBJECTS = [
    "the printing press",
    "the steam engine",
    "the French Revolution",
    "photosynthesis",
    "the Roman Empire",
    "penicillin",
    "the telephone",
    "the Ottoman Empire",
    "jazz",
    "the Industrial Revolution",
    "vaccination",
    "the Silk Road",
    "the Renaissance",
    "plate tectonics",
    "the Cold War",
    "electricity",
    "the Mongol Empire",
    "Buddhism",
    "the Internet",
    "the Black Death",
    "impressionism",
    "the theory of evolution",
    "the Great Depression",
    "the printing of newspapers",
    "nuclear power",
]
ASPECTS = ["history of {}", "impact of {}"]


def topics(count: int) -> list[str]:
    """`count` topics, two aspects of each subject in turn."""
    every = [aspect.format(s) for s in SUBJECTS for aspect in ASPECTS]
    return (every * (count // len(every) + 1))[:count]


async def research(settings: Settings, wanted: list[str], replays: int) -> tuple[list[str], float]:
    """Run every topic (and replay the first `replays`); the thread ids and the wall time."""
    async with open_runtime(settings) as runtime:
        manager, events = runtime.manager, runtime.stores.events

        async def finish(thread_id: str) -> None:
            async for event in events.follow(thread_id):
                if event.name == "done":
                    return

        started = time.perf_counter()
        options = RunOptions()
        threads = []
        for topic in wanted:
            record = await manager.start(LOCAL_OWNER, ResearchRequest(topic=topic, options=options))
            threads.append(record.thread_id)
        await asyncio.gather(*(finish(t) for t in threads))
        wall = time.perf_counter() - started
        replayed = [await manager.rerun(LOCAL_OWNER, t, "replay") for t in threads[:replays]]
        await asyncio.gather(*(finish(r.thread_id) for r in replayed))
        await manager.shutdown()
    return threads, wall


def figures(db: Path, threads: list[str]) -> dict[str, int]:
    """Bytes and counts of the evidence tables, for `threads` (None: all)."""
    marks = ",".join("?" * len(threads))
    with sqlite3.connect(db) as conn:
        one = lambda sql: conn.execute(sql, threads).fetchone()[0] or 0  # noqa: E731
        return {
            "runs": one(f"SELECT COUNT(*) FROM evidence_run WHERE thread_id IN ({marks})"),
            "records": one(f"SELECT COUNT(*) FROM evidence_record WHERE thread_id IN ({marks})"),
            "record_bytes": one(
                f"SELECT SUM(LENGTH(body)) FROM evidence_record WHERE thread_id IN ({marks})"
            )
            + one(f"SELECT SUM(LENGTH(header)) FROM evidence_run WHERE thread_id IN ({marks})"),
            "refs": one(f"SELECT COUNT(*) FROM evidence_ref WHERE thread_id IN ({marks})"),
            "texts": one(
                "SELECT COUNT(*) FROM evidence_content WHERE hash IN "
                f"(SELECT hash FROM evidence_ref WHERE thread_id IN ({marks}))"
            ),
            "text_bytes": one(
                "SELECT SUM(LENGTH(body)) FROM evidence_content WHERE hash IN "
                f"(SELECT hash FROM evidence_ref WHERE thread_id IN ({marks}))"
            ),
            "text_chars": one(
                "SELECT SUM(chars) FROM evidence_content WHERE hash IN "
                f"(SELECT hash FROM evidence_ref WHERE thread_id IN ({marks}))"
            ),
            "text_bytes_no_dedup": one(
                "SELECT SUM(LENGTH(c.body)) FROM evidence_ref r JOIN evidence_content c "
                f"ON c.hash = r.hash WHERE r.thread_id IN ({marks})"
            ),
            "text_chars_no_dedup": one(
                "SELECT SUM(c.chars) FROM evidence_ref r JOIN evidence_content c "
                f"ON c.hash = r.hash WHERE r.thread_id IN ({marks})"
            ),
        }


def main(runs: int) -> None:
    index = Settings().corpus_index_path
    if not index.is_file():
        build_index(iter_documents(fetch_demo_corpus(index.parent, report=print)), index)
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(
            data_dir=Path(tmp), corpus_index=index, search_provider="local", max_concurrent_runs=8
        )
        threads, wall = asyncio.run(research(settings, topics(runs), max(1, runs // 10)))
        db = settings.checkpoint_path
        runs_only = figures(db, threads)
        with sqlite3.connect(db) as conn:
            every = [t for (t,) in conn.execute("SELECT thread_id FROM evidence_run")]
        everything = figures(db, every)
        file_bytes = db.stat().st_size + sum(
            p.stat().st_size for p in db.parent.glob(db.name + "-*")
        )
    n = runs_only["runs"]
    stored = runs_only["text_bytes"] + runs_only["record_bytes"]
    no_dedup = runs_only["text_bytes_no_dedup"] + runs_only["record_bytes"]
    print(
        f"{n} offline runs in {wall:.1f} s; {runs_only['records']} records, "
        f"{runs_only['refs']} texts read, {runs_only['texts']} distinct"
    )
    print(
        f"texts: {runs_only['text_chars']:,} chars -> {runs_only['text_bytes']:,} bytes deflated "
        f"({runs_only['text_chars_no_dedup']:,} chars / "
        f"{runs_only['text_bytes_no_dedup']:,} bytes without dedup)"
    )
    print(f"records (JSON): {runs_only['record_bytes']:,} bytes")
    print(
        f"per run: {stored / n:,.0f} bytes with dedup, {no_dedup / n:,.0f} without "
        f"({no_dedup / stored:.2f}x)"
    )
    print(
        f"per text: {runs_only['text_bytes'] / runs_only['texts']:,.0f} bytes deflated "
        f"({runs_only['text_chars'] / runs_only['texts']:,.0f} chars)"
    )
    replays = everything["runs"] - n
    added = (everything["text_bytes"] + everything["record_bytes"]) - stored
    print(
        f"{replays} replays added {added:,} bytes ({added / max(replays, 1):,.0f} per replay: "
        "their records; the texts are shared)"
    )
    print(f"data file (checkpoints, events, registry, evidence): {file_bytes:,} bytes")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=50)
    main(parser.parse_args().runs)
