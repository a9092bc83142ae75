"""A research step killed mid-investigation resumes from its last finished ReAct turn."""

import asyncio
import os
import signal
import time
from pathlib import Path
from typing import Any

import httpx
from langchain_core.runnables import RunnableConfig

from nodes.research_spending import account_spending
from stores.sqlite_saver import GroupCommitSqliteSaver
from stores.sqlite_writer import open_sqlite

from .fake_llm import Call, FakeLLM, Reply, ToolCall
from .llm_script import ResearchModel
from .processes import server
from .servers import free_port
from .sse import collect
from .support import TOPIC

KEY = "sk-test-secret-0123456789"
SLOW_S = 60.0  # the turn in progress when the server is killed never answers in time


class SlowSecondTurn:
    """The research model, whose second ReAct turn hangs while `slow` is set."""

    def __init__(self) -> None:
        self.model = ResearchModel(
            actions=[
                ToolCall("search", {"query": "Gutenberg Bible"}),
                ToolCall("search", {"query": "Mainz printing workshop"}),
                ToolCall("search", {"query": "printing spread Venice"}),
            ]
        )
        self.slow = True

    def __call__(self, call: Call) -> Reply:
        reply = self.model(call)
        if self.slow and "search" in call.tools and _turn(call) == 1:
            reply.delay_s = SLOW_S
        return reply


def _turn(call: Call) -> int:
    """Which turn of its loop a ReAct request is: the observations it carries."""
    return sum(m.get("role") == "tool" for m in call.messages)


def _loop(call: Call) -> str:
    """What identifies a ReAct loop: its first user message (the points and what is known)."""
    return next(str(m["content"]) for m in call.messages if m.get("role") == "user")


def _summaries(llm: FakeLLM, query: str) -> int:
    return sum(not c.tools and c.user.startswith(f"Query: {query}\n") for c in llm.calls)


async def _wait_for(condition: Any, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "the run never got there"
        await asyncio.sleep(0.05)  # polling the fake's record of requests, bounded above


async def _checkpointed(
    checkpoints: Path, thread_id: str, query: str, timeout_s: float = 60.0
) -> None:
    """Return once a checkpoint of the research step holds its finished search for `query`.

    Read from the server's checkpoint file (polled, failing after `timeout_s`): the
    turn's checkpoint is written behind the next node, not before its request.
    """
    config: RunnableConfig = {"configurable": {"thread_id": thread_id}}  # every namespace
    async with (
        asyncio.timeout(timeout_s),
        open_sqlite(checkpoints, GroupCommitSqliteSaver) as saver,
    ):
        while True:
            async for found in saver.alist(config):
                outcomes = found.checkpoint["channel_values"].get("outcomes", [])
                if any(outcome.query == query for outcome in outcomes):
                    return
            await asyncio.sleep(0.05)  # polling the checkpoint file, bounded above


async def test_a_killed_investigation_resumes_after_its_last_finished_turn(
    tmp_path: Path, corpus_index: Path, llm: FakeLLM
) -> None:
    script = SlowSecondTurn()
    llm.responder = script
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESEARCH_")}
    env |= {
        "RESEARCH_DATA_DIR": str(tmp_path / "data"),
        "RESEARCH_CONFIG": str(tmp_path / "none.toml"),
        "RESEARCH_CORPUS_INDEX": str(corpus_index),
        "RESEARCH_SEARCH_PROVIDER": "local",
        "RESEARCH_LLM_BASE_URL": llm.base_url,
        "RESEARCH_LLM_API_KEY": KEY,
    }
    port, log = free_port(), tmp_path / "server.log"
    checkpoints = tmp_path / "data" / "checkpoints.sqlite"
    base = f"http://127.0.0.1:{port}"
    options = {"min_sources": 50, "max_iterations": 2}
    with server(env, port, log) as first:
        async with httpx.AsyncClient(base_url=base, timeout=30) as client:
            response = await client.post("/v1/research", json={"topic": TOPIC, "options": options})
            thread_id = response.json()["thread_id"]
            # Turn 1 searched and was summarised; turn 2 is with the model.
            await _wait_for(lambda: any("search" in c.tools and _turn(c) == 1 for c in llm.calls))
            await _checkpointed(checkpoints, thread_id, "Gutenberg Bible")
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
    killed = [c for c in llm.calls if "search" in c.tools]
    assert [_turn(c) for c in killed] == [0, 1], "killed while the second turn was asked"
    assert _summaries(llm, "Gutenberg Bible") == 1
    script.slow = False
    with server(env, port, log):
        async with httpx.AsyncClient(base_url=base, timeout=30) as client:
            frames = await collect(client, f"/v1/research/{thread_id}/events")
            detail = (await client.get(f"/v1/research/{thread_id}")).json()
    assert frames[-1].event == "done" and detail["status"] == "completed" and detail["report"]
    assert any(f.event == "status" and f.data.get("recovered") for f in frames)
    loop = _loop(killed[0])
    turns = [_turn(c) for c in llm.calls if "search" in c.tools and _loop(c) == loop]
    # The first turn and its search were not repeated: the loop went on from the second.
    assert turns == [0, 1, 1, 2], turns
    assert _summaries(llm, "Gutenberg Bible") == 1
    assert _summaries(llm, "Mainz printing workshop") == 1
    notes = [f.data["query"] for f in frames if f.event == "note"]
    assert "Gutenberg Bible" in notes and "Mainz printing workshop" in notes
    # The turns that finished before the kill are counted once, and the one it cut is not
    # (the server never answered it): the run's usage is what the server really answered.
    assert llm.abandoned == 1
    models = detail["usage"]["models"].values()
    assert sum(m["requests"] for m in models) == llm.reported_requests
    assert sum(m["prompt_tokens"] for m in models) == llm.reported_prompt_tokens
    assert sum(m["completion_tokens"] for m in models) == llm.reported_completion_tokens
    assert detail["tokens"] == llm.reported_total_tokens
    nodes = detail["usage"]["nodes"].values()
    assert sum(n["requests"] for n in nodes) == llm.reported_requests


def test_the_subgraph_state_survives_the_checkpointer_serializer() -> None:
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    from core.models import SearchResult
    from engines.recording import Fallback, ModelCall, Recorded, Repair, StructuredOutput
    from nodes.research_state import NodeSpending, QueryOutcome
    from stores.checkpointer import serializer

    serde = serializer()
    outcome = QueryOutcome(
        query="q",
        results=[SearchResult(title="t", url="https://example.org/a", content="c")],
        summary="s",
        page_errors=["x"],
    )
    call = ModelCall(role="researcher", model="gpt-4o-mini", input_tokens=7, output_tokens=3)
    spending = NodeSpending(
        node="model",
        attempt="a1",
        seconds=1.5,
        recorded=Recorded(
            calls=[call, call.model_copy(update={"error": "Timeout", "first": False})],
            fallbacks=[Fallback(step="investigate", reason="down")],
            repairs=[Repair(step="plan", error="missing field")],
            structured=[StructuredOutput(model="m", method="json_schema", refused={"x": "y"})],
        ),
    )
    turn = AIMessage(
        content="Thought",
        tool_calls=[{"name": "search", "args": {"query": "q"}, "id": "call_0"}],
        usage_metadata={"input_tokens": 3, "output_tokens": 2, "total_tokens": 5},
    )
    values = [
        [outcome],
        [spending],
        [SystemMessage("sys"), HumanMessage("hi"), turn, ToolMessage("obs", tool_call_id="call_0")],
    ]
    for value in values:
        assert serde.loads_typed(serde.dumps_typed(value)) == value


def test_a_resumed_step_counts_the_spending_of_its_earlier_attempt_once() -> None:
    from engines.recording import ModelCall, Recorded, record_call, recording
    from nodes.accounting import spent
    from nodes.research_state import NodeSpending

    def kept(attempt: str, tokens: int, seconds: float) -> NodeSpending:
        call = ModelCall(role="researcher", model="m", input_tokens=tokens, output_tokens=1)
        return NodeSpending(
            node="model", attempt=attempt, seconds=seconds, recorded=Recorded(calls=[call])
        )

    started = time.perf_counter()
    with recording() as step:
        record_call(ModelCall(role="writer", model="m", input_tokens=100))
        # A node of an earlier attempt (a worker that died), and one of this attempt.
        account_spending([kept("killed-worker", 10, 30.0), kept(step.attempt, 20, 0.5)])
    assert [c.input_tokens for c in step.calls] == [100, 10, 20]
    assert step.earlier_seconds == 30.0  # this attempt's own node is on its clock already
    usage = spent("researcher", started, step)
    assert usage.nodes["researcher"].requests == 3
    assert usage.nodes["researcher"].prompt_tokens == 130
    assert 30.0 <= usage.nodes["researcher"].seconds < 40.0
