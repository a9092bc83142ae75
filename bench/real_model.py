"""The research-quality dev set through the LLM engine on a real model server.

The extractive engine runs the same topics beside it. For each topic both engines run in this process (the graph on an in-memory checkpointer,
the configured search: the demo corpus offline), each report is written to
OUT/<engine>/NN.md, and the scorer (`score.py` of the quality dev set, given with --score)
scores both folders with --no-run. Per LLM run it prints the wall time, the status, the
structured-output method the engine settled on (and what the server refused), the steps
that fell back to the extractive engine, the requests and tokens (estimated ones marked),
and whether the run crashed or overran its time budget. A small model will score poorly;
what must hold is that no run crashes or overruns, and that the fallback keeps the report
from being worse than the extractive engine's where the model cannot do a step.

    python bench/real_model.py --base-url http://127.0.0.1:8082/v1
        --score PATH/score.py [--model NAME] [--topics 10] [--skip 0] [--out DIR] [--max-tokens 512]
        [--timeout 120] [--time-budget 300] [--structured-output auto] [--skip-extractive]
"""

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.composition import open_deps  # noqa: E402
from app.settings import Settings  # noqa: E402
from core.options import RunOptions  # noqa: E402
from core.state import initial_state  # noqa: E402
from graph.builder import build_graph  # noqa: E402
from service.runner import thread_config  # noqa: E402
from stores.checkpointer import memory_saver  # noqa: E402


@dataclass
class Outcome:
    """One research run, as the bench reports it."""

    topic: str
    seconds: float = 0.0
    status: str = "crashed"
    error: str | None = None
    over_budget: bool = False
    fallbacks: Counter[str] = field(default_factory=Counter)
    repairs: Counter[str] = field(default_factory=Counter)
    methods: dict[str, str] = field(default_factory=dict)
    refused: set[str] = field(default_factory=set)
    requests: int = 0
    tokens: int = 0
    estimated: int = 0


def model_name(base_url: str) -> str:
    """The first model the server lists."""
    listing = httpx.get(f"{base_url.rstrip('/')}/models", timeout=30).json()
    return str(listing["data"][0]["id"])


async def research(settings: Settings, topic: str, options: RunOptions, out: Path) -> Outcome:
    """One run of `topic`; its report goes to `out`."""
    outcome = Outcome(topic)

    def on_event(mode: str, chunk: Any) -> None:
        if mode != "custom" or not isinstance(chunk, dict):
            return
        if chunk.get("event") == "fallback":
            outcome.fallbacks[chunk["step"]] += 1
        elif chunk.get("event") == "repair":
            outcome.repairs[chunk["step"]] += 1
        elif chunk.get("event") == "structured_output":
            outcome.methods[chunk["model"]] = chunk["method"]
            outcome.refused.update(chunk["refused"])

    started = time.monotonic()
    try:
        async with open_deps(settings) as deps:
            graph = build_graph(memory_saver())
            config = thread_config("bench")
            state = initial_state(topic, options)
            async for mode, chunk in graph.astream(
                state, config, context=deps, stream_mode=["updates", "custom"]
            ):
                on_event(str(mode), chunk)
            values = (await graph.aget_state(config)).values
        out.write_text(values.get("final_report") or "", encoding="utf-8")
        usage = values["usage"]
        outcome.status = values.get("report_status") or "unfinished"
        outcome.over_budget = usage.seconds > options.time_budget_s * 1.1
        outcome.requests = sum(m.requests for m in usage.models.values())
        outcome.tokens = usage.total_tokens
        outcome.estimated = sum(m.estimated for m in usage.models.values())
    except Exception as exc:  # a crash is what this bench exists to count
        outcome.error = f"{type(exc).__name__}: {exc}"
        traceback.print_exc()
    outcome.seconds = time.monotonic() - started
    return outcome


def score(score_py: Path, folder: Path, topics: Path) -> str:
    """The scorer's summary lines for the reports in `folder`."""
    done = subprocess.run(
        [sys.executable, str(score_py), str(folder), "--no-run", "--topics", str(topics)],
        capture_output=True,
        text=True,
        check=False,
    )
    lines = (done.stdout or done.stderr).strip().splitlines()
    return "\n".join(line for line in lines if line.startswith(("mean:", "anchor:"))) or "\n".join(
        lines[-3:]
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", required=True, help="the model server, e.g. .../v1")
    parser.add_argument("--score", type=Path, required=True, help="the quality dev set's score.py")
    parser.add_argument("--model", help="the model's name on the server (default: its first)")
    parser.add_argument("--topics", type=int, default=10, help="the first N topics of the set")
    parser.add_argument("--skip", type=int, default=0, help="start after this many topics")
    parser.add_argument("--out", type=Path, help="where the reports go (default: a temp dir)")
    parser.add_argument("--max-tokens", type=int, default=512)
    parser.add_argument("--timeout", type=int, default=120, help="seconds per model call")
    parser.add_argument("--time-budget", type=float, default=300.0, help="seconds per run")
    parser.add_argument("--max-iterations", type=int, default=3)
    parser.add_argument("--structured-output", default="auto")
    parser.add_argument("--skip-extractive", action="store_true")
    args = parser.parse_args()

    every = json.loads((args.score.parent / "topics.json").read_text(encoding="utf-8"))
    chosen = dict(list(every.items())[args.skip : args.skip + args.topics])
    out = args.out or Path(tempfile.mkdtemp(prefix="real-model-"))
    out.mkdir(parents=True, exist_ok=True)
    topics_file = out / "topics.json"
    topics_file.write_text(json.dumps(chosen), encoding="utf-8")
    model = args.model or model_name(args.base_url)
    os.environ.pop("RESEARCH_ENGINE", None)
    llm = Settings(
        engine="llm",
        llm_base_url=args.base_url,
        models={
            "default": {
                "model": f"openai:{model}",
                "max_tokens": args.max_tokens,
                "timeout_seconds": args.timeout,
                "structured_output": args.structured_output,
            }
        },
    )
    extractive = Settings(engine="extractive")
    options = RunOptions(max_iterations=args.max_iterations, time_budget_s=args.time_budget)
    print(f"model {model} at {args.base_url}; {len(chosen)} topics; reports in {out}")

    engines = [("llm", llm)] if args.skip_extractive else [("extractive", extractive), ("llm", llm)]
    runs = asyncio.run(run_all(engines, list(chosen), options, out))
    report(runs)
    for engine, _ in engines:
        print(f"\n{engine}:\n{score(args.score, out / engine, topics_file)}")
    return 1 if any(r.error is not None or r.over_budget for r in runs) else 0


async def run_all(
    engines: list[tuple[str, Settings]], topics: list[str], options: RunOptions, out: Path
) -> list[Outcome]:
    """Every topic with every engine; the LLM runs are printed as they end, and returned.

    One event loop for all: the chat client's connection pool belongs to the loop it was
    made in, and a second `asyncio.run` would find it closed.
    """
    runs: list[Outcome] = []
    for engine, settings in engines:
        folder = out / engine
        folder.mkdir(exist_ok=True)
        for i, topic in enumerate(topics):
            outcome = await research(settings, topic, options, folder / f"{i:02d}.md")
            if engine == "llm":
                runs.append(outcome)
                print(
                    f"{outcome.seconds:6.1f} s {outcome.status:>8} "
                    f"{'/'.join(sorted(set(outcome.methods.values()))) or '-':>16} "
                    f"req {outcome.requests:3d} tok {outcome.tokens:6d}"
                    f"{f' ({outcome.estimated} est.)' if outcome.estimated else ''} "
                    f"repairs {dict(outcome.repairs) or '-'} "
                    f"fallbacks {dict(outcome.fallbacks) or '-'}  {topic}"
                    + (f"  ERROR {outcome.error}" if outcome.error else "")
                    + ("  OVER BUDGET" if outcome.over_budget else ""),
                    flush=True,
                )
    return runs


def report(runs: list[Outcome]) -> None:
    """The LLM runs' totals."""
    print()
    crashed = sum(r.error is not None for r in runs)
    over = sum(r.over_budget for r in runs)
    fallbacks = sum((r.fallbacks for r in runs), Counter[str]())
    repairs = sum((r.repairs for r in runs), Counter[str]())
    methods = Counter(m for r in runs for m in r.methods.values())
    refused = Counter(m for r in runs for m in r.refused)
    seconds = sorted(r.seconds for r in runs)
    print(f"LLM runs: {len(runs)}, crashed {crashed}, over their time budget {over}")
    if seconds:
        print(f"wall per run: median {seconds[len(seconds) // 2]:.1f} s, max {seconds[-1]:.1f} s")
    print(f"statuses: {dict(Counter(r.status for r in runs))}")
    print(f"structured output settled on: {dict(methods)}; refused by the server: {dict(refused)}")
    print(f"repair rounds by step: {dict(repairs)}")
    print(f"fallbacks by step: {dict(fallbacks)}")
    print(f"requests {sum(r.requests for r in runs)}, tokens {sum(r.tokens for r in runs)}")


if __name__ == "__main__":
    sys.exit(main())
