"""The LangGraph Platform API, driven by the real `langgraph_sdk` client over loopback."""

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.pregel.remote import RemoteGraph
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient
from langgraph_sdk.schema import StreamPart

from app.api import create_app
from app.platform.assistants import ASSISTANT_ID
from app.settings import Settings

from .servers import serve_port
from .support import TOPIC

KEYS = ["key-a", "key-b"]


Clients = Callable[..., LangGraphClient]


@asynccontextmanager
async def served(tmp_path: Path, corpus_index: Path, **overrides: Any) -> AsyncIterator[Clients]:
    """A live server with these settings, and SDK clients of it for a key (closed after)."""
    settings = Settings(
        data_dir=tmp_path / "data",
        corpus_index=corpus_index,
        search_provider="local",
        api_keys=KEYS,
        **overrides,
    )
    opened: list[LangGraphClient] = []

    def connect(key: str = KEYS[0]) -> LangGraphClient:
        sdk = get_client(url=url, api_key=None, headers={"Authorization": f"Bearer {key}"})
        opened.append(sdk)
        return sdk

    with serve_port(create_app(settings), lifespan="on") as port:
        url = f"http://127.0.0.1:{port}"
        try:
            yield connect
        finally:
            for sdk in opened:
                await sdk.aclose()


@pytest.fixture
async def client(
    tmp_path: Path, corpus_index: Path, stores: dict[str, Any]
) -> AsyncIterator[Clients]:
    async with served(tmp_path, corpus_index, **stores) as connect:
        yield connect


async def collect(parts: AsyncIterator[StreamPart]) -> list[StreamPart]:
    return [part async for part in parts]


def well_formed(parts: list[StreamPart], run_id: str | None = None) -> None:
    """Framing as the SDK expects it: metadata first, end last, no unparsed data."""
    assert parts[0].event == "metadata" and parts[0].data["run_id"]
    if run_id is not None:
        assert parts[0].data["run_id"] == run_id
    assert parts[-1].event == "end"
    assert all(p.data is not None for p in parts), "every event carries JSON the SDK parsed"
    ids = [int(p.id) for p in parts if p.id]
    assert ids == sorted(ids) and len(ids) == len(set(ids))


async def test_a_research_thread_through_the_sdk_with_plan_approval(client: Clients) -> None:
    sdk = client()
    assistants = await sdk.assistants.search(graph_id="research")
    assert [a["assistant_id"] for a in assistants] == [ASSISTANT_ID]
    schemas = await sdk.assistants.get_schemas(ASSISTANT_ID)
    assert "topic" in schemas["input_schema"]["properties"]

    thread = await sdk.threads.create(metadata={"team": "history"})
    assert thread["status"] == "idle"
    asked = await collect(
        sdk.runs.stream(
            thread["thread_id"],
            "research",
            input={"topic": TOPIC, "options": {"approval": "plan"}},
            stream_mode=["updates", "custom", "values"],
        )
    )
    well_formed(asked)
    kinds = {p.event for p in asked}
    assert {"updates", "custom", "values"} <= kinds
    interrupt = [p for p in asked if p.event == "updates" and "__interrupt__" in p.data]
    assert interrupt and interrupt[0].data["__interrupt__"][0]["value"]["type"] == "plan"
    custom = [p.data for p in asked if p.event == "custom"]
    assert any(c.get("event") == "plan" for c in custom), "the graph's own progress events"

    await sdk.threads.update(thread["thread_id"], metadata={"stage": "plan review"})
    waiting = await sdk.threads.get(thread["thread_id"])
    assert waiting["status"] == "interrupted" and waiting["interrupts"]
    assert waiting["metadata"] == {"team": "history", "stage": "plan review"}
    state = await sdk.threads.get_state(thread["thread_id"])
    assert state["next"] == ["approve_plan"] and state["values"]["task_plan"]["search_queries"]

    answered = await collect(
        sdk.runs.stream(
            thread["thread_id"],
            "research",
            command={"resume": {"decision": "approve"}},
            stream_mode="updates",
        )
    )
    well_formed(answered)
    assert answered[-1].data["status"] == "success"
    done = await sdk.threads.get(thread["thread_id"])
    assert done["status"] == "idle" and done["values"]["final_report"]
    assert done["metadata"] == {"team": "history", "stage": "plan review"}

    runs = await sdk.runs.list(thread["thread_id"])
    assert [r["status"] for r in runs] == ["success", "interrupted"]
    replay = await collect(sdk.runs.join_stream(thread["thread_id"], runs[0]["run_id"]))
    assert [(p.event, p.data) for p in replay] == [(p.event, p.data) for p in answered]
    history = await sdk.threads.get_history(thread["thread_id"], limit=100)
    assert history[0]["values"]["final_report"] and len(history) > 5


async def test_background_runs_join_and_reject_a_second_run(client: Clients) -> None:
    sdk = client()
    thread = await sdk.threads.create()
    run = await sdk.runs.create(thread["thread_id"], "research", input={"topic": TOPIC})
    assert run["status"] in ("pending", "running")
    with pytest.raises(httpx.HTTPStatusError) as busy:
        await sdk.runs.create(
            thread["thread_id"], "research", input={"topic": TOPIC}, multitask_strategy="reject"
        )
    assert busy.value.response.status_code == 409
    values = await sdk.runs.join(thread["thread_id"], run["run_id"])
    assert values["final_report"]
    assert (await sdk.runs.get(thread["thread_id"], run["run_id"]))["status"] == "success"


async def test_cancel_stops_a_running_answer(
    tmp_path: Path, corpus_index: Path, stores: dict[str, Any]
) -> None:
    # Slow searches: the run is still going when the cancel reaches its executor (with
    # Redis a worker sees an abort within about a second: saq polls for aborts).
    async with served(tmp_path, corpus_index, search_delay_ms=1000, **stores) as connect:
        sdk = connect()
        slow = await sdk.threads.create()
        body = {"topic": TOPIC, "options": {"approval": "plan"}}
        started = await sdk.runs.create(slow["thread_id"], "research", input=body)
        await sdk.runs.join(slow["thread_id"], started["run_id"])  # waits at the plan
        answer = await sdk.runs.create(
            slow["thread_id"], "research", command={"resume": {"decision": "approve"}}
        )
        await sdk.runs.cancel(slow["thread_id"], answer["run_id"], wait=True)
        cancelled = await sdk.runs.get(slow["thread_id"], answer["run_id"])
        thread = await sdk.threads.get(slow["thread_id"])
    assert cancelled["status"] == "interrupted"
    assert thread["status"] == "idle" and not thread["values"].get("final_report")


async def test_stateless_runs_and_bad_bodies(client: Clients) -> None:
    sdk = client()
    parts = await collect(
        sdk.runs.stream(None, "research", input={"topic": TOPIC}, stream_mode=["updates"])
    )
    well_formed(parts)
    assert parts[-1].data["status"] == "success"
    waited: Any = await sdk.runs.wait(None, "research", input={"topic": TOPIC})
    assert waited["final_report"]

    thread = await sdk.threads.create()
    for body, fragment in (
        ({"input": {"topic": ""}}, "topic"),
        ({"input": {"topic": TOPIC}, "stream_mode": ["events"]}, "stream modes"),
        ({"command": {"goto": "writer"}}, "command.resume"),
    ):
        answer = await sdk.http.client.post(
            f"/threads/{thread['thread_id']}/runs", json={"assistant_id": "research", **body}
        )
        assert answer.status_code == 422, answer.text
        assert fragment in answer.json()["detail"]
    missing = await sdk.http.client.get("/threads/no-such-thread")
    assert missing.status_code == 404 and "no research thread" in missing.json()["detail"]


async def test_a_key_cannot_see_another_keys_threads_through_these_routes(
    client: Clients,
) -> None:
    mine = await client(KEYS[0]).threads.create(metadata={"owner": "a"})
    other = client(KEYS[1])
    assert await other.threads.search() == []
    for call in (
        other.threads.get(mine["thread_id"]),
        other.threads.get_state(mine["thread_id"]),
        other.runs.list(mine["thread_id"]),
        other.runs.create(mine["thread_id"], "research", input={"topic": TOPIC}),
    ):
        with pytest.raises(httpx.HTTPStatusError) as hidden:
            await call
        assert hidden.value.response.status_code == 404
    found = await client(KEYS[0]).threads.search(metadata={"owner": "a"})
    assert [t["thread_id"] for t in found] == [mine["thread_id"]]


async def test_remote_graph_streams_and_invokes_end_to_end(client: Clients) -> None:
    sdk = client()
    remote = RemoteGraph("research", client=sdk)
    thread = await sdk.threads.create()
    config: RunnableConfig = {"configurable": {"thread_id": thread["thread_id"]}}
    updates = [chunk async for chunk in remote.astream({"topic": TOPIC}, config)]
    nodes = [name for chunk in updates for name in chunk]
    assert nodes[0] == "supervisor" and "writer" in nodes and nodes[-1] == "finalize"
    state = await remote.aget_state(config)
    assert state.values["final_report"] and not state.next

    result = await remote.ainvoke({"topic": TOPIC})
    assert result["final_report"].startswith("---")


async def test_every_served_stream_mode_at_once(client: Clients) -> None:
    sdk = client()
    parts = await collect(
        sdk.runs.stream(
            None,
            "research",
            input={"topic": TOPIC},
            stream_mode=["values", "updates", "custom", "messages-tuple", "debug"],
        )
    )
    well_formed(parts)
    assert {"values", "updates", "custom", "debug"} <= {p.event for p in parts}
    assert parts[-1].data["status"] == "success"


async def test_a_stream_dropped_with_on_disconnect_cancel_cancels_the_run(
    tmp_path: Path, corpus_index: Path, stores: dict[str, Any]
) -> None:
    async with served(tmp_path, corpus_index, search_delay_ms=1000, **stores) as connect:
        sdk = connect()
        thread = await sdk.threads.create()
        parts = sdk.runs.stream(
            thread["thread_id"], "research", input={"topic": TOPIC}, on_disconnect="cancel"
        )
        first = await anext(parts)
        assert first.event == "metadata"
        await parts.aclose()  # the client goes away mid-run
        run_id = first.data["run_id"]
        ended = await collect(sdk.runs.join_stream(thread["thread_id"], run_id))
        run = await sdk.runs.get(thread["thread_id"], run_id)
        after = await sdk.threads.get(thread["thread_id"])
    assert ended[-1].event == "end" and ended[-1].data["status"] == "interrupted"
    assert run["status"] == "interrupted" and after["status"] == "idle"
    assert "final_report" not in after["values"] or not after["values"]["final_report"]


async def test_interrupt_before_a_node_stops_there_and_an_empty_run_continues(
    client: Clients,
) -> None:
    sdk = client()
    thread = await sdk.threads.create()
    stopped = await collect(
        sdk.runs.stream(
            thread["thread_id"], "research", input={"topic": TOPIC}, interrupt_before=["writer"]
        )
    )
    assert stopped[-1].data["status"] == "interrupted"
    state = await sdk.threads.get_state(thread["thread_id"])
    assert state["next"] == ["writer"] and not state["values"].get("final_report")
    assert (await sdk.threads.get(thread["thread_id"]))["status"] == "interrupted"

    values: Any = await sdk.runs.wait(thread["thread_id"], "research")
    assert values["final_report"]


async def test_enqueued_runs_start_in_turn_and_one_that_no_longer_fits_ends_in_error(
    tmp_path: Path, corpus_index: Path, stores: dict[str, Any]
) -> None:
    # Searches that take a while keep the first run planning while both answers are sent:
    # on a busy machine an instant run could end between the two, and the late answer
    # would then be refused at once (409) instead of waiting its turn.
    async with served(tmp_path, corpus_index, search_delay_ms=300, **stores) as connect:
        await _enqueued_answers(connect())


async def _enqueued_answers(sdk: LangGraphClient) -> None:
    thread = await sdk.threads.create()
    thread_id = thread["thread_id"]
    asking = await sdk.runs.create(
        thread_id, "research", input={"topic": TOPIC, "options": {"approval": "plan"}}
    )
    # Sent while the first run still plans: the answer waits for the question.
    answer = await sdk.runs.create(
        thread_id,
        "research",
        command={"resume": {"decision": "approve"}},
        multitask_strategy="enqueue",
    )
    late = await sdk.runs.create(
        thread_id,
        "research",
        command={"resume": {"decision": "approve"}},
        multitask_strategy="enqueue",
    )
    assert answer["status"] == "pending" and answer["multitask_strategy"] == "enqueue"
    values = await sdk.runs.join(thread_id, answer["run_id"])
    assert values["final_report"]
    streamed = await collect(sdk.runs.join_stream(thread_id, late["run_id"]))
    well_formed(streamed, late["run_id"])
    error = [p.data for p in streamed if p.event == "error"]
    assert error and "nothing waits for an answer" in error[0]["message"]
    runs = {r["run_id"]: r["status"] for r in await sdk.runs.list(thread_id)}
    assert runs == {
        asking["run_id"]: "interrupted",
        answer["run_id"]: "success",
        late["run_id"]: "error",
    }
    assert (await sdk.threads.get(thread_id))["status"] == "idle"


async def test_interrupt_pauses_the_current_run_and_the_new_one_continues_it(
    tmp_path: Path, corpus_index: Path, stores: dict[str, Any]
) -> None:
    async with served(tmp_path, corpus_index, search_delay_ms=300, **stores) as connect:
        sdk = connect()
        thread_id = (await sdk.threads.create())["thread_id"]
        first = await sdk.runs.create(thread_id, "research", input={"topic": TOPIC})
        dropped = await sdk.runs.create(thread_id, "research", multitask_strategy="enqueue")
        await sdk.runs.cancel(thread_id, dropped["run_id"])  # waiting: only it is dropped
        second = await sdk.runs.create(thread_id, "research", multitask_strategy="interrupt")
        values = await sdk.runs.join(thread_id, second["run_id"])
        runs = {r["run_id"]: r["status"] for r in await sdk.runs.list(thread_id)}
        ended = await collect(sdk.runs.join_stream(thread_id, dropped["run_id"]))
    assert values["final_report"]
    assert runs == {
        first["run_id"]: "interrupted",
        dropped["run_id"]: "interrupted",
        second["run_id"]: "success",
    }
    assert [p.event for p in ended] == ["metadata", "end"]


async def test_editing_the_plan_through_the_thread_state(client: Clients) -> None:
    sdk = client()
    thread_id = (await sdk.threads.create())["thread_id"]
    body = {"topic": TOPIC, "options": {"approval": "plan"}}
    await sdk.runs.wait(thread_id, "research", input=body)
    state = await sdk.threads.get_state(thread_id)
    plan = state["values"]["task_plan"]
    plan["search_queries"] = plan["search_queries"][:1]

    written = await sdk.threads.update_state(thread_id, {"task_plan": plan}, as_node="supervisor")
    edited = await sdk.threads.get_state(thread_id)
    assert edited["checkpoint"]["checkpoint_id"] == written["checkpoint"]["checkpoint_id"]
    assert edited["values"]["task_plan"]["search_queries"] == plan["search_queries"]
    assert edited["next"] == ["approve_plan"]
    assert (await sdk.threads.get(thread_id))["status"] == "interrupted"

    asked: Any = await sdk.runs.wait(thread_id, "research")  # the question, on the new plan
    assert asked["__interrupt__"][0]["value"]["plan"]["search_queries"] == plan["search_queries"]
    done: Any = await sdk.runs.wait(
        thread_id, "research", command={"resume": {"decision": "approve"}}
    )
    assert done["final_report"] and done["queries_done"] == plan["search_queries"]

    for values, as_node, fragment in (
        ({"no_such_field": 1}, "supervisor", "unknown state fields"),
        ({"iteration_count": "many"}, "supervisor", "iteration_count"),
        ({"topic": "x"}, "no_such_node", "no_such_node"),
    ):
        answer = await sdk.http.client.post(
            f"/threads/{thread_id}/state", json={"values": values, "as_node": as_node}
        )
        assert answer.status_code == 422, answer.text
        assert fragment in answer.json()["detail"]
    new = await sdk.threads.create()
    with pytest.raises(httpx.HTTPStatusError) as unstarted:
        await sdk.threads.update_state(new["thread_id"], {"topic": TOPIC})
    assert unstarted.value.response.status_code == 409


async def test_two_answers_sent_at_once_start_exactly_one_run(client: Clients) -> None:
    sdk = client()
    thread_id = (await sdk.threads.create())["thread_id"]
    body = {"topic": TOPIC, "options": {"approval": "plan"}}
    await sdk.runs.wait(thread_id, "research", input=body)  # waits at the plan
    answers = await asyncio.gather(
        *(
            sdk.runs.create(thread_id, "research", command={"resume": {"decision": "approve"}})
            for _ in range(2)
        ),
        return_exceptions=True,
    )
    started = [a for a in answers if isinstance(a, dict)]
    refused = [a for a in answers if isinstance(a, httpx.HTTPStatusError)]
    assert len(started) == 1 and len(refused) == 1, answers
    assert refused[0].response.status_code == 409
    values = await sdk.runs.join(thread_id, started[0]["run_id"])
    assert values["final_report"]
    assert [r["status"] for r in await sdk.runs.list(thread_id)] == ["success", "interrupted"]
