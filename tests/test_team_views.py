"""The member researchers' records where people read them: the API, `show`, the export.

Over real HTTP on loopback (SQLite and Redis), and the `research-agent` command as a
subprocess.
"""

import json
import re
import uuid
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig

from app.settings import Settings
from app.stores import open_checkpointer
from engines.extractive import ExtractiveEngine
from graph.builder import build_graph
from nodes.context import Deps
from tools.local_corpus import LocalCorpus
from tools.search import Depth, SearchHit

from . import test_cli as terminal
from .servers import KEY_A, KEY_B, two_key_clients
from .sse import collect
from .support import TOPIC, start
from .test_cli import cli

# The CLI tests' fixtures: a data folder, and an environment pointing the command at it.
cli_env, data_dir = terminal.cli_env, terminal.data_dir


def _members(rounds: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every member submission of the rounds, in round then member order."""
    return [s for r in rounds if r["members"] for s in r["members"]["submissions"]]


async def test_the_rounds_route_gives_each_rounds_members_to_their_key_only(
    settings_env: Path, tmp_path: Path, corpus_index: Path, stores: dict[str, Any]
) -> None:
    settings = Settings(
        data_dir=tmp_path / "data",
        corpus_index=corpus_index,
        search_provider="local",
        api_keys=[KEY_A, KEY_B],
        **stores,
    )
    async with two_key_clients(settings) as (a, b):
        thread = (await a.post("/v1/research", json={"topic": TOPIC})).json()["thread_id"]
        frames = await collect(a, f"/v1/research/{thread}/events")
        answer = await a.get(f"/v1/research/{thread}/rounds")
        detail = (await a.get(f"/v1/research/{thread}")).json()
        others = await b.get(f"/v1/research/{thread}/rounds")
        unknown = await a.get(f"/v1/research/{uuid.uuid4().hex}/rounds")
        schema = (await a.get("/openapi.json")).json()

    assert answer.status_code == 200, answer.text
    rounds = answer.json()
    # The thread detail's rounds, on their own: the same records, the same order.
    assert rounds == detail["rounds"] and len(rounds) == detail["iteration"]
    assert [r["round_number"] for r in rounds] == list(range(1, len(rounds) + 1))
    submissions = _members(rounds)
    finished = {f.data["member"]: f.data for f in frames if f.event == "member_finished"}
    assert len(submissions) >= 2 and {s["agent_name"] for s in submissions} == set(finished)
    for submission in submissions:
        told = finished[submission["agent_name"]]
        assert submission["status"] == told["status"] == "SUCCESS"
        assert submission["execution_time_ms"] == told["execution_time_ms"]
        assert submission["usage"] == told["usage"]
        assert submission["agent_type"] == "corpus-search" and submission["timestamp"]
    first = rounds[0]["members"]
    assert first["success_count"] == len(first["submissions"]) and first["failure_count"] == 0

    # Another key's thread is an id nobody has: 404, with the same error code.
    for refused in (others, unknown):
        assert refused.status_code == 404, refused.text
        assert refused.json()["error"]["code"] == "not_found"

    # Typed in the OpenAPI: a list of round records, whose members' record is described.
    route = schema["paths"]["/v1/research/{thread_id}/rounds"]["get"]
    answered = route["responses"]["200"]["content"]["application/json"]["schema"]
    assert answered["type"] == "array"
    assert answered["items"]["$ref"].endswith("/RoundRecord")
    assert "404" in route["responses"]
    record = schema["components"]["schemas"]["RoundRecord"]["properties"]
    assert "members" in record


class FailingSecondMember:
    """Refuses every search of the plan's second investigation point's member."""

    name = "local"

    def __init__(self, inner: LocalCorpus) -> None:
        self.inner = inner
        self.refused: set[str] = set()
        self.second: list[str] = []

    def progress(self, name: str, data: dict[str, Any]) -> None:
        if name == "member_started" and data["index"] == 1:
            self.second = data["queries"]

    async def search(
        self, query: str, max_results: int = 5, depth: Depth = "basic"
    ) -> list[SearchHit]:
        if query in self.second:
            self.refused.add(query)
            raise ConnectionError(f"search backend refused [red]{query!r}[/red]")
        return await self.inner.search(query, max_results, depth)


async def test_show_prints_each_rounds_members_and_export_counts_them(
    tmp_path: Path, data_dir: Path, cli_env: dict[str, str], corpus: LocalCorpus
) -> None:
    # A thread in the CLI's data file whose second member's searches all fail.
    failing = FailingSecondMember(corpus)
    deps = Deps(
        engine=ExtractiveEngine(),
        search=failing,
        max_parallel_members=1,  # the second member starts once its queries are known
        progress=failing.progress,
    )
    thread = "team-show"
    config: RunnableConfig = {"configurable": {"thread_id": thread}}
    async with open_checkpointer(Settings(data_dir=data_dir)) as saver:
        graph = build_graph(saver)
        first: Any = start()
        async for _ in graph.astream(first, config, context=deps):
            pass
        values = (await graph.aget_state(config)).values
    assert failing.refused, "the second member searched"
    record = values["rounds"][0].members

    shown = cli(cli_env, "show", thread)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stderr.splitlines()
    heading = next((i for i, line in enumerate(lines) if line.startswith("Member researchers")), -1)
    assert heading >= 0, shown.stderr
    assert lines[heading] == (
        f"Member researchers, round 1: {record.success_count} succeeded, "
        f"{record.failure_count} failed · 0 tokens, 0 model requests"
    )
    assert record.failure_count == 1
    members = lines[heading + 1 : heading + 1 + len(record.submissions)]
    for line, submission in zip(members, record.submissions, strict=True):
        name, kind, status, spent, took = line.strip().split(" · ")
        assert (name, kind) == (submission.agent_name, "corpus-search")
        assert spent == "0 tokens, 0 model requests"
        assert re.fullmatch(r"[\d,]+ ms|[\d,.]+ s", took), took
        if submission.status == "ERROR":
            # The message whole, as written: markup-like text is not taken for markup.
            assert status == f"ERROR: {submission.error_message}"
            assert "search backend refused [red]" in status
        else:
            assert status == "SUCCESS"
    assert [line.split(" · ")[0].strip() for line in members] == [
        f"local-{i + 1}" for i in range(len(record.submissions))
    ]


def test_the_export_holds_the_rounds_and_says_how_many_member_records(
    tmp_path: Path, cli_env: dict[str, str]
) -> None:
    assert cli(cli_env, "run", TOPIC, "--thread", "t1").returncode == 0
    archive = tmp_path / "t1.json"
    exported = cli(cli_env, "export", "t1", "--out", str(archive))
    assert exported.returncode == 0, exported.stderr
    rounds = json.loads(archive.read_text(encoding="utf-8"))["state"]["rounds"]
    submissions = _members(rounds)
    assert len(submissions) >= 2
    assert {"agent_name", "agent_type", "status", "error_message", "usage"} <= set(submissions[0])
    assert {"timestamp", "execution_time_ms", "content"} <= set(submissions[0])
    said = exported.stderr.strip()
    assert said.endswith(f"{len(rounds)} rounds with {len(submissions)} member submissions"), said

    # Imported elsewhere, the thread shows the same members.
    elsewhere = cli_env | {"RESEARCH_DATA_DIR": str(tmp_path / "elsewhere")}
    assert cli(elsewhere, "import", str(archive)).returncode == 0
    here, there = cli(cli_env, "show", "t1"), cli(elsewhere, "show", "t1")
    assert "Member researchers, round 1" in here.stderr
    members = [line for line in here.stderr.splitlines() if line.startswith("  local-")]
    assert len(members) == len(submissions)
    assert members == [line for line in there.stderr.splitlines() if line.startswith("  local-")]
