"""`research-agent watch`: watch a thread, list, show its changes, stop, on the data the service uses."""

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from app import cli
from app.runtime import open_runtime
from app.settings import Settings
from stores.registry import TERMINAL

from .support import TOPIC


@pytest.fixture
def runner(
    settings_env: Path, tmp_path: Path, corpus_index: Path, monkeypatch: pytest.MonkeyPatch
) -> CliRunner:
    monkeypatch.setenv("RESEARCH_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("RESEARCH_CORPUS_INDEX", str(corpus_index))
    monkeypatch.setenv("RESEARCH_SEARCH_PROVIDER", "local")
    return CliRunner()


async def refresh_once(thread_id: str) -> None:
    """What `serve` does once the watch is due: start a refresh, then record it."""
    async with open_runtime(Settings()) as runtime:
        later = datetime.now(UTC) + timedelta(hours=2)
        await runtime.watches.tick(later)
        watch = await runtime.stores.watches.get(thread_id)
        assert watch is not None and watch.current is not None
        while True:
            record = await runtime.stores.registry.get(watch.current)
            if record is not None and record.status in TERMINAL:
                break
            await asyncio.sleep(0.05)
        await runtime.watches.tick(later)
        await runtime.manager.shutdown()


def test_watch_list_changes_and_stop_from_the_terminal(runner: CliRunner) -> None:
    ran = runner.invoke(cli.app, ["run", TOPIC, "--thread", "printing"])
    assert ran.exit_code == 0, ran.output

    made = runner.invoke(cli.app, ["watch", "printing", "--every", "1h"])
    assert made.exit_code == 0, made.output
    assert "watching printing every PT1H" in made.output
    listed = runner.invoke(cli.app, ["watch", "list"])
    assert "printing" in listed.output and "PT1H" in listed.output, listed.output
    before = runner.invoke(cli.app, ["watch", "changes", "printing"])
    assert "has not been refreshed yet" in before.output, before.output

    asyncio.run(refresh_once("printing"))
    shown = runner.invoke(cli.app, ["watch", "changes", "printing"])
    assert shown.exit_code == 0, shown.output
    assert shown.output.startswith("#1 ") and " vs printing: sources +0 -0 ~0" in shown.output

    for every, says in (("5x", "ISO 8601"), ("10m", "between every 1:00:00")):
        refused = runner.invoke(cli.app, ["watch", "printing", "--every", every])
        assert refused.exit_code == 2 and says in refused.output, refused.output
    unknown = runner.invoke(cli.app, ["watch", "nothing-here", "--every", "1d"])
    assert unknown.exit_code == 2 and "no research thread" in unknown.output, unknown.output

    stopped = runner.invoke(cli.app, ["watch", "stop", "printing"])
    assert stopped.exit_code == 0 and "no longer watched" in stopped.output
    assert "no thread is watched" in runner.invoke(cli.app, ["watch", "list"]).output
