"""A research step killed mid-investigation resumes from its last finished ReAct turn."""

import asyncio
import os
import signal
import time
from pathlib import Path
from typing import Any

import httpx

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
    base = f"http://127.0.0.1:{port}"
    options = {"min_sources": 50, "max_iterations": 2}
    with server(env, port, log) as first:
        async with httpx.AsyncClient(base_url=base, timeout=30) as client:
            response = await client.post("/v1/research", json={"topic": TOPIC, "options": options})
            thread_id = response.json()["thread_id"]
            # Turn 1 searched and was summarised; turn 2 is with the model.
            await _wait_for(lambda: any("search" in c.tools and _turn(c) == 1 for c in llm.calls))
            await asyncio.sleep(0.5)  # the turn's checkpoint is written behind the next node
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


def test_the_subgraph_state_survives_the_checkpointer_serializer() -> None:
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    from core.models import SearchResult
    from nodes.research_state import QueryOutcome
    from stores.checkpointer import serializer

    serde = serializer()
    outcome = QueryOutcome(
        query="q",
        results=[SearchResult(title="t", url="https://example.org/a", content="c")],
        summary="s",
        page_errors=["x"],
    )
    turn = AIMessage(
        content="Thought",
        tool_calls=[{"name": "search", "args": {"query": "q"}, "id": "call_0"}],
        usage_metadata={"input_tokens": 3, "output_tokens": 2, "total_tokens": 5},
    )
    values = [
        [outcome],
        [SystemMessage("sys"), HumanMessage("hi"), turn, ToolMessage("obs", tool_call_id="call_0")],
    ]
    for value in values:
        assert serde.loads_typed(serde.dumps_typed(value)) == value
