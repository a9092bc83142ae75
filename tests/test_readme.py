"""README's code blocks, run as a new user pastes them, against a live `research-agent serve`.

The only change made to a block is the port (the test's server listens on a free one, the
README says 8000). The curl session runs in one shell while a second shell streams the
run's events, as the README tells the reader to do.
"""

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from .processes import server
from .servers import free_port

README = Path(__file__).resolve().parents[1] / "README.md"
TIMEOUT_S = 120

pytestmark = pytest.mark.skipif(shutil.which("curl") is None, reason="the README uses curl")


def section(title: str) -> str:
    """The README's text from heading `title` to the next heading of the same level."""
    text = README.read_text(encoding="utf-8")
    level = "#" * (len(title) - len(title.lstrip("#")))
    start = text.index(title + "\n")
    after = re.search(rf"^{level} ", text[start + len(title) :], re.MULTILINE)
    return text[start : start + len(title) + after.start()] if after else text[start:]


def blocks(text: str, language: str) -> list[str]:
    """The fenced code blocks of `language` in `text`, in order."""
    return re.findall(rf"^```{language}\n(.*?)^```", text, re.MULTILINE | re.DOTALL)


@pytest.fixture
def live(tmp_path: Path, corpus_index: Path) -> Iterator[tuple[str, dict[str, str]]]:
    """A served instance on the fixture corpus: its port and the environment to reach it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESEARCH_")}
    env.pop("OPENAI_API_KEY", None)
    env.update(
        RESEARCH_DATA_DIR=str(tmp_path / "data"),
        RESEARCH_CONFIG=str(tmp_path / "none.toml"),
        RESEARCH_CORPUS_INDEX=str(corpus_index),
    )
    port = free_port()
    with server(env, port, tmp_path / "serve.log"):
        yield str(port), env


def on_port(block: str, port: str) -> str:
    return block.replace("localhost:8000", f"localhost:{port}").replace(
        "127.0.0.1:8000", f"127.0.0.1:{port}"
    )


def test_the_curl_session_runs_as_pasted_with_a_second_shell_streaming(
    live: tuple[str, dict[str, str]],
) -> None:
    port, env = live
    session, watch = blocks(section("## The service"), "bash")[:2]
    # The session prints the thread id; the second shell takes it from there.
    first = subprocess.Popen(
        ["bash", "-c", on_port(session, port)],  # an interactive shell stops at nothing
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert first.stdout is not None
    line = first.stdout.readline()
    thread = re.fullmatch(r"thread ([0-9a-f]+)\n", line)
    assert thread, line
    second_shell = on_port(watch, port).replace("THREAD=...", f"THREAD={thread.group(1)}")
    watcher = subprocess.run(
        ["bash", "-c", second_shell],
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    rest, errors = first.communicate(timeout=TIMEOUT_S)
    assert first.returncode == 0, errors
    # The session saw the plan, approved it and printed the cited report.
    assert '"search_queries"' in rest and '"investigation_points"' in rest
    assert "## References" in rest and "[^1]" in rest
    # The second shell's stream ran to the end, through the approval.
    assert watcher.returncode == 0, watcher.stderr
    assert "event: approval_required" in watcher.stdout and "event: done" in watcher.stdout


def run_python_block(heading: str, live: tuple[str, dict[str, str]]) -> str:
    """Run the Python block of the README's section `heading` as pasted; its output."""
    port, env = live
    (snippet,) = blocks(section(heading), "python")
    done = subprocess.run(
        [sys.executable, "-c", on_port(snippet, port)],
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_python_sdk_snippet_runs_as_pasted(live: tuple[str, dict[str, str]]) -> None:
    printed = run_python_block("### LangGraph Platform API", live)
    assert "metadata" in printed and "[^1]" in printed


def test_the_mcp_client_snippet_runs_as_pasted(live: tuple[str, dict[str, str]]) -> None:
    printed = run_python_block("### MCP (Model Context Protocol)", live)
    tools, *progress = printed.splitlines()[:3]
    assert "'research'" in tools and progress[0].endswith(": started")
    assert "[^1]" in printed and '"n":1' in printed
