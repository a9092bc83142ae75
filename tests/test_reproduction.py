"""Reproducible research over real HTTP: footnotes show what was read, replay, refresh, diff.

The service searches a loopback stand-in for Tavily whose results are pages of the same
server, and reads those pages with its real scraper (loopback allowed for the test).
"""

import hashlib
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from app import cli
from app.api import create_app
from app.settings import Settings

from .fake_llm import FakeLLM
from .llm_script import ResearchModel
from .servers import serve_port
from .test_api import wait_for_status

TOPIC = "history of the printing press"

PAGES = {
    "gutenberg": (
        "Johannes Gutenberg and the printing press",
        "Johannes Gutenberg introduced movable type printing to Europe around 1440 in Mainz. "
        "His printing press combined a screw press with metal type cast in a hand mould. "
        "The Gutenberg Bible, printed around 1455, was the first major book printed with "
        "movable metal type in Europe. The printing press spread to more than two hundred "
        "cities within fifty years.",
    ),
    "spread": (
        "The spread of the printing press",
        "By 1500 printing presses across Western Europe had produced more than twenty million "
        "volumes. The printing press lowered the cost of books and spread literacy. Venice "
        "became a centre of printing, where Aldus Manutius printed portable editions of the "
        "classics. The printing press helped the Reformation spread its pamphlets quickly.",
    ),
    "china": (
        "Printing before Gutenberg",
        "Woodblock printing was used in China by the seventh century. Bi Sheng invented "
        "movable type made of clay in China around 1040. Metal movable type was used in "
        "Korea in the thirteenth century, before the printing press of Gutenberg. The "
        "history of printing in East Asia is older than the printing press in Europe.",
    ),
}


@dataclass
class Upstream:
    """The web as the run sees it: a search API and the pages it finds; can be taken away."""

    pages: dict[str, tuple[str, str]] = field(default_factory=lambda: dict(PAGES))
    down: bool = False
    hits: int = 0
    base: str = ""

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/search", self.search, methods=["POST"]),
                Route("/pages/{slug}", self.page),
                Route("/robots.txt", lambda r: PlainTextResponse("", status_code=404)),
            ]
        )

    async def search(self, request: Request) -> Response:
        self.hits += 1
        if self.down:
            return JSONResponse({"detail": "down"}, status_code=503)
        body = await request.json()
        results = [
            {
                "title": title,
                "url": f"{self.base}/pages/{slug}",
                "content": text.split(". ")[0] + ".",
                "score": round(0.9 - i / 10, 2),
            }
            for i, (slug, (title, text)) in enumerate(self.pages.items())
        ]
        return JSONResponse({"query": body["query"], "results": results[: body["max_results"]]})

    async def page(self, request: Request) -> Response:
        self.hits += 1
        if self.down:
            return PlainTextResponse("down", status_code=503)
        title, text = self.pages[request.path_params["slug"]]
        paragraphs = "".join(f"<p>{s}.</p>" for s in text.rstrip(".").split(". "))
        return HTMLResponse(
            f"<html><head><title>{title}</title></head><body><article><h1>{title}</h1>"
            f"{paragraphs}</article></body></html>"
        )


@pytest.fixture
def upstream() -> Iterator[Upstream]:
    web = Upstream()
    with serve_port(web.app()) as port:
        web.base = f"http://127.0.0.1:{port}"
        yield web


def settings_for(data_dir: Path, web: Upstream) -> Settings:
    port = int(web.base.rsplit(":", 1)[1])
    return Settings(
        data_dir=data_dir,
        search_provider="tavily",
        tavily_api_key="tvly-test-key",
        tavily_base_url=web.base,
        search_max_retries=0,
        engine="extractive",
        page_allow_private=True,
        page_allowed_ports=[port],
        page_respect_robots=False,
        pages_per_query=2,
    )


@pytest.fixture
async def client(tmp_path: Path, upstream: Upstream) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(settings_for(tmp_path / "data", upstream))
    with serve_port(app, lifespan="on") as port:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:
            yield http


async def finished(client: httpx.AsyncClient, thread_id: str) -> dict[str, Any]:
    detail = await wait_for_status(client, thread_id, {"completed", "failed", "cancelled"})
    assert detail["status"] == "completed", detail
    return detail


async def research(client: httpx.AsyncClient) -> str:
    started = await client.post("/v1/research", json={"topic": TOPIC})
    assert started.status_code == 202, started.text
    thread_id: str = started.json()["thread_id"]
    await finished(client, thread_id)
    return thread_id


async def rerun(client: httpx.AsyncClient, thread_id: str, mode: str) -> str:
    answer = await client.post(f"/v1/research/{thread_id}/rerun", json={"mode": mode})
    assert answer.status_code == 202, answer.text
    new_id: str = answer.json()["thread_id"]
    assert new_id != thread_id
    await finished(client, new_id)
    return new_id


async def report(client: httpx.AsyncClient, thread_id: str) -> str:
    answer = await client.get(f"/v1/research/{thread_id}/report")
    assert answer.status_code == 200, answer.text
    return answer.text


async def test_a_footnote_shows_the_text_the_run_read_and_the_quote(
    client: httpx.AsyncClient, upstream: Upstream
) -> None:
    thread_id = await research(client)
    sources = (
        await client.get(f"/v1/research/{thread_id}/report", headers={"Accept": "application/json"})
    ).json()["sources"]
    assert sources, "the report cites nothing"
    for cited in sources:
        answer = await client.get(f"/v1/research/{thread_id}/sources/{cited['n']}")
        assert answer.status_code == 200, answer.text
        view = answer.json()
        assert view["url"] == cited["url"]
        assert view["content_hash"] == hashlib.sha256(view["text"].encode()).hexdigest()
        assert view["kept"] is True
        assert view["read_at"] is not None
        assert view["quotes"], "a cited source supports at least one sentence"
        for quote in view["quotes"]:
            passage = view["text"][quote["start"] : quote["end"]]
            assert passage.strip()
            assert quote["support"] > 0
    page = next(s for s in sources if "/pages/" in s["url"])
    view = (await client.get(f"/v1/research/{thread_id}/sources/{page['n']}")).json()
    slug = page["url"].rsplit("/", 1)[1]
    # the page was read in full: its text is the page's, not the search snippet
    assert view["kind"] == "page"
    assert PAGES[slug][1].split(". ")[2] in view["text"]
    missing = await client.get(f"/v1/research/{thread_id}/sources/999")
    assert missing.status_code == 404
    assert "footnotes" in missing.json()["error"]["message"]


async def test_a_replay_needs_no_network_and_writes_the_same_report(
    client: httpx.AsyncClient, upstream: Upstream
) -> None:
    original = await research(client)
    upstream.down = True  # the web is gone: a replay must not need it
    hits = upstream.hits
    replayed = await rerun(client, original, "replay")
    assert upstream.hits == hits
    assert await report(client, replayed) == await report(client, original)
    detail = (await client.get(f"/v1/research/{replayed}")).json()
    assert detail["plan"] == (await client.get(f"/v1/research/{original}")).json()["plan"]
    diff = (await client.get(f"/v1/research/{original}/diff/{replayed}")).json()
    assert diff["sources_added"] == diff["sources_removed"] == diff["sources_changed"] == []
    assert diff["findings_added"] == diff["findings_dropped"] == []
    assert diff["sources_unchanged"] == diff["base"]["sources"] > 0
    # the replay's footnotes stand on the same texts, read when the original read them
    first = (await client.get(f"/v1/research/{original}/sources/1")).json()
    again = (await client.get(f"/v1/research/{replayed}/sources/1")).json()
    assert again == first


async def test_a_refresh_reads_again_and_the_diff_shows_the_changed_page(
    client: httpx.AsyncClient, upstream: Upstream
) -> None:
    original = await research(client)
    title, text = upstream.pages["gutenberg"]
    upstream.pages["gutenberg"] = (
        title,
        text + " Historians now date the first Mainz printing press to 1439.",
    )
    refreshed = await rerun(client, original, "refresh")
    diff = (await client.get(f"/v1/research/{original}/diff/{refreshed}")).json()
    changed = [c["url"] for c in diff["sources_changed"]]
    assert changed == [f"{upstream.base}/pages/gutenberg"]
    assert diff["sources_added"] == diff["sources_removed"] == []
    assert diff["base"]["thread_id"] == original and diff["other"]["thread_id"] == refreshed


async def test_rerun_and_diff_are_the_callers_own(client: httpx.AsyncClient) -> None:
    assert (await client.post("/v1/research/nope/rerun", json={})).status_code == 404
    original = await research(client)
    assert (await client.get(f"/v1/research/{original}/diff/nope")).status_code == 404
    bad = await client.post(f"/v1/research/{original}/rerun", json={"mode": "again"})
    assert bad.status_code == 422


def test_an_exported_run_imports_on_a_fresh_data_dir(
    tmp_path: Path, upstream: Upstream, corpus_index: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = create_app(settings_for(tmp_path / "first", upstream))
    with (
        serve_port(app, lifespan="on") as port,
        httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as http,
    ):
        thread_id = http.post("/v1/research", json={"topic": TOPIC}).json()["thread_id"]
        with http.stream("GET", f"/v1/research/{thread_id}/events") as stream:
            for _ in stream.iter_lines():
                pass  # the stream closes after `done`
        original = http.get(f"/v1/research/{thread_id}/report").text
        cited = http.get(
            f"/v1/research/{thread_id}/report", headers={"Accept": "application/json"}
        ).json()["sources"]
        texts = {
            c["n"]: http.get(f"/v1/research/{thread_id}/sources/{c['n']}").json() for c in cited
        }
        exported = http.get(f"/v1/research/{thread_id}/export")
        assert exported.status_code == 200
    archive = tmp_path / "run.json"
    archive.write_bytes(exported.content)

    fresh = tmp_path / "second"
    monkeypatch.setenv("RESEARCH_DATA_DIR", str(fresh))
    monkeypatch.setenv("RESEARCH_CORPUS_INDEX", str(corpus_index))
    runner = CliRunner()
    answer = runner.invoke(cli.app, ["import", str(archive)])
    assert answer.exit_code == 0, answer.output
    again = runner.invoke(cli.app, ["import", str(archive)])
    assert again.exit_code != 0 and "already exists" in again.output
    upstream.down = True  # the imported run needs nothing from the web
    settings = Settings(data_dir=fresh, corpus_index=corpus_index, search_provider="local")
    with (
        serve_port(create_app(settings), lifespan="on") as port,
        httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as http,
    ):
        detail = http.get(f"/v1/research/{thread_id}").json()
        assert detail["status"] == "completed"
        assert http.get(f"/v1/research/{thread_id}/report").text == original
        for n, view in texts.items():
            imported = http.get(f"/v1/research/{thread_id}/sources/{n}").json()
            assert imported["text"] == view["text"]
            assert imported["content_hash"] == view["content_hash"]
            assert imported["kept"] is True
            assert imported["read_at"] == view["read_at"]
        # and it replays there, with no network
        replay = http.post(f"/v1/research/{thread_id}/rerun", json={"mode": "replay"}).json()
        with http.stream("GET", f"/v1/research/{replay['thread_id']}/events") as stream:
            for _ in stream.iter_lines():
                pass
        assert http.get(f"/v1/research/{replay['thread_id']}/report").text == original


async def test_model_calls_are_kept_with_template_versions_and_replay_alike(
    tmp_path: Path, corpus_index: Path, llm: FakeLLM, settings_env: Path
) -> None:
    llm.responder = ResearchModel()
    settings = Settings(
        data_dir=tmp_path / "data",
        corpus_index=corpus_index,
        search_provider="local",
        llm_base_url=llm.base_url,
        llm_api_key="sk-evidence-test-123456",
        retry_base_delay_s=0,
    )
    with serve_port(create_app(settings), lifespan="on") as port:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            started = await client.post(
                "/v1/research", json={"topic": TOPIC, "options": {"min_sources": 2}}
            )
            original = started.json()["thread_id"]
            await finished(client, original)
            archive = (await client.get(f"/v1/research/{original}/export")).json()
            replayed = await rerun(client, original, "replay")
            before, after = await report(client, original), await report(client, replayed)
            diff = (await client.get(f"/v1/research/{original}/diff/{replayed}")).json()

    # The same report from the same model; only what it spent differs: a re-run starts
    # from the approved plan, so it makes no planning call.
    spent = ("tokens:", "cost_usd:")
    assert before != after
    assert [line for line in before.splitlines() if not line.startswith(spent)] == [
        line for line in after.splitlines() if not line.startswith(spent)
    ]

    calls = [r for r in archive["evidence"]["records"] if r["kind"] == "model"]
    assert calls, "the run's model calls are part of its evidence"
    templates = {c["template"] for c in calls}
    assert {"planner.plan", "writer.write", "reviewer.review"} <= templates
    for call in calls:
        assert call["reported_model"] == "gpt-4o-mini"  # as the server answered
        assert call["model"] == "openai:gpt-4o-mini"
        assert len(call["template_version"]) == 16
        assert call["input_tokens"] > 0
    assert "sk-evidence-test" not in repr(archive)
    assert diff["base"]["models"]["writer"] == "gpt-4o-mini"
    assert diff["templates_changed"] == []
    # the replay made every call the original made, but the plan's
    assert set(diff["base"]["templates"]) - set(diff["other"]["templates"]) == {"planner.plan"}
