"""One research run against a real OpenAI-compatible model server (opt-in).

Runs only when RESEARCH_TEST_LLM_URL names the server's base URL (for example llama.cpp's
`llama-server` at http://127.0.0.1:8082/v1); RESEARCH_TEST_LLM_MODEL names the model
(default: the first the server lists). Whatever the model writes, the run must finish
(final, partial or insufficient, never a crash), within its time budget, with token and request figures
that agree with the server's own usage reports.

    RESEARCH_TEST_LLM_URL=http://127.0.0.1:8082/v1 pytest -s tests/test_real_llm.py
"""

import os
import time
from pathlib import Path

import httpx
import pytest

from app.composition import llm_engine
from app.settings import Settings
from engines.report_markdown import split_front_matter
from graph.builder import ResearchGraph
from nodes.context import Deps
from tools.local_corpus import LocalCorpus

from .support import start
from .test_llm_engine import run
from .usage_proxy import usage_proxy

URL = os.environ.get("RESEARCH_TEST_LLM_URL", "")
TIME_BUDGET_S = 600.0
MAX_TOKENS = 512

pytestmark = pytest.mark.skipif(
    not URL, reason="set RESEARCH_TEST_LLM_URL to a real OpenAI-compatible server's base URL"
)


def model_name() -> str:
    named = os.environ.get("RESEARCH_TEST_LLM_MODEL")
    if named:
        return named
    listing = httpx.get(f"{URL.rstrip('/')}/models", timeout=30).json()
    return str(listing["data"][0]["id"])


async def test_a_run_against_a_real_model_finishes_with_the_servers_own_figures(
    settings_env: Path, graph: ResearchGraph, corpus: LocalCorpus
) -> None:
    model = f"openai:{model_name()}"
    with usage_proxy(URL) as (base_url, server):
        settings = Settings(
            llm_base_url=base_url,
            models={"default": {"model": model, "max_tokens": MAX_TOKENS, "timeout_seconds": 180}},
        )
        deps = Deps(engine=llm_engine(settings), search=corpus)
        started = time.monotonic()
        values, events = await run(
            graph,
            deps,
            "real-llm",
            start(min_sources=3, max_iterations=3, time_budget_s=TIME_BUDGET_S),
        )
        wall = time.monotonic() - started

    usage = values["usage"]
    spent = usage.models[model]
    fallbacks = [e for e in events if e["event"] == "fallback"]
    chosen = {e["method"] for e in events if e["event"] == "structured_output"}
    front, body = split_front_matter(values["final_report"])
    print(
        f"\nreal model {model} at {URL}: status {values['report_status']}, {wall:.0f} s, "
        f"{len(values.get('research_data', []))} sources, structured output {sorted(chosen)}, "
        f"{len(fallbacks)} fallbacks ({sorted({e['step'] for e in fallbacks})}), "
        f"requests {spent.requests} (server {server.requests}), tokens "
        f"{spent.prompt_tokens}+{spent.completion_tokens} "
        f"(server {server.prompt_tokens}+{server.completion_tokens}, "
        f"{spent.estimated} estimated, server sent none for {server.without_usage})"
    )
    print(front)

    assert values["report_status"] in ("final", "partial", "insufficient")
    assert body.strip(), "a report, whatever its quality"
    assert usage.seconds <= TIME_BUDGET_S * 1.1
    # Every request the engine made reached the server, and each side counts them alike.
    assert spent.requests == server.requests
    assert sum(node.requests for node in usage.nodes.values()) == spent.requests
    # Tokens: exactly the server's where it reported them; estimated (and marked) where not.
    assert spent.estimated == server.without_usage
    if not server.without_usage:
        assert spent.prompt_tokens == server.prompt_tokens
        assert spent.completion_tokens == server.completion_tokens
    if values["report_status"] == "final":
        assert "[^1]" in body
