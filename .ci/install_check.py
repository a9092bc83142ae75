"""README command 1's install on a fresh venv: under a minute, and no walk down old releases.

Runs `pip install -e .` (no cache, the venv's own pip, as on a fresh machine) and reads
which distributions pip fetched. A project fetched in more than one version is pip
backtracking: it took a release, found a conflict, and tried an older one. Fails when the
install takes 60 s or more, when one of our direct dependencies backtracks (its lower
bound in pyproject.toml is ours to tighten), or when any project is walked more than one
release down; a single step on a transitive project (its newest release needs something
the index lacks) is printed, not failed.

    python .ci/install_check.py
"""

import re
import subprocess
import sys
import tempfile
import time
import tomllib
from collections import defaultdict
from pathlib import Path

# Requirements and file names parsed as pip parses them (packaging is in the project's
# venv, where .ci/run runs this: langchain-core depends on it).
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name, parse_sdist_filename, parse_wheel_filename

ROOT = Path(__file__).resolve().parent.parent
LIMIT_S = 60.0
FETCHED = re.compile(
    r"(?:Downloading|Processing|Using cached) (?:\S*/)?([^/\s]+?\.(?:whl|tar\.gz|zip))"
)


def direct_dependencies() -> set[str]:
    """The projects pyproject.toml names in its (non-optional) dependencies."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return {canonicalize_name(Requirement(d).name) for d in project["dependencies"]}


def fetched_versions(log: str) -> dict[str, set[str]]:
    """Each project pip fetched, with the versions it fetched (names as pip compares them)."""
    versions: dict[str, set[str]] = defaultdict(set)
    for filename in FETCHED.findall(log):
        if filename.endswith(".whl"):
            name, version, *_ = parse_wheel_filename(filename)
        else:
            name, version = parse_sdist_filename(filename)
        versions[name].add(str(version))
    return versions


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        venv = Path(tmp) / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        start = time.monotonic()
        done = subprocess.run(
            [str(venv / "bin" / "pip"), "install", "--no-cache-dir", "-e", str(ROOT)],
            capture_output=True,
            text=True,
            check=False,
        )
        seconds = time.monotonic() - start
    if done.returncode != 0:
        print(done.stdout[-3000:], done.stderr[-3000:], sep="\n")
        return 1
    versions = fetched_versions(done.stdout)
    backtracked = {name: sorted(v) for name, v in versions.items() if len(v) > 1}
    ours = direct_dependencies()
    failures = [f"{seconds:.1f} s >= {LIMIT_S:.0f} s"] if seconds >= LIMIT_S else []
    for name, tried in sorted(backtracked.items()):
        if name in ours or len(tried) > 2:
            failures.append(f"{name} backtracked over {tried}")
    print(f"fresh `pip install -e .`: {seconds:.1f} s, {len(versions)} projects fetched")
    for name, tried in sorted(backtracked.items()):
        print(f"  one step back on {name} (a transitive dependency): {tried}")
    for failure in failures:
        print(f"  FAILED: {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
