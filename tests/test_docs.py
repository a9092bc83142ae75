"""The architecture guide names only files and folders that exist, so it cannot rot silently.

Every backticked path in `docs/architecture.md` that ends in `.py` or `/` must exist in
the repository: a module renamed, moved or deleted without the guide following fails here.
"""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "architecture.md"
# A code span holding one path-like token: no spaces, ending in `.py` or `/`.
PATH_SPAN = re.compile(r"`([\w./-]+(?:\.py|/))`")


def named_paths(text: str) -> list[str]:
    """The backticked `.py` and folder paths of `text`, each once, in order."""
    return list(dict.fromkeys(PATH_SPAN.findall(text)))


def test_named_paths_are_found() -> None:
    """The pattern picks out modules and folders, and leaves dotted names and URLs alone."""
    text = "Open `core/state.py` and `app/`; not `stores.events`, `GET /v1/research` or `x`."
    assert named_paths(text) == ["core/state.py", "app/"]


def test_the_guide_names_paths() -> None:
    """The guide is there and names modules, so the test below checks something."""
    assert len(named_paths(GUIDE.read_text(encoding="utf-8"))) >= 20


@pytest.mark.parametrize("path", named_paths(GUIDE.read_text(encoding="utf-8")))
def test_every_named_path_exists(path: str) -> None:
    """A path the guide names is a file (`.py`) or a folder (`/`) of the repository."""
    target = ROOT / path
    if path.endswith("/"):
        assert target.is_dir(), f"docs/architecture.md names the folder {path}, which is gone"
    else:
        assert target.is_file(), f"docs/architecture.md names {path}, which is gone"
