"""The HTTP service with the LLM engine: tokens, usage and refusals reach the client."""

from pathlib import Path

import httpx
import pytest

from app.api import create_app
from app.settings import Settings

from .fake_llm import FakeLLM, Reply
from .llm_script import ResearchModel
from .servers import serve_port
from .sse import collect
from .support import TOPIC

KEY = "sk-service-secret-987654321"


def settings(tmp_path: Path, corpus_index: Path, llm: FakeLLM) -> Settings:
    return Settings(
        data_dir=tmp_path / "data",
        corpus_index=corpus_index,
        search_provider="local",
        llm_base_url=llm.base_url,
        llm_api_key=KEY,
        retry_base_delay_s=0,
    )


async def test_tokens_usage_rounds_and_citations_reach_the_client(
    tmp_path: Path, corpus_index: Path, llm: FakeLLM, settings_env: Path
) -> None:
    llm.responder = ResearchModel()
    app = create_app(settings(tmp_path, corpus_index, llm))
    with serve_port(app, lifespan="on") as port:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            started = await client.post(
                "/v1/research", json={"topic": TOPIC, "options": {"min_sources": 2}}
            )
            thread_id = started.json()["thread_id"]
            frames = await collect(client, f"/v1/research/{thread_id}/events")
            detail = (await client.get(f"/v1/research/{thread_id}")).json()

    names = [f.event for f in frames]
    assert names[-1] == "done" and "token" in names and "usage" in names
    text = "".join(f.data["text"] for f in frames if f.event == "token")
    assert text.startswith("# ") and "## References" in text
    last_usage = [f.data for f in frames if f.event == "usage"][-1]
    assert last_usage["total"]["tokens"] == llm.reported_total_tokens

    assert detail["status"] == "completed"
    assert detail["tokens"] == llm.reported_total_tokens
    assert detail["usage"]["models"]["openai:gpt-4o-mini"]["requests"] == llm.reported_requests
    assert detail["rounds"][0]["round_number"] == 1
    assert detail["rounds"][0]["submissions"][0]["name"] == "supervisor"
    assert detail["citations"]["share"] == 1.0
    assert '"writer": "openai:gpt-4o-mini"' in detail["report"]
    assert KEY not in repr(frames) and KEY not in repr(detail)


async def test_a_refused_key_fails_the_run_with_the_setting_to_fix(
    tmp_path: Path,
    corpus_index: Path,
    llm: FakeLLM,
    settings_env: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    llm.responder = lambda call: Reply(
        status=401,
        error_body={"error": {"message": f"Incorrect API key provided: {KEY}"}},
    )
    app = create_app(settings(tmp_path, corpus_index, llm))
    with serve_port(app, lifespan="on") as port:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            started = await client.post("/v1/research", json={"topic": TOPIC})
            thread_id = started.json()["thread_id"]
            frames = await collect(client, f"/v1/research/{thread_id}/events")
            detail = (await client.get(f"/v1/research/{thread_id}")).json()

    error = next(f.data for f in frames if f.event == "error")
    assert "RESEARCH_LLM_API_KEY" in error["message"]
    assert detail["status"] == "failed" and "RESEARCH_LLM_API_KEY" in detail["error"]
    assert KEY not in repr(frames) and KEY not in repr(detail)
    assert len(llm.calls) == 1, "a refused key is not retried"
    assert "RESEARCH_LLM_API_KEY" in caplog.text, "the failure is logged"
    assert KEY not in caplog.text, "but never the key the provider quoted back"
