"""Member researchers are durable: a killed worker, a pause, a cancel, a replay (issue 41, item 4).

The service searches a loopback Tavily (`tests/team_search.py`) with its real client. That
server counts the searches each query reaches and holds the queries a test names, so the
test chooses which members have finished when it acts, and in which order members finish.
"""

import asyncio
import os
import signal
import subprocess
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AbstractAsyncContextManager, ExitStack, asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver

from app.api import create_app
from app.settings import Settings
from nodes.research_state import MemberReport
from service.evidence import ReplaySearch
from service.runner import thread_config
from stores.redis_flat_saver import redis_saver
from stores.sqlite_saver import GroupCommitSqliteSaver
from stores.sqlite_writer import open_sqlite
from tools.search import Depth, SearchHit

from .processes import server, worker
from .redis_server import redis_server
from .servers import free_port, serve_port
from .sse import Frame, collect, frames, timeline
from .support import TOPIC
from .team_search import (
    Holds,
    TeamSearch,
    finish_order,
    search_env,
    search_settings,
    shares,
    team_search,
)

# A safety net against a hang, never a timing the tests rely on.
WAIT_S = 45.0


async def until(check: Callable[[], Awaitable[bool]], what: str) -> None:
    """Poll `check` until it holds; fail after a generous deadline (not a timing)."""
    deadline = time.monotonic() + WAIT_S
    while not await check():
        assert time.monotonic() < deadline, f"gave up waiting: {what}"
        await asyncio.sleep(0.02)


async def research(client: httpx.AsyncClient, topic: str = TOPIC) -> str:
    """Start a run of `topic`; return its thread id."""
    started = await client.post("/v1/research", json={"topic": topic})
    assert started.status_code == 202, started.text
    return str(started.json()["thread_id"])


async def report(client: httpx.AsyncClient, thread_id: str) -> str:
    """The run's report as Markdown."""
    answer = await client.get(f"/v1/research/{thread_id}/report")
    assert answer.status_code == 200, answer.text
    return answer.text


def finished_members(values: list[Any]) -> set[str]:
    """The names of the members whose reports are among checkpoint writes or values."""
    return {
        report.share.name
        for value in values
        if isinstance(value, list)
        for report in value
        if isinstance(report, MemberReport)
    }


async def saved_members(saver: BaseCheckpointSaver[Any], thread_id: str) -> set[str]:
    """The members whose answers a thread's checkpoints hold, in every namespace.

    A member's answer is a pending write of the subgraph's checkpoint until the step's
    other members end: what a resumed step finds without running the member again.
    """
    found: set[str] = set()
    async for saved in saver.alist(thread_config(thread_id)):
        writes = [value for _, channel, value in saved.pending_writes or [] if channel == "members"]
        found |= finished_members([*writes, saved.checkpoint["channel_values"].get("members")])
    return found


class Deployment:
    """The service's processes on one data store; where runs execute can be killed and replaced.

    SQLite: one `serve` that executes its runs (killed, then started again on the same data).
    Redis: a `serve --no-worker` and one `research-agent worker` (killed, then another).
    """

    def __init__(self, env: dict[str, str], logs: Path, redis_url: str | None) -> None:
        self.env = env | ({"RESEARCH_REDIS_URL": redis_url} if redis_url else {})
        self.logs = logs
        self.redis_url = redis_url
        self.port = free_port()
        self.stack = ExitStack()
        self.executor: subprocess.Popen[bytes] | None = None
        self.generation = 0

    def __enter__(self) -> "Deployment":
        if self.redis_url:
            api = server(self.env, self.port, self.logs / "api.log", "--no-worker")
            self.stack.enter_context(api)
        self.start_executor()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stack.close()

    def start_executor(self) -> None:
        """Start the process that executes runs (a recovering `serve`, or a new worker)."""
        self.generation += 1
        log = self.logs / f"executor{self.generation}.log"
        started = (
            worker(self.env, log)
            if self.redis_url
            else server(self.env, self.port, log)  # takes up the runs left running
        )
        self.executor = self.stack.enter_context(started)

    def kill_executor(self) -> None:
        """SIGKILL the process executing runs: nothing of it runs after this returns."""
        assert self.executor is not None
        self.executor.send_signal(signal.SIGKILL)
        self.executor.wait(timeout=30)

    def client(self) -> httpx.AsyncClient:
        """A client of the deployment's API."""
        return httpx.AsyncClient(base_url=f"http://127.0.0.1:{self.port}", timeout=30)

    def saver(self) -> AbstractAsyncContextManager[BaseCheckpointSaver[Any]]:
        """The deployment's checkpointer, opened by the test on the same store."""
        if self.redis_url:
            return redis_saver(self.redis_url)
        checkpoints = Path(self.env["RESEARCH_DATA_DIR"]) / "checkpoints.sqlite"
        return open_sqlite(checkpoints, GroupCommitSqliteSaver)


@contextmanager
def deployment(store: str, env: dict[str, str], logs: Path) -> Iterator[Deployment]:
    """A `Deployment` on SQLite or on a Redis server of its own."""
    with ExitStack() as stack:
        url = stack.enter_context(redis_server()) if store == "redis" else None
        yield stack.enter_context(Deployment(env, logs, url))


@pytest.fixture
def searching(corpus_index: Path) -> Iterator[tuple[TeamSearch, str]]:
    """The loopback search API over the fixture corpus, and its base URL."""
    with team_search(corpus_index) as served:
        yield served


def process_env(tmp_path: Path, search_url: str) -> dict[str, str]:
    """The environment of the service's processes: no setting but these."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESEARCH_")}
    return (
        env
        | search_env(search_url)
        | {
            "RESEARCH_CONFIG": str(tmp_path / "none.toml"),
            "RESEARCH_DATA_DIR": str(tmp_path / "data"),
            "RESEARCH_WORKER_LEASE_SECONDS": "2",
        }
    )


@pytest.mark.slow
@pytest.mark.parametrize("store", ["sqlite", "redis"])
async def test_a_killed_worker_runs_again_only_the_members_that_had_not_finished(
    tmp_path: Path, searching: tuple[TeamSearch, str], store: str
) -> None:
    """Finished members' answers come from the checkpoint; only the cut members search again."""
    api, url = searching
    with deployment(store, process_env(tmp_path, url), tmp_path) as service:
        async with service.client() as client:
            # Uninterrupted: what each member searches, and the report.
            reference = await research(client)
            frames = await collect(client, f"/v1/research/{reference}/events")
            expected = await report(client, reference)
            alone = api.counts()
            members = shares(frames)
            assert len(members) >= 3, "the plan gives several members"

            # Again, with the second member free to finish and the others held mid-flight
            # (each on its last query: their first ones may have been answered).
            cut = {i: share for i, share in members.items() if i != 1}
            held = [share[-1] for share in cut.values()]
            api.holds.hold(held)
            mark = api.mark()
            killed = await research(client)
            async with service.saver() as saver:

                async def in_flight() -> bool:
                    waiting = all(api.holds.waiting[q] for q in held)
                    return waiting and await saved_members(saver, killed) == {"tavily-2"}

                await until(in_flight, "tavily-2's answer saved, the others' searches held")
            service.kill_executor()
            api.holds.release_all()
            service.start_executor()
            resumed = await collect(client, f"/v1/research/{killed}/events")
            detail = (await client.get(f"/v1/research/{killed}")).json()
            again = await report(client, killed)
    assert detail["status"] == "completed"
    assert any(f.event == "status" and f.data.get("recovered") for f in resumed)
    # tavily-2 did not search again; every query of the cut members was searched again.
    again_searched = Counter(q for share in cut.values() for q in share)
    assert Counter(api.since(mark)) == alone + again_searched
    # The report is the uninterrupted run's, byte for byte, and each member is one record.
    assert again == expected
    record = detail["rounds"][0]["members"]
    assert [s["agent_name"] for s in record["submissions"]] == [
        f"tavily-{i + 1}" for i in sorted(members)
    ]
    assert record["success_count"] == len(members)
    assert finish_order(resumed).count(1) == 1, "tavily-2 told its end once"
    if store == "redis":  # its log stores an event once per key; SQLite's keeps every one
        assert timeline(resumed) == timeline(frames), (
            "every event once, as in the uninterrupted run"
        )


# -- in one process: pause, cancel, replay ------------------------------------------------


@asynccontextmanager
async def service(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    """The service of `settings` on loopback (its runs executing in it), and a client."""
    with serve_port(create_app(settings), lifespan="on") as port:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            yield client


def team_settings(tmp_path: Path, url: str, stores: dict[str, Any], **more: Any) -> Settings:
    """Settings of a service searching `url` on the `stores` fixture's store."""
    return Settings(data_dir=tmp_path / "data", **search_settings(url), **stores, **more)


def done(frame: Frame) -> bool:
    """Whether `frame` is the last event of a finished run."""
    return frame.event == "done"


def paused(frame: Frame) -> bool:
    """Whether `frame` says the run paused."""
    return frame.event == "status" and frame.data["status"] == "paused"


async def follow(
    client: httpx.AsyncClient,
    thread_id: str,
    seen: Callable[[Frame], None] = lambda _: None,
    last: Callable[[Frame], bool] = done,
) -> list[Frame]:
    """Read the run's events up to the `last` one, handing each to `seen` as it comes."""
    told: list[Frame] = []
    async with (
        asyncio.timeout(WAIT_S),  # a safety net against a run that never gets there
        client.stream("GET", f"/v1/research/{thread_id}/events") as response,
    ):
        assert response.status_code == 200, await response.aread()
        async for frame in frames(response):
            told.append(frame)
            seen(frame)
            if last(frame):
                break
    return told


async def uninterrupted(client: httpx.AsyncClient) -> tuple[list[Frame], str]:
    """A run with nothing held: its events and its report."""
    thread_id = await research(client)
    return await follow(client, thread_id), await report(client, thread_id)


async def test_a_pause_waits_for_the_running_members_and_resume_gives_the_same_report(
    settings_env: Path, tmp_path: Path, searching: tuple[TeamSearch, str], stores: dict[str, Any]
) -> None:
    """A pause waits for the members at work, lands at the step's end, and cuts nothing."""
    api, url = searching
    async with service(team_settings(tmp_path, url, stores)) as client:
        reference, expected = await uninterrupted(client)
        alone = api.counts()
        members = shares(reference)
        # Every member mid-flight, on its last query, when the pause is asked for.
        held = [share[-1] for share in members.values()]
        api.holds.hold(held)
        mark = api.mark()
        thread_id = await research(client)

        async def all_waiting() -> bool:
            return all(api.holds.waiting[q] for q in held)

        await until(all_waiting, "every member's last search held")
        asked = await client.post(f"/v1/research/{thread_id}/pause")
        assert asked.status_code == 200, asked.text
        # Until they have answered, the run cannot pause: it waits for them.
        assert (await client.get(f"/v1/research/{thread_id}")).json()["status"] == "running"
        api.holds.release_all()
        at_pause = await follow(client, thread_id, last=lambda f: paused(f) or done(f))
        assert paused(at_pause[-1]), at_pause[-1]
        resumed = await client.post(f"/v1/research/{thread_id}/resume")
        assert resumed.status_code == 200, resumed.text
        rest = await follow(client, thread_id)
        again = await report(client, thread_id)
    # Paused at the end of the research step: its members had all answered, nothing after.
    steps = [f.data["node"] for f in at_pause if f.event == "node_finished"]
    assert steps[-1] == "researcher" and steps.count("researcher") == 1, steps
    assert sorted(finish_order(at_pause)) == sorted(members)
    assert not any(f.event == "draft" for f in at_pause)
    # No search was cut and made again, none was lost: the same searches and report.
    assert Counter(api.since(mark)) == alone
    assert again == expected
    statuses = [f.data["status"] for f in rest if f.event == "status"]
    assert statuses.index("paused") < statuses.index("completed")


async def test_a_pause_lets_no_waiting_member_start_and_resume_runs_only_those(
    settings_env: Path, tmp_path: Path, searching: tuple[TeamSearch, str], stores: dict[str, Any]
) -> None:
    """Two members at work, the others waiting for a turn, when a pause is asked for.

    The two finish their work; no other member starts; the run pauses in the middle of
    the research step. Resumed, only the members that had not started run: the same
    searches and report as a run never paused.
    """
    api, url = searching
    async with service(team_settings(tmp_path, url, stores, max_parallel_members=2)) as client:
        reference, expected = await uninterrupted(client)
        alone = api.counts()
        members = shares(reference)
        assert len(members) > 2
        held = [members[0][-1], members[1][-1]]
        api.holds.hold(held)
        mark = api.mark()
        thread_id = await research(client)

        async def both_waiting() -> bool:
            return all(api.holds.waiting[q] for q in held)

        await until(both_waiting, "the working members' last searches held")
        asked = await client.post(f"/v1/research/{thread_id}/pause")
        assert asked.status_code == 200, asked.text
        assert (await client.get(f"/v1/research/{thread_id}")).json()["status"] == "running"
        api.holds.release_all()
        at_pause = await follow(client, thread_id, last=lambda f: paused(f) or done(f))
        at_pause_searches = Counter(api.since(mark))
        resumed = await client.post(f"/v1/research/{thread_id}/resume")
        assert resumed.status_code == 200, resumed.text
        await follow(client, thread_id)
        again = await report(client, thread_id)
    assert paused(at_pause[-1]), at_pause[-1]
    # Paused inside the research step: the two had finished, no other had started.
    assert sorted(finish_order(at_pause)) == [0, 1]
    assert not any(f.event == "node_finished" and f.data["node"] == "researcher" for f in at_pause)
    waiting = [q for index in sorted(members)[2:] for q in members[index]]
    assert not any(at_pause_searches[q] for q in waiting), "a waiting member started"
    # Resumed: the others ran, the two did not run again; nothing searched twice.
    assert Counter(api.since(mark)) == alone
    assert again == expected


async def test_a_cancel_stops_every_member_and_none_searches_after_it(
    settings_env: Path, tmp_path: Path, searching: tuple[TeamSearch, str], stores: dict[str, Any]
) -> None:
    """A cancel gives up the members' searches in flight, and no member starts or searches after it."""
    api, url = searching
    # Two members at once: the third waits for a turn that must never come.
    async with service(team_settings(tmp_path, url, stores, max_parallel_members=2)) as client:
        reference, _ = await uninterrupted(client)
        alone = api.counts()
        members = shares(reference)
        assert len(members) > 2
        held = [members[0][-1], members[1][-1]]
        api.holds.hold(held)
        mark = api.mark()
        thread_id = await research(client)

        async def both_waiting() -> bool:
            asked = set(members[0] + members[1]) <= set(api.since(mark))
            return asked and all(api.holds.waiting[q] for q in held)

        await until(both_waiting, "every search of the working members sent, the last ones held")
        cancelled = await client.post(f"/v1/research/{thread_id}/cancel")
        assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
        after_cancel = api.mark()
        before = Counter(api.since(mark))

        # The members' searches in flight were given up by the service...
        async def abandoned() -> bool:
            return sorted(api.holds.abandoned) == sorted(held)

        await until(abandoned, "the cancelled members' held searches given up")
        # ...and once nothing holds them, a member still alive would search on: another run
        # of the topic, to its end, is the time it would have had.
        api.holds.release_all()
        sentinel, _ = await uninterrupted(client)
        stream = await collect(client, f"/v1/research/{thread_id}/events")
    assert done(sentinel[-1])
    # After the cancel, the other run's searches only.
    assert Counter(api.since(after_cancel)) == alone, "a cancelled member searched on"
    # The third member never started: none of its queries was searched, no event of it.
    assert not any(before[q] for q in members[2])
    assert [f.data["member"] for f in stream if f.event == "member_started"] == [
        "tavily-1",
        "tavily-2",
    ]
    assert stream[-1].data == {"status": "cancelled"} and not finish_order(stream)


class FinishingOrder:
    """Makes a run's members finish in `order`: each one's searches held until the one before ended.

    Fed with the run's events (`seen`): a member's end releases the next member's searches.
    """

    def __init__(self, holds: Holds, members: dict[int, list[str]], order: list[int]) -> None:
        self.holds = holds
        self.members = members
        self.order = order
        for index in order[1:]:
            holds.hold(members[index])

    def seen(self, frame: Frame) -> None:
        if frame.event == "member_finished":
            place = self.order.index(frame.data["index"])
            if place + 1 < len(self.order):
                self.holds.release(self.members[self.order[place + 1]])


async def sources(client: httpx.AsyncClient, thread_id: str) -> list[dict[str, Any]]:
    """The sources the run's report cites, as the API gives them."""
    answer = await client.get(
        f"/v1/research/{thread_id}/report", headers={"Accept": "application/json"}
    )
    assert answer.status_code == 200, answer.text
    cited: list[dict[str, Any]] = answer.json()["sources"]
    return cited


async def notes(client: httpx.AsyncClient, thread_id: str) -> list[dict[str, Any]]:
    """The run's research notes in their order, but for when each was written."""
    answer = await client.get(f"/v1/research/{thread_id}/notes")
    assert answer.status_code == 200, answer.text
    return [{k: v for k, v in note.items() if k != "created_at"} for note in answer.json()]


def in_order(members: dict[int, list[str]], order: str) -> list[int]:
    """The members' indexes in a named finishing order: backwards, the plan's, or middle first."""
    indexes = sorted(members)
    if order == "backwards":
        return indexes[::-1]
    return indexes if order == "plan" else indexes[1:] + indexes[:1]


@pytest.mark.parametrize("replayed_order", ["plan", "middle first"])
async def test_a_replay_gives_the_same_report_whatever_order_its_members_finish_in(
    settings_env: Path,
    tmp_path: Path,
    searching: tuple[TeamSearch, str],
    stores: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
    replayed_order: str,
) -> None:
    """A run whose members ended last to first, replayed in another order: the same report.

    The replay's answers come from the evidence, held by the test to choose the order.
    """
    api, url = searching
    replay_holds = Holds()
    answer = ReplaySearch.search

    async def held_replay(
        self: ReplaySearch, query: str, max_results: int = 5, depth: Depth = "basic"
    ) -> list[SearchHit]:
        """The replay's answer from the evidence, once `replay_holds` lets the query through."""
        await replay_holds.passage(query)
        return await answer(self, query, max_results, depth)

    monkeypatch.setattr(ReplaySearch, "search", held_replay)
    # Room for every held search at once: members share the step's searches.
    settings = team_settings(tmp_path, url, stores, search_concurrency=32)
    async with service(settings) as client:
        reference, expected = await uninterrupted(client)
        members = shares(reference)
        backwards, other = in_order(members, "backwards"), in_order(members, replayed_order)
        assert backwards != other

        # Live: the last member ends first, the first one last.
        gate = FinishingOrder(api.holds, members, backwards)
        original = await research(client)
        live = await follow(client, original, gate.seen)

        # Replayed from its evidence, its members ending in another order.
        gate = FinishingOrder(replay_holds, members, other)
        mark = api.mark()
        rerun = await client.post(f"/v1/research/{original}/rerun", json={"mode": "replay"})
        assert rerun.status_code == 202, rerun.text
        replayed = rerun.json()["thread_id"]
        again = await follow(client, replayed, gate.seen)
        live_calls = api.since(mark) + api.since(mark, "page")

        reports = [await report(client, t) for t in (original, replayed)]
        cited = [await sources(client, t) for t in (original, replayed)]
        found = [await notes(client, t) for t in (original, replayed)]
        diff = (await client.get(f"/v1/research/{original}/diff/{replayed}")).json()
    assert finish_order(live) == backwards and finish_order(again) == other
    assert reports[0] == reports[1] == expected
    assert cited[0] == cited[1] and cited[0]
    assert found[0] == found[1], "the same findings, in the plan's order"
    assert any(note["pages_read"] for note in found[0]), "members read pages, replayed too"
    assert live_calls == [], "the replay answered every search and page read from evidence"
    assert diff["sources_added"] == diff["sources_removed"] == diff["sources_changed"] == []
    assert diff["findings_added"] == diff["findings_dropped"] == []
