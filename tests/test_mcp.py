"""The MCP face, driven by the official SDK's own client: streamable HTTP on loopback, stdio in a process."""

import asyncio
import json
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.context import ClientRequestContext
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult, ElicitRequestParams, ElicitResult, TextResourceContents

from app.api import create_app
from app.settings import Settings

from .servers import bearer, serve_port
from .support import TOPIC
from .test_full_disk import _fill
from .test_full_disk import small_disk as disk  # noqa: F401 (a fixture: a small tmpfs)

CLI = Path(sys.executable).parent / "research-agent"
# Polls of a run's status before a test gives up (each a tool call, not a timed wait).
POLLS = 2000

Connect = Callable[..., Any]


@asynccontextmanager
async def mcp_client(url: str, key: str | None, **options: Any) -> AsyncIterator[Client]:
    """An SDK client of the MCP endpoint at `url`, presenting `key`."""
    headers = bearer(key) if key else {}
    http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=300.0))
    async with http, Client(streamable_http_client(url, http_client=http), **options) as client:
        yield client


class Served:
    """A live service (REST and MCP on one port) with these settings."""

    def __init__(self, base: str, keys: list[str]) -> None:
        self.base = base
        self.mcp = f"{base}/mcp"
        self.keys = keys

    def client(self, which: int = 0, **options: Any) -> Any:
        """An SDK client presenting key `which` (0 or 1)."""
        return mcp_client(self.mcp, self.keys[which], **options)

    async def rest(
        self, path: str, which: int = 0, body: dict[str, Any] | None = None
    ) -> httpx.Response:
        """GET `path` over REST with key `which` (POST `body` when there is one)."""
        headers = bearer(self.keys[which])
        async with httpx.AsyncClient(base_url=self.base, headers=headers) as http:
            if body is not None:
                return await http.post(path, json=body)
            return await http.get(path)


@contextmanager
def serving(tmp_path: Path, corpus_index: Path, **overrides: Any) -> Iterator[Served]:
    """The service with two keys of its own (a Redis is shared by the tests: no key is reused)."""
    keys = [f"key-{name}-{uuid.uuid4().hex}" for name in "ab"]
    settings = Settings(
        data_dir=tmp_path / "data",
        corpus_index=corpus_index,
        search_provider="local",
        api_keys=keys,
        max_body_bytes=64_000,
        **overrides,
    )
    with serve_port(create_app(settings), lifespan="on") as port:
        yield Served(f"http://127.0.0.1:{port}", keys)


@pytest.fixture
def served(tmp_path: Path, corpus_index: Path, stores: dict[str, Any]) -> Iterator[Served]:
    """The service on the embedded stores, and on Redis with its run queue and a worker."""
    with serving(tmp_path, corpus_index, **stores) as live:
        yield live


def structured(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content


def refused(result: CallToolResult, code: str) -> str:
    """Return the message of a tool error with the REST API's `code`."""
    assert result.is_error, result
    assert result.structured_content is not None
    error = result.structured_content["error"]
    assert error["code"] == code, error
    text = result.content[0]
    assert getattr(text, "text", "") == f"{code}: {error['message']}"
    return str(error["message"])


async def until_status(client: Client, thread_id: str, *statuses: str) -> dict[str, Any]:
    """Poll `get_status` until the thread is in one of `statuses`; return its detail."""
    for _ in range(POLLS):
        detail = structured(await client.call_tool("get_status", {"thread_id": thread_id}))
        if detail["status"] in statuses:
            return detail
        assert detail["status"] in ("queued", "running", "waiting_for_approval"), detail
        await asyncio.sleep(0.01)
    raise AssertionError(f"thread {thread_id} never reached {statuses}: {detail['status']}")


async def research_with_progress(
    client: Client, arguments: dict[str, Any]
) -> tuple[dict[str, Any], list[str]]:
    messages: list[str] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        messages.append(message or "")

    result = await client.call_tool("research", arguments, progress_callback=progress)
    return structured(result), messages


def steps_seen(messages: list[str]) -> set[str]:
    """Which of a run's steps the progress notifications named."""
    kinds = ("plan", "search", "source", "draft", "review", "report")
    return {kind for kind in kinds for m in messages if m.startswith(kind)}


def text_of(contents: list[Any]) -> str:
    [content] = contents
    assert isinstance(content, TextResourceContents)
    return content.text


# -- streamable HTTP --------------------------------------------------------------------


async def test_the_tools_and_resources_are_listed_with_the_models_schemas(served: Served) -> None:
    async with served.client() as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        templates = (await client.list_resource_templates()).resource_templates
    assert set(tools) == {
        "start_research",
        "research",
        "get_status",
        "get_report",
        "approve_plan",
        "cancel",
        "list_threads",
        "ask",
    }
    start = tools["start_research"].input_schema
    assert start["required"] == ["topic"]
    assert "approval" in start["$defs"]["RunOptions"]["properties"]
    assert tools["get_status"].output_schema is not None
    assert "waiting_for_approval" in json.dumps(tools["get_status"].output_schema)
    approve = tools["approve_plan"].input_schema["properties"]
    assert approve["decision"]["enum"] == ["approve", "edit", "reject"]
    assert {t.uri_template for t in templates} == {
        "research://threads/{thread_id}/report",
        "research://threads/{thread_id}/sources/{n}",
    }


async def test_research_reports_progress_then_the_report_its_resources_and_rest_agree(
    served: Served,
) -> None:
    async with served.client() as client:
        outcome, messages = await research_with_progress(client, {"topic": TOPIC})
        thread_id = outcome["thread_id"]
        report = await client.call_tool("get_report", {"thread_id": thread_id})
        resource = await client.read_resource(f"research://threads/{thread_id}/report")
        source = await client.read_resource(f"research://threads/{thread_id}/sources/1")
        html = await client.call_tool("get_report", {"thread_id": thread_id, "format": "html"})
        page = structured(await client.call_tool("list_threads", {}))
    assert messages[0] == f"thread {thread_id}: started"
    assert steps_seen(messages) == {"plan", "search", "source", "draft", "review", "report"}
    assert messages[-1] == "status: completed"
    assert outcome["status"] == "completed" and outcome["next_step"] is None
    assert outcome["report"].count("[^1]") >= 1 and outcome["sources"][0]["n"] == 1
    assert structured(report)["content"] == outcome["report"] == text_of(resource.contents)
    cited = json.loads(text_of(source.contents))
    assert cited["n"] == 1 and cited["url"] == outcome["sources"][0]["url"]
    assert structured(html)["content"].lstrip().lower().startswith("<!doctype html")
    assert [t["thread_id"] for t in page["items"]] == [thread_id]
    over_rest = (await served.rest(f"/v1/research/{thread_id}")).json()
    assert over_rest["status"] == "completed" and over_rest["report"] == outcome["report"]


async def test_a_plan_waits_for_approve_plan_and_the_result_says_how(served: Served) -> None:
    options = {"approval": "plan", "max_iterations": 3}
    async with served.client() as client:
        outcome, messages = await research_with_progress(
            client, {"topic": TOPIC, "options": options}
        )
        thread_id = outcome["thread_id"]
        assert outcome["status"] == "waiting_for_approval"
        assert outcome["approval"]["type"] == "plan" and outcome["report"] is None
        assert "approve_plan" in outcome["next_step"] and thread_id in outcome["next_step"]
        assert messages[-1] == "waiting for approval of the plan"
        # A malformed decision is a validation error, and leaves the run waiting.
        rejected = await client.call_tool(
            "approve_plan", {"thread_id": thread_id, "decision": "reject"}
        )
        assert refused(rejected, "validation_error") == (
            "arguments: decision 'reject' needs 'feedback' saying what to change"
        )
        approved = await client.call_tool(
            "approve_plan", {"thread_id": thread_id, "decision": "approve"}
        )
        assert structured(approved)["status"] == "queued"
        again = await client.call_tool(
            "approve_plan", {"thread_id": thread_id, "decision": "approve"}
        )
        assert refused(again, "invalid_state").startswith("only a paused or waiting run can resume")
        detail = await until_status(client, thread_id, "completed")
        report = structured(await client.call_tool("get_report", {"thread_id": thread_id}))
    assert detail["report"] == report["content"] and report["status"] == "final"


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_research_asks_for_the_plan_through_elicitation_where_the_client_can(
    served: Served, mode: str
) -> None:
    """2026-07-28 clients get an InputRequiredResult; a handshake-era session, elicitation/create."""
    asked: list[str] = []

    async def approve(context: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult:
        asked.append(params.message)
        return ElicitResult(action="accept", content={"decision": "approve", "feedback": ""})

    async with served.client(elicitation_callback=approve, mode=mode) as client:
        assert client.protocol_version.startswith("2026") == (mode == "auto")
        outcome, messages = await research_with_progress(
            client, {"topic": TOPIC, "options": {"approval": "plan"}}
        )
    assert len(asked) == 1 and "Approve the research plan" in asked[0]
    assert outcome["status"] == "completed" and outcome["report"]
    assert "waiting for approval of the plan" in messages and messages[-1] == "status: completed"


async def test_one_key_cannot_name_another_keys_thread_in_any_tool_or_resource(
    served: Served,
) -> None:
    async with served.client(0) as owner, served.client(1) as other:
        started = structured(
            await owner.call_tool(
                "start_research", {"topic": TOPIC, "options": {"approval": "plan"}}
            )
        )
        thread_id = started["thread_id"]
        await until_status(owner, thread_id, "waiting_for_approval")
        messages = []
        for tool, extra in (
            ("get_status", {}),
            ("get_report", {}),
            ("approve_plan", {"decision": "approve"}),
            ("cancel", {}),
            ("ask", {"question": "who built the first press?"}),
        ):
            result = await other.call_tool(tool, {"thread_id": thread_id, **extra})
            messages.append(refused(result, "not_found"))
        unknown = refused(
            await other.call_tool("get_status", {"thread_id": "no-such-thread"}), "not_found"
        )
        for uri in (
            f"research://threads/{thread_id}/report",
            f"research://threads/{thread_id}/sources/1",
        ):
            with pytest.raises(MCPError) as failure:
                await other.read_resource(uri)
            assert failure.value.data["code"] == "not_found"
        listed = structured(await other.call_tool("list_threads", {}))
        mine = structured(await owner.call_tool("get_status", {"thread_id": thread_id}))
    # The same answer as for a thread nobody has, with the id the caller gave.
    assert messages == [unknown.replace("no-such-thread", thread_id)] * 5
    assert listed["items"] == [] and mine["status"] == "waiting_for_approval"
    assert (await served.rest(f"/v1/research/{thread_id}", 1)).status_code == 404


async def test_no_key_or_an_oversized_body_is_refused_before_mcp_reads_it(served: Served) -> None:
    async with httpx.AsyncClient() as http:
        keyless = await http.post(served.mcp, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
        wrong = await http.post(served.mcp, json={}, headers=bearer("key-c"))
        large = await http.post(
            served.mcp,
            content=b"x" * 100_000,
            headers=bearer(served.keys[0]) | {"content-type": "application/json"},
        )
    assert keyless.status_code == wrong.status_code == 401
    assert keyless.json()["error"]["code"] == "unauthorized"
    assert keyless.headers["www-authenticate"] == "Bearer"
    assert large.status_code == 413 and large.json()["error"]["code"] == "payload_too_large"
    with pytest.raises(BaseException) as failure:  # the SDK's client, too, is turned away
        async with mcp_client(served.mcp, None) as client:
            await client.list_tools()
    # (It reports the 401 as an error response, without its status.)
    assert any(m.startswith("MCPError: ") for m in _messages(failure.value)), failure.value


def _messages(exc: BaseException) -> list[str]:
    """The messages of an exception and of those it groups or was raised from."""
    found = [f"{type(exc).__name__}: {exc}"]
    for inner in getattr(exc, "exceptions", ()):
        found += _messages(inner)
    if exc.__cause__ is not None:
        found += _messages(exc.__cause__)
    return found


@pytest.mark.parametrize(
    ("tool", "arguments", "field"),
    [
        ("start_research", {}, "topic"),
        ("start_research", {"topic": 5}, "topic"),
        ("start_research", {"topic": "???"}, "topic"),
        (
            "start_research",
            {"topic": TOPIC, "options": {"max_iterations": 99}},
            "options.max_iterations",
        ),
        ("start_research", {"topic": TOPIC, "options": {"approval": "always"}}, "options.approval"),
        ("start_research", {"topic": TOPIC, "options": {"colour": "red"}}, "options.colour"),
        ("research", {"topic": ""}, "topic"),
        ("approve_plan", {"thread_id": "t", "decision": "maybe"}, "decision"),
        ("get_report", {"thread_id": "t", "format": "pdf"}, "format"),
        ("list_threads", {"cursor": "not a cursor"}, "cursor"),
        ("list_threads", {"limit": 0}, "limit"),
        ("ask", {"thread_id": "t"}, "question"),
    ],
)
async def test_malformed_arguments_are_a_validation_error_naming_the_field(
    served: Served, tool: str, arguments: dict[str, Any], field: str
) -> None:
    async with served.client() as client:
        result = await client.call_tool(tool, arguments)
        page = structured(await client.call_tool("list_threads", {}))
    message = refused(result, "validation_error")
    assert message.startswith(f"{field}: ")
    fields = result.structured_content["error"]["details"]["fields"]  # type: ignore[index]
    assert field in [f["field"] for f in fields]
    assert page["items"] == []  # nothing was started


async def test_a_client_that_disconnects_mid_run_leaves_the_run_going(served: Served) -> None:
    heard = asyncio.Event()
    messages: list[str] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        messages.append(message or "")
        heard.set()

    async with served.client() as client:
        call = asyncio.create_task(
            client.call_tool("research", {"topic": TOPIC}, progress_callback=progress)
        )
        await heard.wait()
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
    # The client is gone (its session closed): the run is the service's, visible over REST.
    thread_id = messages[0].removeprefix("thread ").removesuffix(": started")
    for _ in range(POLLS):
        detail = (await served.rest(f"/v1/research/{thread_id}")).json()
        if detail["status"] not in ("queued", "running"):
            break
        await asyncio.sleep(0.01)
    assert detail["status"] == "completed" and detail["report"]
    async with served.client() as client:
        report = structured(await client.call_tool("get_report", {"thread_id": thread_id}))
    assert report["content"] == detail["report"]


async def test_run_admission_is_the_rest_apis_too_many_runs(
    tmp_path: Path, corpus_index: Path
) -> None:
    limits = {"search_delay_ms": 2000, "max_concurrent_runs": 1, "max_queued_runs": 0}
    with serving(tmp_path, corpus_index, **limits) as served:
        async with served.client() as client:
            first = structured(await client.call_tool("start_research", {"topic": TOPIC}))
            second = await client.call_tool("research", {"topic": TOPIC})
            third = await client.call_tool("start_research", {"topic": TOPIC})
            over_rest = await served.rest("/v1/research", body={"topic": TOPIC})
            structured(await client.call_tool("cancel", {"thread_id": first["thread_id"]}))
            page = structured(await client.call_tool("list_threads", {}))
    assert over_rest.status_code == 429
    message = over_rest.json()["error"]["message"]
    assert refused(second, "too_many_runs") == refused(third, "too_many_runs") == message
    assert [t["status"] for t in page["items"]] == ["cancelled"]


async def test_a_full_disk_is_a_tool_error_with_the_rest_apis_code(
    disk: Path,  # noqa: F811 (the fixture imported above)
    corpus_index: Path,
) -> None:
    settings = Settings(data_dir=disk / "data", corpus_index=corpus_index, search_provider="local")
    with serve_port(create_app(settings), lifespan="on") as port:
        async with mcp_client(f"http://127.0.0.1:{port}/mcp", None) as client:
            filler = _fill(disk)
            try:
                # A few writes may still fit in the room the database's log holds.
                results = []
                while len(results) < 40 and not any(r.is_error for r in results):
                    results.append(await client.call_tool("start_research", {"topic": TOPIC}))
            finally:
                filler.unlink()
            page = await client.call_tool("list_threads", {})
    message = refused(results[-1], "insufficient_storage")
    assert message.startswith("the disk holding the data file is full")
    assert all(not r.is_error for r in results[:-1])
    assert len(structured(page)["items"]) == len(results) - 1  # reads go on, nothing half-made


# -- stdio --------------------------------------------------------------------------------


@pytest.fixture
def stdio_env(tmp_path: Path, corpus_index: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESEARCH_")}
    env.pop("OPENAI_API_KEY", None)
    env.pop("OPENAI_BASE_URL", None)
    return env | {
        "RESEARCH_DATA_DIR": str(tmp_path / "data"),
        "RESEARCH_CONFIG": str(tmp_path / "none.toml"),
        "RESEARCH_CORPUS_INDEX": str(corpus_index),
    }


def stdio_client(env: dict[str, str], **options: Any) -> Client:
    return Client(StdioServerParameters(command=str(CLI), args=["mcp"], env=env), **options)


@pytest.mark.slow
async def test_stdio_research_approval_report_and_source(stdio_env: dict[str, str]) -> None:
    async with stdio_client(stdio_env) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        outcome, messages = await research_with_progress(client, {"topic": TOPIC})
        thread_id = outcome["thread_id"]
        source = await client.read_resource(f"research://threads/{thread_id}/sources/1")
        report = await client.read_resource(f"research://threads/{thread_id}/report")
        waiting, _ = await research_with_progress(
            client, {"topic": TOPIC, "options": {"approval": "plan"}}
        )
        approved = await client.call_tool(
            "approve_plan", {"thread_id": waiting["thread_id"], "decision": "approve"}
        )
        structured(approved)
        done = await until_status(client, waiting["thread_id"], "completed")
        bad = await client.call_tool(
            "start_research", {"topic": TOPIC, "options": {"min_sources": 0}}
        )
    assert "research" in names and "approve_plan" in names
    assert steps_seen(messages) == {"plan", "search", "source", "draft", "review", "report"}
    assert outcome["status"] == "completed" and text_of(report.contents) == outcome["report"]
    assert json.loads(text_of(source.contents))["n"] == 1
    assert waiting["status"] == "waiting_for_approval" and "approve_plan" in waiting["next_step"]
    assert done["report"]
    assert refused(bad, "validation_error").startswith("options.min_sources: ")


# -- without the mcp extra --------------------------------------------------------------


async def test_without_the_extra_mcp_is_a_501_naming_it_and_the_rest_goes_on(
    tmp_path: Path, corpus_index: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "mcp", None)  # as where the SDK is not installed
    with serving(tmp_path, corpus_index) as live:
        headers = bearer(live.keys[0])
        async with httpx.AsyncClient(base_url=live.base, headers=headers) as http:
            answer = await http.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
            anonymous = await http.post("/mcp", headers={"Authorization": ""}, json={})
            started = await http.post("/v1/research", json={"topic": TOPIC})
            schema = (await http.get("/openapi.json")).json()
    assert answer.status_code == 501, answer.text
    error = answer.json()["error"]
    assert error["code"] == "not_installed"
    assert "pip install 'research-agent[mcp]'" in error["message"]
    assert anonymous.status_code == 401  # the key is checked first, as for /v1/
    assert started.status_code == 202
    assert "/mcp" not in schema["paths"]


def test_without_the_extra_research_agent_mcp_says_what_to_install(
    tmp_path: Path, stdio_env: dict[str, str]
) -> None:
    hidden = tmp_path / "no_mcp"
    hidden.mkdir()
    (hidden / "sitecustomize.py").write_text("import sys\nsys.modules['mcp'] = None\n")
    env = stdio_env | {"PYTHONPATH": os.pathsep.join([str(hidden), *sys.path])}
    done = subprocess.run(
        [str(CLI), "mcp"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2, done
    assert "pip install 'research-agent[mcp]'" in done.stderr
    assert done.stdout == ""  # stdout is the protocol's: nothing else goes there
