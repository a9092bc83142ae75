"""The research team as configured: `[team]` entries, the default of one kind per provider, budgets."""

import asyncio
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import ValidationError

from app.api import create_app
from app.cli.console import explain
from app.composition import open_deps
from app.settings import Settings
from engines.extractive import ExtractiveEngine
from graph.builder import build_graph
from nodes.context import Deps, MemberKind
from stores.checkpointer import memory_saver
from tools.local_corpus import LocalCorpus
from tools.search import Depth, SearchHit

from .fake_apis import FakeAPIs
from .fake_llm import FakeLLM
from .llm_script import ResearchModel
from .servers import serve_port
from .sse import collect
from .support import TAVILY_KEY, TOPIC, run_graph, start

# A safety net against a hang, not a timing.
TIMEOUT_S = 60.0

TEAM = """
[[team.members]]
name = "web"
type = "web-search"
max_searches = 2
model = "openai:member-model"
temperature = 0.1

[[team.members]]
name = "docs"
type = "corpus-search"
tools = ["local"]
token_budget = 500
"""


async def _run(deps: Deps, **options: Any) -> dict[str, Any]:
    thread = f"t-{uuid.uuid4().hex}"
    return await asyncio.wait_for(
        run_graph(build_graph(memory_saver()), deps, thread, start(**options)), TIMEOUT_S
    )


def _problem(settings_env: Path, toml: str, **env: str) -> str:
    """What the CLI says of a configuration Settings refuses at start-up."""
    settings_env.write_text(toml)
    with pytest.raises(ValidationError) as refused:
        Settings(**env)  # type: ignore[arg-type]
    return explain(refused.value)


def test_the_team_table_is_read_with_each_entry_s_tools(
    settings_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TAVILY_API_KEY", TAVILY_KEY)
    settings_env.write_text(TEAM)
    team = Settings().team_members
    assert [(entry.name, entry.type, tools) for entry, tools in team] == [
        ("web", "web-search", ["tavily"]),  # the web provider in effect
        ("docs", "corpus-search", ["local"]),
    ]
    web, docs = (entry for entry, _ in team)
    assert (web.max_searches, web.model, web.temperature) == (2, "openai:member-model", 0.1)
    assert (docs.token_budget, docs.model) == (500, None)


def test_without_a_team_table_each_provider_in_effect_is_a_kind(
    settings_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert [(e.name, e.type, t) for e, t in Settings().team_members] == [
        ("local", "corpus-search", ["local"])
    ]
    monkeypatch.setenv("TAVILY_API_KEY", TAVILY_KEY)
    monkeypatch.setenv("RESEARCH_SEARCH_PROVIDER", "tavily,local")
    assert [(e.name, e.type, t) for e, t in Settings().team_members] == [
        ("tavily", "web-search", ["tavily"]),
        ("local", "corpus-search", ["local"]),
    ]


@pytest.mark.parametrize(
    ("toml", "says"),
    [
        (
            '[[team.members]]\nname = "a"\ntype = "corpus-search"\n'
            '[[team.members]]\nname = "a"\ntype = "corpus-search"\n',
            "team.members: member names must be unique: a used twice",
        ),
        (
            '[[team.members]]\nname = "web"\ntype = "web-search"\ntools = ["local"]\n',
            "team.members.0: local is not a web-search tool: use tavily or brave",
        ),
        (
            '[[team.members]]\nname = "web"\ntype = "web-search"\ntools = ["brave"]\n',
            "team.members[0] (web): its tool brave needs an API key: set BRAVE_API_KEY",
        ),
        (
            '[[team.members]]\nname = "web"\ntype = "web-search"\n',
            "team.members[0] (web): no web-search search provider is in effect (local): "
            "name its tools",
        ),
        (
            '[[team.members]]\nname = "has space"\ntype = "corpus-search"\n',
            "team.members.0.name: String should match pattern",
        ),
        (
            '[[team.members]]\nname = "a"\ntype = "plain"\n',
            "team.members.0.type: Input should be 'web-search' or 'corpus-search'",
        ),
        (
            '[[team.members]]\nname = "a"\ntype = "corpus-search"\ncolour = "red"\n',
            "team.members.0.colour: Extra inputs are not permitted",
        ),
        (
            '[[team.members]]\nname = "a"\ntype = "corpus-search"\nmax_searches = 0\n',
            "team.members.0.max_searches: Input should be greater than or equal to 1",
        ),
        ("[team]\nmembers = []\n", "team.members: List should have at least 1 item"),
        (
            "".join(
                f'[[team.members]]\nname = "m{i}"\ntype = "corpus-search"\n' for i in range(16)
            ),
            "team.members: List should have at most 15 items",
        ),
    ],
)
def test_a_bad_team_is_refused_at_start_up_naming_the_field(
    settings_env: Path, toml: str, says: str
) -> None:
    assert says in _problem(settings_env, toml)


async def test_each_point_is_researched_by_one_member_of_each_provider(
    settings_env: Path,
    corpus_index: Path,
    fake_server: tuple[FakeAPIs, str],
    apis: FakeAPIs,
) -> None:
    _, url = fake_server
    settings = Settings(
        search_provider="tavily,local",
        tavily_api_key=TAVILY_KEY,
        tavily_base_url=url,
        corpus_index=corpus_index,
        pages_per_query=0,
    )
    async with open_deps(settings) as deps:
        assert [(k.name, k.agent_type, k.search.name) for k in deps.kinds()] == [
            ("tavily", "web-search", "tavily"),
            ("local", "corpus-search", "local"),
        ]
        values = await _run(deps)
    record = values["rounds"][0].members
    names = [s.agent_name for s in record.submissions]
    points = len(names) // 2
    assert points >= 2 and names == [
        f"{k}-{n}" for n in range(1, points + 1) for k in ("tavily", "local")
    ]
    assert [s.agent_type for s in record.submissions[:2]] == ["web-search", "corpus-search"]
    assert record.success_count == len(names)
    # Every plan query was searched on the web and in the corpus, its findings one note.
    queries = values["task_plan"].search_queries
    asked = [seen.body["query"] for seen in apis.requests if seen.path == "/search"]
    assert set(queries) <= set(asked)
    notes = {n.query: n for n in values["notes"]}
    for query in queries:
        urls = notes[query].sources
        assert any(u.startswith("https://news.example/") for u in urls), query
        assert any(not u.startswith("https://news.example/") for u in urls), query


async def test_a_replay_answers_every_kind_s_searches_from_the_run_s_evidence(
    settings_env: Path,
    tmp_path: Path,
    corpus_index: Path,
    fake_server: tuple[FakeAPIs, str],
    apis: FakeAPIs,
) -> None:
    _, url = fake_server
    settings = Settings(
        data_dir=tmp_path / "data",
        search_provider="tavily,local",
        tavily_api_key=TAVILY_KEY,
        tavily_base_url=url,
        corpus_index=corpus_index,
        pages_per_query=0,
    )
    with serve_port(create_app(settings), lifespan="on") as port:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            original = (await client.post("/v1/research", json={"topic": TOPIC})).json()
            await collect(client, f"/v1/research/{original['thread_id']}/events")
            searched = len(apis.requests)
            rerun = await client.post(
                f"/v1/research/{original['thread_id']}/rerun", json={"mode": "replay"}
            )
            assert rerun.status_code == 202, rerun.text
            replayed = rerun.json()["thread_id"]
            await collect(client, f"/v1/research/{replayed}/events")
            reports = [
                (await client.get(f"/v1/research/{t}/report")).text
                for t in (original["thread_id"], replayed)
            ]
            rounds = (await client.get(f"/v1/research/{replayed}/rounds")).json()
    assert searched and len(apis.requests) == searched, "no web search in the replay"
    assert reports[0] == reports[1] and "news.example" in reports[0]
    names = [s["agent_name"] for s in rounds[0]["members"]["submissions"]]
    assert {"tavily-1", "local-1"} <= set(names)
    assert rounds[0]["members"]["failure_count"] == 0


async def test_a_member_that_spends_its_searches_stops_and_the_run_reports(
    corpus: LocalCorpus,
) -> None:
    kind = MemberKind("docs", "corpus-search", corpus, max_searches=1)
    deps = Deps(engine=ExtractiveEngine(), search=corpus, member_kinds=(kind,))
    values = await _run(deps)
    record = values["rounds"][0].members
    plan = values["task_plan"]
    notes = {n.query: n for n in values["notes"]}
    stopped = 0
    for submission, share in zip(record.submissions, _shares(values), strict=True):
        first, *later = share
        assert notes[first].status == "ok"
        if later:
            stopped += 1
            assert submission.status == "ERROR"
            assert submission.error_message == "its search budget (1 search) was spent"
            assert all(
                notes[q].error == "not run: its search budget (1 search) was spent" for q in later
            )
        else:
            assert submission.status == "SUCCESS"
    assert stopped, f"a member with two queries or more: {plan}"
    assert values["final_report"] and values["report_status"] in ("final", "partial")


def _shares(values: dict[str, Any]) -> list[list[str]]:
    """Each member's queries, read back from its record's content (`### query` headings)."""
    return [
        [line[4:] for line in s.content.splitlines() if line.startswith("### ")]
        for s in values["rounds"][0].members.submissions
    ]


async def test_a_member_out_of_its_own_time_stops_its_searches(corpus: LocalCorpus) -> None:
    class Stalled:
        """Each search after the first hangs until cancelled."""

        name = "local"

        def __init__(self) -> None:
            self.first = True
            self.cancelled = 0

        async def search(
            self, query: str, max_results: int = 5, depth: Depth = "basic"
        ) -> list[SearchHit]:
            if self.first:
                self.first = False
                return await corpus.search(query, max_results, depth)
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                self.cancelled += 1
                raise
            raise AssertionError("unreachable")

    stalled = Stalled()
    kind = MemberKind("slow", "corpus-search", stalled, max_seconds=0.3)
    deps = Deps(engine=ExtractiveEngine(), search=corpus, member_kinds=(kind,))
    values = await _run(deps)
    record = values["rounds"][0].members
    assert all(s.status == "ERROR" for s in record.submissions[1:]), "stalled"
    assert all(
        s.error_message == "its time budget (0.3 s) was spent" for s in record.submissions[1:]
    )
    assert stalled.cancelled >= len(record.submissions) - 1, "their searches were stopped"
    notes = {n.query: n for n in values["notes"]}
    late = [q for share in _shares(values)[1:] for q in share]
    assert late and all(
        notes[q].error == "not run: its time budget (0.3 s) was spent" for q in late
    )
    assert values["final_report"]


async def test_a_member_uses_its_own_model_and_stops_at_its_token_budget(
    llm: FakeLLM, settings_env: Path, corpus_index: Path
) -> None:
    llm.responder = ResearchModel()
    settings_env.write_text(
        '[[team.members]]\nname = "docs"\ntype = "corpus-search"\n'
        'model = "openai:member-model"\ntoken_budget = 1\n'
    )
    settings = Settings(
        llm_base_url=llm.base_url,
        llm_api_key="sk-test-secret-0123456789",
        corpus_index=corpus_index,
    )
    async with open_deps(settings) as deps:
        values = await _run(deps, min_sources=2)
    record = values["rounds"][0].members
    by_model: dict[str, int] = {}
    for call in llm.calls:
        by_model[call.model] = by_model.get(call.model, 0) + 1
    # Each member asked its own model for one summary, then its budget was spent.
    assert by_model.get("member-model") == len(record.submissions), by_model
    assert by_model.get("gpt-4o-mini"), "the planner and the writer keep the run's model"
    notes = {n.query: n for n in values["notes"]}
    spent = "its token budget (1 token) was spent"
    for submission, share in zip(record.submissions, _shares(values), strict=True):
        assert submission.usage.requests == 1
        summarised = [q for q in share if notes[q].summary_md]
        assert len(summarised) == 1, "one call, then the budget is spent"
        if len(share) > 1:  # its other queries keep their results, with no summary
            assert (submission.status, submission.error_message) == ("ERROR", spent)
            assert all(
                notes[q].error == f"no summary: {spent}" and notes[q].sources
                for q in share
                if q not in summarised
            )
    assert any(len(share) > 1 for share in _shares(values)), "a member with two queries"
    assert values["final_report"]
