"""Property-based: schemathesis over the live service's /openapi.json.

A real uvicorn server on loopback (as in test_api.py) serves the app; schemathesis loads
the OpenAPI document the server publishes and, for every documented operation, sends a
bounded, derandomized number of generated requests over HTTP. No answer may be a 5xx, and
every answer must match what the document promises (status code, body schema, media
type, headers); valid data must be accepted and invalid data (negative generation) refused.
"""

import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import hypothesis
import jsonschema_rs
import pytest
import requests
import schemathesis
from hypothesis.configuration import set_hypothesis_home_dir
from schemathesis import GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    negative_data_rejection,
    not_a_server_error,
    positive_data_acceptance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from app.api import create_app
from app.settings import Settings

from .servers import serve_port

# Per operation and generation mode; FUZZ_EXAMPLES=500 for a longer search by hand.
MAX_EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "50"))
# A backstop against a stream that never ends: shorter than the SSE heartbeat (15 s), so a
# GET .../events that streams instead of answering fails within seconds instead of hanging.
TIMEOUT_S = 10
FUZZ = hypothesis.settings(
    max_examples=MAX_EXAMPLES,
    derandomize=True,  # the same cases on every run
    database=None,  # nothing written to .hypothesis/ in the work tree
    deadline=None,  # an HTTP round trip has no stable duration
)
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    response_schema_conformance,
    content_type_conformance,
    response_headers_conformance,
]
ACTIVE = {"queued", "running"}


def _plain_string(schema: dict[str, Any]) -> bool:
    options = schema.get("anyOf", [schema])
    return all(
        option.get("type") in ("string", "null")
        and not set(option) - {"type", "title", "description"}
        for option in options
    )


def _has_invalid_inputs(operation: dict[str, Any]) -> bool:
    """Whether negative generation can produce anything for this operation.

    Any text is a valid path segment, header or unconstrained query value: an operation
    whose only inputs are plain strings has no invalid request, and schemathesis would
    filter out every negative case.
    """
    if "requestBody" in operation:
        return True
    return any(not _plain_string(p["schema"]) for p in operation.get("parameters", []))


def _documented_operations() -> list[Any]:
    """(method, path, mode) for every operation of the app's OpenAPI document.

    Read from the app object (no server, no files) to name the tests at collection time;
    each test then fuzzes the operation as published by the live server.
    """
    document = create_app(Settings(data_dir=Path("unused"), search_provider="local")).openapi()
    params = []
    for path, item in document["paths"].items():
        for method, operation in item.items():
            modes = [GenerationMode.POSITIVE]
            if _has_invalid_inputs(operation):
                modes.append(GenerationMode.NEGATIVE)
            for mode in modes:
                label = f"{method.upper()} {path} {mode.value}"
                params.append(pytest.param(method.upper(), path, mode, id=label))
    return params


def _is_started_run(response: schemathesis.Response) -> bool:
    """Whether the answer is a Platform run that has not ended yet."""
    if not response.headers.get("content-type", [""])[0].startswith("application/json"):
        return False
    body = response.json()
    return isinstance(body, dict) and "run_id" in body and body.get("status") == "pending"


@dataclass
class Live:
    """The running service: its base URL and the schema it publishes."""

    base_url: str
    schema: Any

    def threads(self) -> list[dict[str, Any]]:
        """Every thread the server knows, following the cursor through all pages."""
        items: list[dict[str, Any]] = []
        params: dict[str, Any] = {"limit": 100}
        while True:
            page = requests.get(f"{self.base_url}/v1/research", params=params, timeout=TIMEOUT_S)
            assert page.status_code == 200, page.text
            body = page.json()
            items += body["items"]
            if body["next_cursor"] is None:
                return items
            params["cursor"] = body["next_cursor"]

    def stop_run(self, response: schemathesis.Response) -> None:
        """Cancel the run a 202 started, so no run works while the next case is drawn.

        The runs are in this process (the server is a thread): LangGraph's checkpointer
        draws from the global `random` module, and a run doing so while Hypothesis draws a
        case in the test's thread trips Hypothesis' "random module inside strategies"
        guard (a HypothesisDeprecationWarning, an error under filterwarnings=error).
        Cancelling also keeps every SSE stream finite: a cancelled thread's stream ends
        with its "done" event.
        """
        if response.status_code == 200 and _is_started_run(response):
            # A Platform run in the background: wait for its end (it pauses for approval
            # at most), as its own client would with `join`.
            run = response.json()
            joined = requests.get(
                f"{self.base_url}/threads/{run['thread_id']}/runs/{run['run_id']}/join",
                timeout=TIMEOUT_S,
            )
            assert joined.status_code == 200, joined.text
            return
        if response.status_code != 202:
            return
        thread_id = response.json()["thread_id"]
        answer = requests.post(f"{self.base_url}/v1/research/{thread_id}/cancel", timeout=TIMEOUT_S)
        # 409: the run on the tiny corpus had already completed.
        assert answer.status_code in (200, 409), answer.text


@pytest.fixture(scope="module", autouse=True)
def hypothesis_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Hypothesis' caches (local constants, Unicode tables) in a temporary folder.

    Even with no example database, Hypothesis writes them to .hypothesis/ under the
    working directory; afterwards, None sends it back to its default.
    """
    set_hypothesis_home_dir(tmp_path_factory.mktemp("hypothesis"))
    yield
    set_hypothesis_home_dir(None)


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory, corpus_index: Path) -> Iterator[Live]:
    settings = Settings(
        data_dir=tmp_path_factory.mktemp("fuzz") / "data",
        corpus_index=corpus_index,
        search_provider="local",
        api_keys=[],  # no key from the environment: the fuzzer sends none
    )
    # Whatever the server logs with a traceback (uvicorn's "Exception in ASGI application",
    # a run that crashed) fails the module: a handled case answers without one.
    tracebacks = _Tracebacks()
    logging.getLogger().addHandler(tracebacks)
    # One connection per request, no shared requests.Session: on a kept-alive connection
    # every request waited ~40 ms (delayed ACK), which made the module 4x slower.
    try:
        with serve_port(create_app(settings), lifespan="on") as port:
            base_url = f"http://127.0.0.1:{port}"
            schema = schemathesis.openapi.from_url(f"{base_url}/openapi.json", timeout=TIMEOUT_S)
            service = Live(base_url, schema)
            yield service
            leaked = [t for t in service.threads() if t["status"] in ACTIVE]
            assert not leaked, f"runs still active after the fuzzing: {leaked}"
    finally:
        logging.getLogger().removeHandler(tracebacks)
    assert not tracebacks.seen, "the server logged tracebacks:\n" + "\n".join(tracebacks.seen)


class _Tracebacks(logging.Handler):
    """Keeps the first lines of every record logged with an exception."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.seen: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info:
            self.seen.append(f"{record.name}: {record.getMessage()[:300]} ({record.exc_info[1]!r})")


def _negative_data_refused(
    ctx: Any, response: schemathesis.Response, case: schemathesis.Case
) -> bool | None:
    """`negative_data_rejection`, a 413 counted as a refusal too.

    A body past the size cap (an over-long string drawn for a field with a maxLength) is
    refused before it is parsed: 413 `payload_too_large`, documented for every route.
    """
    if response.status_code == 413:
        return None
    result: bool | None = negative_data_rejection(ctx, response, case)
    return result


@pytest.mark.parametrize(("method", "path", "mode"), _documented_operations())
def test_generated_requests_get_no_5xx_and_documented_answers(
    live: Live, method: str, path: str, mode: GenerationMode
) -> None:
    operation = live.schema[path][method]
    extra = _negative_data_refused if mode is GenerationMode.NEGATIVE else positive_data_acceptance
    checks = [*CHECKS, extra]

    @hypothesis.given(case=operation.as_strategy(mode))
    @FUZZ
    def fuzz(case: schemathesis.Case) -> None:
        response = case.call_and_validate(checks=checks, timeout=TIMEOUT_S)
        live.stop_run(response)

    fuzz()


# -- the rules the schema states are the rules the server applies ----------------------


def test_error_answers_are_documented(live: Live) -> None:
    case = live.schema["/v1/research/{thread_id}"]["GET"].Case(
        path_parameters={"thread_id": "no-such-thread"}
    )
    case.call_and_validate(checks=[status_code_conformance], timeout=TIMEOUT_S)


def _schema_allows(live: Live, path: str, body: Any) -> bool:
    """Whether the published request-body schema of POST `path` accepts `body`."""
    document = live.schema.raw_schema
    content = document["paths"][path]["post"]["requestBody"]["content"]
    schema = {"components": document["components"], **content["application/json"]["schema"]}
    return bool(jsonschema_rs.Draft202012Validator(schema).is_valid(body))


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/research/{thread_id}/resume", {"decision": "edit"}),
        ("/v1/research/{thread_id}/resume", {"decision": "reject"}),
        ("/v1/research/{thread_id}/resume", {"decision": "reject", "feedback": "  "}),
        ("/v1/research", {"topic": " "}),
    ],
    ids=["edit-without-payload", "reject-without-feedback", "blank-feedback", "blank-topic"],
)
def test_bodies_the_server_refuses_are_refused_by_the_schema_too(
    live: Live, path: str, body: Any
) -> None:
    params = {"thread_id": "no-such-thread"} if "{thread_id}" in path else {}
    case = live.schema[path]["POST"].Case(path_parameters=params, body=body)
    response = case.call(timeout=TIMEOUT_S)
    live.stop_run(response)
    assert response.status_code == 422, response.text
    assert not _schema_allows(live, path, body), "the published schema must say so too"


def test_the_platform_routes_are_published_with_their_shapes() -> None:
    document = create_app(Settings(data_dir=Path("unused"), search_provider="local")).openapi()
    paths = document["paths"]
    for path in (
        "/threads",
        "/threads/{thread_id}/runs/stream",
        "/runs/wait",
        "/assistants/search",
    ):
        assert path in paths, path
    thread = paths["/threads/{thread_id}"]["get"]["responses"]
    assert thread["200"]["content"]["application/json"]["schema"]["$ref"].endswith("/Thread")
    assert thread["404"]["content"]["application/json"]["schema"]["$ref"].endswith("/PlatformError")
    streamed = paths["/threads/{thread_id}/runs/stream"]["post"]["responses"]["200"]
    assert "text/event-stream" in streamed["content"]
    create = document["components"]["schemas"]["ThreadCreate"]["properties"]["thread_id"]
    assert create["pattern"].startswith("^[A-Za-z0-9]")
