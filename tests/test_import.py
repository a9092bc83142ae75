"""`research-agent import` obeys the API's rules: an owner, its limits, a log that ends.

A run is exported over real HTTP, then imported with the CLI into a fresh data directory
as it is or altered the way a hostile or broken archive would be; what was imported is
read back through a real server with the keys that should and should not see it.
"""

import copy
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

from app import cli
from app.api import create_app
from app.settings import Settings
from core.models import REPORT_MAX_CHARS
from core.options import TOPIC_MAX_CHARS

from .servers import serve_port
from .support import TOPIC

KEY_A, KEY_B = "key-alice", "key-bob"


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory, corpus_index: Path) -> dict[str, Any]:
    """A finished run's archive, as `GET .../export` gives it."""
    settings = Settings(
        data_dir=tmp_path_factory.mktemp("exported"),
        corpus_index=corpus_index,
        search_provider="local",
    )
    with (
        serve_port(create_app(settings), lifespan="on") as port,
        httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as http,
    ):
        thread = http.post("/v1/research", json={"topic": TOPIC}).json()["thread_id"]
        with http.stream("GET", f"/v1/research/{thread}/events") as stream:
            for _ in stream.iter_lines():
                pass  # the stream closes after `done`
        archive: dict[str, Any] = http.get(f"/v1/research/{thread}/export").json()
    return archive


@pytest.fixture
def fresh(
    tmp_path: Path, corpus_index: Path, monkeypatch: pytest.MonkeyPatch, settings_env: Path
) -> Path:
    """An empty data directory the CLI imports into."""
    data = tmp_path / "fresh"
    monkeypatch.setenv("RESEARCH_DATA_DIR", str(data))
    monkeypatch.setenv("RESEARCH_CORPUS_INDEX", str(corpus_index))
    return data


def _import(tmp_path: Path, archive: dict[str, Any], *args: str) -> Any:
    path = tmp_path / f"archive-{len(list(tmp_path.glob('archive-*')))}.json"
    path.write_text(json.dumps(archive), encoding="utf-8")
    return CliRunner().invoke(cli.app, ["import", str(path), *args])


@pytest.fixture
def serving(fresh: Path, corpus_index: Path) -> Iterator[Any]:
    """Clients of a server on the fresh data directory, one per key (none: no keys)."""

    def clients(*keys: str) -> Any:
        settings = Settings(
            data_dir=fresh, corpus_index=corpus_index, search_provider="local", api_keys=list(keys)
        )
        return serve_port(create_app(settings), lifespan="on")

    yield clients


def _rows(data: Path) -> int:
    """Rows of threads, checkpoints, events and evidence in the data directory's file."""
    path = data / "checkpoints.sqlite"
    if not path.exists():
        return 0
    with sqlite3.connect(path) as db:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return sum(db.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in tables)


def _client(port: int, key: str | None = None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.Client(base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=30)


# -- 8. an owner --------------------------------------------------------------------------


def test_an_import_belongs_to_the_only_key(
    tmp_path: Path, exported: dict[str, Any], fresh: Path, serving: Any, monkeypatch: Any
) -> None:
    monkeypatch.setenv("RESEARCH_API_KEYS", KEY_A)
    answer = _import(tmp_path, exported)
    assert answer.exit_code == 0, answer.output
    thread = exported["thread"]["thread_id"]
    with serving(KEY_A, KEY_B) as port, _client(port, KEY_A) as a, _client(port, KEY_B) as b:
        assert a.get(f"/v1/research/{thread}").json()["status"] == "completed"
        assert a.get(f"/v1/research/{thread}/report").status_code == 200
        assert b.get(f"/v1/research/{thread}").status_code == 404
        assert thread in [t["thread_id"] for t in a.get("/v1/research").json()["items"]]


def test_with_several_keys_an_import_names_its_owner(
    tmp_path: Path, exported: dict[str, Any], fresh: Path, serving: Any, monkeypatch: Any
) -> None:
    monkeypatch.setenv("RESEARCH_API_KEYS", f"{KEY_A},{KEY_B}")
    refused = _import(tmp_path, exported)
    assert refused.exit_code != 0 and "--key" in refused.output
    wrong = _import(tmp_path, exported, "--key", "key-mallory")
    assert wrong.exit_code != 0 and "not one of this service's API keys" in wrong.output
    assert "key-mallory" not in wrong.output, "a key is never echoed"
    assert _rows(fresh) == 0
    answer = _import(tmp_path, exported, "--key", KEY_B)
    assert answer.exit_code == 0, answer.output
    assert KEY_B not in answer.output
    thread = exported["thread"]["thread_id"]
    with serving(KEY_A, KEY_B) as port, _client(port, KEY_A) as a, _client(port, KEY_B) as b:
        assert b.get(f"/v1/research/{thread}").json()["status"] == "completed"
        assert a.get(f"/v1/research/{thread}").status_code == 404


# -- 9. the API's limits ------------------------------------------------------------------


def _altered(archive: dict[str, Any], change: str) -> dict[str, Any]:
    altered = copy.deepcopy(archive)
    if change == "long topic":
        altered["thread"]["topic"] = "printing " * (TOPIC_MAX_CHARS // 9 + 1)
    elif change == "wordless topic":
        altered["thread"]["topic"] = "???"
    elif change == "long report":
        altered["state"]["final_report"] = "x" * (REPORT_MAX_CHARS + 1)
    elif change == "long draft":
        altered["state"]["drafts"][0]["markdown"] = "x" * (REPORT_MAX_CHARS + 1)
    elif change == "bad options":
        altered["thread"]["options"]["max_iterations"] = 10_000
    elif change == "many events":
        altered["events"] = [altered["events"][0]] * 10_001
    elif change == "large event":
        altered["events"][0]["data"] = {"pad": "x" * (4 * REPORT_MAX_CHARS + 1)}
    elif change == "done in the middle":
        altered["events"].insert(2, dict(altered["events"][-1]))
    return altered


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ("long topic", "at most 2000 characters"),
        ("wordless topic", "no words to research"),
        ("long report", "a report of"),
        ("long draft", "a report of"),
        ("bad options", "max_iterations"),
        ("many events", "at most 10000 items"),
        ("large event", "the limit is"),
        ("done in the middle", "may only be the last event"),
    ],
)
def test_an_archive_past_the_apis_limits_is_refused_before_anything_is_written(
    tmp_path: Path, exported: dict[str, Any], fresh: Path, change: str, says: str
) -> None:
    answer = _import(tmp_path, _altered(exported, change))
    assert answer.exit_code != 0, answer.output
    assert says in answer.output.replace("\n", " "), answer.output
    assert "Traceback" not in answer.output
    assert _rows(fresh) == 0, "nothing was written"


# -- 10. a log that ends ------------------------------------------------------------------


@pytest.mark.parametrize("events", ["without done", "none"])
def test_an_imported_threads_event_log_ends_with_one_done(
    tmp_path: Path, exported: dict[str, Any], fresh: Path, serving: Any, events: str
) -> None:
    altered = copy.deepcopy(exported)
    altered["events"] = altered["events"][:-1] if events == "without done" else []
    answer = _import(tmp_path, altered)
    assert answer.exit_code == 0, answer.output
    thread = exported["thread"]["thread_id"]
    with serving() as port, _client(port) as http:
        with http.stream("GET", f"/v1/research/{thread}/events", timeout=10) as stream:
            names = [
                line.removeprefix("event: ")
                for line in stream.iter_lines()
                if line.startswith("event: ")
            ]
    assert names[-1] == "done" and names.count("done") == 1, names
    assert len(names) == len(altered["events"]) + 1
