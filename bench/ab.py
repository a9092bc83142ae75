"""Same-invocation A/B of a benchmark: this checkout against another commit, alternating.

A change that is small against this machine's noise is only visible when both sides run
close together: each pair runs the base commit's copy of the benchmark, then this
checkout's, under the same load. The base is checked out in a temporary git worktree
and imported from there (`PYTHONPATH`), with this environment's packages.

    python bench/ab.py --base e469080 --pairs 3 -- bench/graph_overhead.py --runs 200
"""

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _run(tree: Path, command: list[str]) -> str:
    env = os.environ | {"PYTHONPATH": str(tree)}
    done = subprocess.run(
        [sys.executable, *command], cwd=tree, env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        return f"(exit {done.returncode})\n{done.stdout}{done.stderr[-2000:]}"
    return done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="the commit to compare against")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- SCRIPT [ARGS]")
    args = parser.parse_args()
    command = [c for c in args.command if c != "--"]
    if not command:
        parser.error("name the benchmark after --, e.g. -- bench/graph_overhead.py --runs 200")
    head = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    with tempfile.TemporaryDirectory() as tmp:
        base_tree = Path(tmp) / "base"
        subprocess.run(
            ["git", "worktree", "add", "--detach", "-q", str(base_tree), args.base],
            cwd=ROOT,
            check=True,
        )
        try:
            for pair in range(1, args.pairs + 1):
                for label, tree in ((f"base {args.base}", base_tree), (f"head {head}", ROOT)):
                    print(f"=== pair {pair} · {label}: {' '.join(command)}", flush=True)
                    print(_run(tree, command), flush=True)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(base_tree)], cwd=ROOT)


if __name__ == "__main__":
    main()
