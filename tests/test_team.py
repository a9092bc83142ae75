"""Member researchers: a step's plan queries run by members in parallel, merged in the plan's order."""

import asyncio
import uuid
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
from langchain_core.runnables import RunnableConfig
from pydantic import ValidationError

from app.api import create_app
from app.composition import open_deps
from app.settings import Settings
from app.stores import open_checkpointer
from core.models import ResearchPlan, SearchResult
from engines.base import ModelAccessError
from engines.extractive import ExtractiveEngine
from graph.builder import build_graph
from nodes.context import Deps
from nodes.members import member_shares
from stores.checkpointer import memory_saver
from tools.local_corpus import LocalCorpus
from tools.search import Depth, SearchHit

from .servers import serve_port
from .sse import collect
from .support import TOPIC, run_graph, start

# A safety net against a hang (members waiting on each other for ever), not a timing.
TIMEOUT_S = 30.0
BUDGET_S = 1.0  # the shortest time budget a run may have
Told = list[tuple[str, dict[str, Any]]]


class Members:
    """What the members of a run said: each one's queries as it started, and the order they ended."""

    def __init__(self) -> None:
        self.told: Told = []
        self.queries: dict[int, list[str]] = {}
        self.finished: list[int] = []
        self.ended: defaultdict[int, asyncio.Event] = defaultdict(asyncio.Event)

    def progress(self, name: str, data: dict[str, Any]) -> None:
        self.told.append((name, data))
        if name == "member_started":
            self.queries[data["index"]] = data["queries"]
        elif name == "member_finished":
            self.finished.append(data["index"])
            self.ended[data["index"]].set()

    def member_of(self, query: str) -> int | None:
        """The member whose share holds `query` (None: a probe or a follow-up)."""
        return next((i for i, share in self.queries.items() if query in share), None)

    def named(self, name: str) -> list[dict[str, Any]]:
        return [data for told, data in self.told if told == name]


class ReversedFinish:
    """Holds each member's searches until the member after it has finished: the last ends first."""

    name = "local"

    def __init__(self, inner: LocalCorpus, members: Members, count: int) -> None:
        self.inner = inner
        self.members = members
        self.count = count

    async def search(
        self, query: str, max_results: int = 5, depth: Depth = "basic"
    ) -> list[SearchHit]:
        index = self.members.member_of(query)
        if index is not None and index + 1 < self.count:
            await self.members.ended[index + 1].wait()
        return await self.inner.search(query, max_results, depth)


async def _run(deps: Deps, members: Members) -> dict[str, Any]:
    thread = f"t-{uuid.uuid4().hex}"
    return await asyncio.wait_for(
        run_graph(build_graph(memory_saver()), deps, thread, start()), TIMEOUT_S
    )


def _told_in_plan_order(members: Members, values: dict[str, Any]) -> None:
    """The step told each query's findings in the plan's order, each source once."""
    notes = members.named("note")
    assert [n["query"] for n in notes] == [n.query for n in values["notes"]]
    assert [n["step_no"] for n in notes] == list(range(1, len(notes) + 1))
    urls = [s["url"] for s in members.named("source")]
    assert len(urls) == len(set(urls)) == len(values["research_data"])


async def test_the_merge_follows_the_plan_not_the_order_members_finish_in(
    corpus: LocalCorpus,
) -> None:
    # One member at a time: they finish in the plan's order.
    in_order = Members()
    deps = Deps(
        engine=ExtractiveEngine(), search=corpus, max_parallel_members=1, progress=in_order.progress
    )
    expected = await _run(deps, in_order)
    count = len(in_order.queries)
    assert count >= 3, "the plan gives several members"
    assert in_order.finished == list(range(count))

    # All at once, each held until the next one ended: they finish last to first (with room
    # for every held search: the members share the step's searches at once).
    reversed_ = Members()
    search = ReversedFinish(corpus, reversed_, count)
    deps = Deps(
        engine=ExtractiveEngine(),
        search=search,
        progress=reversed_.progress,
        search_concurrency=64,
    )
    values = await _run(deps, reversed_)
    assert reversed_.finished == list(reversed(range(count)))

    # The same step whatever the order: notes, sources (their order too), report.
    assert [n.query for n in values["notes"]] == [n.query for n in expected["notes"]]
    assert values["research_data"] == expected["research_data"]
    assert values["final_report"] == expected["final_report"]
    for run, told in ((expected, in_order), (values, reversed_)):
        _told_in_plan_order(told, run)
        record = run["rounds"][0].members
        assert [s.agent_name for s in record.submissions] == [
            f"local-{i + 1}" for i in range(count)
        ]
        assert record.success_count == count and record.failure_count == 0


class FailingMember:
    """Fails the searches of one member: by refusing them, or by answering what cannot be read."""

    name = "local"

    def __init__(self, inner: LocalCorpus, members: Members, index: int, malformed: bool) -> None:
        self.inner = inner
        self.members = members
        self.index = index
        self.malformed = malformed

    async def search(
        self, query: str, max_results: int = 5, depth: Depth = "basic"
    ) -> list[SearchHit]:
        if self.members.member_of(query) == self.index:
            if self.malformed:  # a bug's exception, raised out of the member's searcher
                return [None]  # type: ignore[list-item]
            raise ConnectionError(f"search backend down for {query!r}")
        return await self.inner.search(query, max_results, depth)


class RefusingEngine(ExtractiveEngine):
    """Refuses to summarise one member's queries, as a model refusing the run does."""

    def __init__(self, members: Members, index: int) -> None:
        self.members = members
        self.index = index

    async def summarize(self, query: str, sources: Sequence[SearchResult]) -> str:
        if self.members.member_of(query) == self.index:
            raise ModelAccessError("the model key was refused: set OPENAI_API_KEY")
        return await super().summarize(query, sources)


Failure = Callable[[LocalCorpus, Members], Deps]
FAILURES: dict[str, tuple[Failure, str]] = {
    "search down": (
        lambda corpus, m: Deps(
            engine=ExtractiveEngine(),
            search=FailingMember(corpus, m, 1, malformed=False),
            progress=m.progress,
        ),
        "every search failed: ConnectionError: search backend down",
    ),
    "raised": (
        lambda corpus, m: Deps(
            engine=ExtractiveEngine(),
            search=FailingMember(corpus, m, 1, malformed=True),
            progress=m.progress,
        ),
        "AttributeError",
    ),
    "model refused": (
        lambda corpus, m: Deps(engine=RefusingEngine(m, 1), search=corpus, progress=m.progress),
        "the model refused: the model key was refused",
    ),
}


@pytest.mark.parametrize("failure", FAILURES)
async def test_a_failing_member_is_recorded_as_an_error_and_the_run_still_reports(
    corpus: LocalCorpus, failure: str
) -> None:
    members = Members()
    make, message = FAILURES[failure]
    values = await _run(make(corpus, members), members)

    record = values["rounds"][0].members
    failed = record.submissions[1]
    assert (failed.agent_name, failed.status) == ("local-2", "ERROR")
    assert failed.error_message is not None and message in failed.error_message
    assert [s.status for i, s in enumerate(record.submissions) if i != 1] == ["SUCCESS"] * (
        len(record.submissions) - 1
    )
    assert (record.success_count, record.failure_count) == (len(record.submissions) - 1, 1)
    ended = {e["member"]: e for e in members.named("member_finished")}
    assert ended["local-2"]["status"] == "ERROR" and message in ended["local-2"]["error_message"]
    assert set(ended["local-1"]["usage"]) == {
        "requests",
        "input_tokens",
        "output_tokens",
        "cost_usd",
    }
    # The others' findings are kept, and the run ends with a report that cites them.
    assert values["final_report"] and "## References" in values["final_report"]
    assert values["report_status"] in ("final", "partial")
    by_query = {n.query: n for n in values["notes"]}
    assert all(by_query[q].status == "ok" for q in members.queries[0])
    if failure != "model refused":  # a refusal keeps the results it summarised nothing of
        assert all(by_query[q].status == "failed" for q in members.queries[1])
    else:
        assert values["halted"], "a model refusing the run halts it, as before"


async def test_members_whose_turn_comes_after_the_time_budget_are_errors(
    corpus: LocalCorpus,
) -> None:
    members = Members()

    class SlowFirst:
        """The first member's searches take longer than the whole time budget."""

        name = "local"

        async def search(
            self, query: str, max_results: int = 5, depth: Depth = "basic"
        ) -> list[SearchHit]:
            if members.member_of(query) == 0:
                await asyncio.sleep(BUDGET_S + 0.05)  # spends the budget, whatever the clock
            return await corpus.search(query, max_results, depth)

    deps = Deps(
        engine=ExtractiveEngine(),
        search=SlowFirst(),
        max_parallel_members=1,
        progress=members.progress,
    )
    thread = f"t-{uuid.uuid4().hex}"
    payload = start(time_budget_s=BUDGET_S)
    values = await asyncio.wait_for(
        run_graph(build_graph(memory_saver()), deps, thread, payload), TIMEOUT_S
    )
    first, *later = values["rounds"][0].members.submissions
    assert first.status == "SUCCESS" and later
    assert all(s.status == "ERROR" for s in later)
    assert all(s.error_message == "the time budget was spent before its turn came" for s in later)
    by_query = {n.query: n for n in values["notes"]}
    assert all(by_query[q].status == "ok" for q in members.queries[0])
    late = [by_query[q] for q in values["task_plan"].search_queries if q not in members.queries[0]]
    assert late and all(n.error == "not run: the time budget was spent" for n in late)
    assert values["final_report"] and values["report_status"] in ("final", "partial")


@pytest.mark.parametrize("limit", [1, 2])
async def test_at_most_max_parallel_members_work_at_once(corpus: LocalCorpus, limit: int) -> None:
    members = Members()
    enough = asyncio.Event()

    class Held:
        """Holds the members' searches until `limit` members work: more would show."""

        name = "local"

        async def search(
            self, query: str, max_results: int = 5, depth: Depth = "basic"
        ) -> list[SearchHit]:
            if members.member_of(query) is not None:
                await enough.wait()
            return await corpus.search(query, max_results, depth)

    def progress(name: str, data: dict[str, Any]) -> None:
        members.progress(name, data)
        working = len(members.named("member_started")) - len(members.named("member_finished"))
        if working >= limit:
            enough.set()

    deps = Deps(
        engine=ExtractiveEngine(), search=Held(), max_parallel_members=limit, progress=progress
    )
    await _run(deps, members)
    working, most = 0, 0
    for name, _ in members.told:
        working += {"member_started": 1, "member_finished": -1}.get(name, 0)
        most = max(most, working)
    assert len(members.queries) > limit, "more members than may work at once"
    assert most == limit


async def test_the_members_of_a_step_share_its_searches_at_once(corpus: LocalCorpus) -> None:
    members = Members()
    searching, most = 0, 0

    class Counted:
        """Counts the searches in flight, each held a moment so that they overlap."""

        name = "local"

        async def search(
            self, query: str, max_results: int = 5, depth: Depth = "basic"
        ) -> list[SearchHit]:
            nonlocal searching, most
            searching += 1
            most = max(most, searching)
            try:
                await asyncio.sleep(0.05)
                return await corpus.search(query, max_results, depth)
            finally:
                searching -= 1

    deps = Deps(
        engine=ExtractiveEngine(),
        search=Counted(),
        max_parallel_members=4,
        search_concurrency=2,
        progress=members.progress,
    )
    await _run(deps, members)
    assert len(members.queries) >= 3, "several members worked at once"
    assert most == 2, "search_concurrency bounds the step, not each member"


async def test_member_records_are_saved_with_the_step_in_the_checkpoint(
    settings_env: Path, tmp_path: Path, corpus: LocalCorpus, stores: dict[str, Any]
) -> None:
    settings = Settings(data_dir=tmp_path / "data", **stores)
    config: RunnableConfig = {"configurable": {"thread_id": f"t-{uuid.uuid4().hex}"}}
    deps = Deps(engine=ExtractiveEngine(), search=corpus)
    first: Any = start()
    async with open_checkpointer(settings) as saver:
        graph = build_graph(saver)
        async for _ in graph.astream(first, config, context=deps):
            pass
    async with open_checkpointer(settings) as saver:  # read back from the store
        history = [s async for s in build_graph(saver).aget_state_history(config)]
    # The checkpoint the research step wrote holds its sources and its members' record.
    researched = next(s for s in reversed(history) if s.values.get("research_data"))
    record = researched.values["rounds"][0].members
    assert record is not None and record.round_number == 1
    assert [s.agent_name for s in record.submissions] == [
        f"local-{i + 1}" for i in range(len(record.submissions))
    ]
    assert all(
        s.status == "SUCCESS" and s.agent_type == "corpus-search" for s in record.submissions
    )
    assert all(s.content.startswith("### ") for s in record.submissions)
    # The checkpoint before it (the plan's) has no member record yet.
    before = history[history.index(researched) + 1]
    assert all(r.members is None for r in before.values.get("rounds", []))


async def test_the_thread_shows_its_members_and_streams_their_events(
    settings_env: Path, tmp_path: Path, corpus_index: Path, stores: dict[str, Any]
) -> None:
    settings = Settings(
        data_dir=tmp_path / "data", corpus_index=corpus_index, search_provider="local", **stores
    )
    with serve_port(create_app(settings), lifespan="on") as port:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            started = await client.post("/v1/research", json={"topic": TOPIC})
            thread = started.json()["thread_id"]
            frames = await collect(client, f"/v1/research/{thread}/events")
            detail = (await client.get(f"/v1/research/{thread}")).json()
    record = detail["rounds"][0]["members"]
    names = [s["agent_name"] for s in record["submissions"]]
    assert len(names) >= 2 and record["success_count"] == len(names)
    assert record["failure_count"] == 0 and "total_usage" in record
    finished = [f.data for f in frames if f.event == "member_finished"]
    assert sorted(f["member"] for f in finished) == sorted(names)
    assert all(f["status"] == "SUCCESS" and "usage" in f for f in finished)
    started_names = [f.data["member"] for f in frames if f.event == "member_started"]
    assert sorted(started_names) == sorted(names)
    # Each member's start comes before its end, both within the research step.
    events = [f.event for f in frames]
    assert events.index("member_started") > events.index("plan")
    assert max(i for i, e in enumerate(events) if e == "member_finished") < events.index("draft")


def test_max_parallel_members_is_read_and_bounded(
    settings_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings_env.write_text("max_parallel_members = 3\n")
    assert Settings().max_parallel_members == 3
    monkeypatch.setenv("RESEARCH_MAX_PARALLEL_MEMBERS", "7")
    assert Settings().max_parallel_members == 7
    monkeypatch.delenv("RESEARCH_MAX_PARALLEL_MEMBERS")
    for bad, says in (("0", "greater than or equal to 1"), ("16", "less than or equal to 15")):
        settings_env.write_text(f"max_parallel_members = {bad}\n")
        with pytest.raises(ValidationError, match=f"max_parallel_members\n.*{says}"):
            Settings()
    monkeypatch.setenv("RESEARCH_MAX_PARALLEL_MEMBERS", "16")
    with pytest.raises(ValidationError, match="max_parallel_members"):
        Settings()


async def test_the_setting_reaches_the_run(settings_env: Path, corpus_index: Path) -> None:
    async with open_deps(Settings(corpus_index=corpus_index, max_parallel_members=2)) as deps:
        assert deps.max_parallel_members == 2
    async with open_deps(Settings(simulate_latency_ms=1, max_parallel_members=5)) as deps:
        assert deps.max_parallel_members == 5


def _plan(points: list[str], queries: list[str]) -> ResearchPlan:
    return ResearchPlan(theme="t", investigation_points=points, search_queries=queries)


def test_queries_go_to_the_point_whose_words_they_hold() -> None:
    plan = _plan(
        ["Printing press", "Johannes Gutenberg"],
        ["history of the printing press", "Johannes Gutenberg", "Gutenberg Johannes Mainz"],
    )
    shares = member_shares(plan, plan.search_queries)
    assert [(s.name, s.point, s.queries, s.positions) for s in shares] == [
        ("member-1", "Printing press", ["history of the printing press"], [0]),
        (
            "member-2",
            "Johannes Gutenberg",
            ["Johannes Gutenberg", "Gutenberg Johannes Mainz"],
            [1, 2],
        ),
    ]


def test_queries_no_point_holds_are_shared_in_contiguous_runs() -> None:
    plan = _plan(["Printing press", "Gutenberg", "Mainz"], [f"q{i}" for i in range(7)] + ["Mainz"])
    shares = member_shares(plan, plan.search_queries)
    assert [s.positions for s in shares] == [[0, 1, 2], [3, 4, 5], [6, 7]]
    assert [s.point for s in shares] == [None, None, None]
    # Fewer queries than points: one member per query.
    assert [s.queries for s in member_shares(plan, ["q1", "q2"])] == [["q1"], ["q2"]]
    assert member_shares(plan, []) == [] and member_shares(None, ["q"]) == []


def test_a_query_that_holds_several_points_goes_to_the_one_with_the_fewest_queries() -> None:
    plan = _plan(
        ["Roman Empire", "Han dynasty"],
        [
            "Roman Empire and the Han dynasty",
            "Roman Empire trade",
            "Han dynasty and Roman Empire silk",
        ],
    )
    shares = member_shares(plan, plan.search_queries)
    assert [(s.point, s.positions) for s in shares] == [
        ("Roman Empire", [0, 1]),
        ("Han dynasty", [2]),
    ]
