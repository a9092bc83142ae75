"""A loopback stand-in for an OpenAI-compatible chat server (POST /v1/chat/completions).

Point the real `langchain_openai.ChatOpenAI` (or `openai.AsyncOpenAI`) at it with
`base_url=llm.base_url`. Replies come from a queue (`script`), then from `responder`.
Token usage is deterministic: prompt tokens are the words of every request message's text,
completion tokens the words of the reply's content plus its tool calls' JSON arguments.
The server runs in another thread: tests read `calls` and the `reported_*` totals from theirs.
"""

import asyncio
import itertools
import json
import re
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import pytest
from pydantic import BaseModel
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .servers import serve

ARGUMENT_PIECE_CHARS = 8  # streamed tool-call arguments arrive in pieces this long
DISCONNECT_POLL_S = 0.02  # how often a delayed reply checks whether its client gave up

ERROR_KINDS: dict[int, tuple[str, str | None]] = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", "unsupported_country_region_territory"),
    404: ("invalid_request_error", "model_not_found"),
    429: ("requests", "rate_limit_exceeded"),
}


@dataclass
class ToolCall:
    """One function call in a reply; `args` as a dict, or a string sent verbatim (even bad JSON)."""

    name: str
    args: dict[str, Any] | str = field(default_factory=dict)
    id: str | None = None  # None: "call_<n>" with n its position in the reply

    @property
    def arguments(self) -> str:
        """The arguments as the wire carries them: a JSON string."""
        return self.args if isinstance(self.args, str) else json.dumps(self.args)


@dataclass
class Reply:
    """What the fake answers to one request."""

    content: str | None = None
    tool_calls: list[ToolCall] | None = None
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)  # sent with errors and answers alike
    error_body: dict[str, Any] | None = None  # None: the OpenAI error shape for `status`
    delay_s: float = 0.0
    chunk_delay_s: float = 0.0  # a stream that trickles: this long before each chunk
    malformed: bool = False  # 200 with a body (or stream chunk) that is not JSON
    usage: dict[str, Any] | None = None  # None: counted words (see the module docstring)
    finish: str | None = None  # a finish_reason to report ("length", "content_filter")

    @classmethod
    def json(cls, obj: Mapping[str, Any] | BaseModel, **fields: Any) -> "Reply":
        """A reply whose content is `obj` serialised to JSON (as structured output expects)."""
        text = obj.model_dump_json() if isinstance(obj, BaseModel) else json.dumps(dict(obj))
        return cls(content=text, **fields)

    @property
    def finish_reason(self) -> str:
        return self.finish or ("tool_calls" if self.tool_calls else "stop")

    def wire_tool_calls(self) -> list[dict[str, Any]]:
        return [
            {
                "id": tc.id or f"call_{i}",
                "type": "function",
                "function": {"name": tc.name, "arguments": tc.arguments},
            }
            for i, tc in enumerate(self.tool_calls or [])
        ]


@dataclass
class Call:
    """One request as the fake received it, with the fields a responder usually needs."""

    model: str
    messages: list[dict[str, Any]]
    system: str  # the system (and developer) messages' text, joined by newlines
    user: str  # the text of the last user message
    stream: bool
    tools: list[str]  # the names of the function tools offered
    schema_name: str | None  # response_format's json_schema name, or the forced tool's name
    schema: dict[str, Any] | None  # that JSON schema (the forced tool's parameters)
    headers: dict[str, str]  # lower-cased names
    body: dict[str, Any]

    @property
    def include_usage(self) -> bool:
        return bool(self.stream and (self.body.get("stream_options") or {}).get("include_usage"))

    @classmethod
    def parse(cls, body: dict[str, Any], headers: Mapping[str, str]) -> "Call":
        messages: list[dict[str, Any]] = list(body.get("messages") or [])
        functions = {
            tool["function"]["name"]: tool["function"]
            for tool in body.get("tools") or []
            if tool.get("type") == "function"
        }
        schema_name: str | None = None
        schema: dict[str, Any] | None = None
        response_format = body.get("response_format") or {}
        choice = body.get("tool_choice")
        if response_format.get("type") == "json_schema":
            schema_name = response_format["json_schema"].get("name")
            schema = response_format["json_schema"].get("schema")
        elif isinstance(choice, dict) and choice.get("type") == "function":
            schema_name = choice["function"]["name"]
            schema = functions.get(schema_name, {}).get("parameters")
        users = [m for m in messages if m.get("role") == "user"]
        system = "\n".join(
            message_text(m) for m in messages if m.get("role") in ("system", "developer")
        )
        if schema_name is None and (announced := _ANNOUNCED_SCHEMA.search(system)):
            schema_name = announced.group(1)  # JSON mode or the schema in the prompt
        return cls(
            model=str(body.get("model", "")),
            messages=messages,
            system=system,
            user=message_text(users[-1]) if users else "",
            stream=bool(body.get("stream")),
            tools=list(functions),
            schema_name=schema_name,
            schema=schema,
            headers={name.lower(): value for name, value in headers.items()},
            body=body,
        )


Responder = Callable[[Call], Reply]


def answered_as_asked(reply: Reply, call: Call, cap: int | None) -> Reply:
    """The reply as the server would send it: a forced tool called, the token cap kept.

    A server that forces a tool call constrains the model to it, so a scripted JSON answer
    becomes that call's arguments; an answer longer than the cap is cut off there.
    """
    if reply.status >= 400 or reply.malformed:
        return reply
    forced = call.body.get("tool_choice")
    if isinstance(forced, dict) and reply.content and not reply.tool_calls:
        name = forced["function"]["name"]
        reply = replace(reply, content=None, tool_calls=[ToolCall(name, reply.content)])
    if cap is not None and completion_tokens(reply) > cap and reply.content:
        reply = replace(reply, content=" ".join(reply.content.split()[:cap]), finish="length")
    return reply


def default_responder(call: Call) -> Reply:
    return Reply(content="ok")


def message_text(message: Mapping[str, Any]) -> str:
    """A message's text: string content as is, the text parts of list content joined by spaces."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(
            part.get("text", "")
            for part in content
            if isinstance(part, dict) and part.get("type") == "text"
        )
    return ""


def words(text: str) -> int:
    return len(text.split())


def prompt_tokens(messages: list[dict[str, Any]]) -> int:
    return sum(words(message_text(m)) for m in messages)


def completion_tokens(reply: Reply) -> int:
    return words(reply.content or "") + sum(words(tc.arguments) for tc in reply.tool_calls or [])


def pieces(text: str) -> list[str]:
    """Split into words that keep their trailing spaces: "a b  c" -> ["a ", "b  ", "c"]."""
    return [piece for piece in re.split(r"(?<=\s)(?=\S)", text) if piece]


def sse(data: Mapping[str, Any] | str) -> bytes:
    payload = data if isinstance(data, str) else json.dumps(data)
    return f"data: {payload}\n\n".encode()


@dataclass
class ServerQuirks:
    """How this server departs from OpenAI's, as real OpenAI-compatible servers do.

    The defaults are OpenAI's behaviour. llama-cpp-python 0.3: `refuses_json_schema`,
    `ignores_max_completion_tokens`, `no_stream_usage`; llama-server with a small model's
    chat template: `ignores_tool_choice`.
    """

    refuses_json_schema: bool = False  # HTTP 500 naming response_format, as llama-cpp-python
    refuses_json_object: bool = False  # the same for JSON mode
    ignores_tool_choice: bool = False  # a forced tool is dropped: the model answers in text
    ignores_max_completion_tokens: bool = False  # only `max_tokens` caps the answer
    no_stream_usage: bool = False  # streamed replies never carry usage


# What llama-cpp-python 0.3.36 answers to a json_schema response_format.
REFUSED_FORMAT = (
    "[{'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), "
    "'msg': \"Input should be 'text' or 'json_object'\", 'input': '{kind}'}]"
)
# The schema name the engine's prompt-side instructions announce ("... (a PlanOutput) ...").
_ANNOUNCED_SCHEMA = re.compile(r"one JSON object \(a (\w+)\)")


class FakeLLM:
    """An OpenAI-compatible /v1/chat/completions; replies are scripted or computed per call."""

    def __init__(self) -> None:
        self.base_url = ""  # set by the server fixture: "http://127.0.0.1:PORT/v1"
        self.calls: list[Call] = []
        self.quirks = ServerQuirks()
        self.responder: Responder = default_responder
        self.reported_prompt_tokens = 0
        self.reported_completion_tokens = 0
        self.reported_requests = 0
        self.abandoned = 0  # delayed replies whose client hung up before the delay ended
        self.refused = 0  # requests refused for their response_format (see ServerQuirks)
        self.responder_errors: list[Exception] = []  # what the responder raised (answered 500)
        self._queue: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._epoch = 0  # bumped by reset(): requests from before it no longer count
        self._ids = itertools.count(1)
        self.app = fake_llm_app(self)

    @property
    def reported_total_tokens(self) -> int:
        return self.reported_prompt_tokens + self.reported_completion_tokens

    def script(self, *replies: Reply) -> None:
        """Answer the next requests with these replies, in order (then the responder answers)."""
        with self._lock:
            self._queue.extend(replies)

    @property
    def pending(self) -> int:
        """How many scripted replies are still unused."""
        return len(self._queue)

    def reset(self) -> None:
        with self._lock:
            self._epoch += 1
            self._queue.clear()
            self.calls.clear()
            self.responder = default_responder
            self.quirks = ServerQuirks()
            self.reported_prompt_tokens = 0
            self.reported_completion_tokens = 0
            self.reported_requests = 0
            self.abandoned = 0
            self.refused = 0
            self.responder_errors.clear()

    def _take(self, call: Call) -> tuple[Reply, int]:
        with self._lock:
            self.calls.append(call)
            scripted = self._queue.popleft() if self._queue else None
            responder, epoch = self.responder, self._epoch
        if scripted is not None:
            return scripted, epoch
        try:
            return responder(call), epoch
        except Exception as exc:  # a bug in a test's responder: answer 500 and keep it
            with self._lock:
                self.responder_errors.append(exc)
            message = f"the fake's responder raised {exc!r}"
            return Reply(status=500, error_body=error_body(500, message)), epoch

    def cap(self, body: Mapping[str, Any]) -> int | None:
        """The answer's token cap as this server reads the request (None: uncapped)."""
        names: tuple[str, ...] = ("max_completion_tokens", "max_tokens")
        if self.quirks.ignores_max_completion_tokens:
            names = ("max_tokens",)
        return next((int(body[n]) for n in names if body.get(n) is not None), None)

    def _report(self, epoch: int, usage: Mapping[str, Any]) -> None:
        with self._lock:
            if epoch != self._epoch:
                return
            self.reported_prompt_tokens += int(usage["prompt_tokens"])
            self.reported_completion_tokens += int(usage["completion_tokens"])
            self.reported_requests += 1

    async def chat_completions(self, request: Request) -> Response:
        try:
            body = await request.json()
        except ValueError:
            return error_response(Reply(status=400), "request body is not JSON")
        if not isinstance(body, dict):
            return error_response(Reply(status=400), "request body is not a JSON object")
        quirks = self.quirks
        kind = (body.get("response_format") or {}).get("type")
        if (kind == "json_schema" and quirks.refuses_json_schema) or (
            kind == "json_object" and quirks.refuses_json_object
        ):
            with self._lock:
                self.refused += 1
                self.calls.append(Call.parse(body, request.headers))
            return error_response(Reply(status=500), REFUSED_FORMAT.replace("{kind}", kind))
        if quirks.ignores_tool_choice:  # the tools stay offered; the model need not call one
            body = {k: v for k, v in body.items() if k != "tool_choice"}
        call = Call.parse(body, request.headers)
        problem = strict_schema_problem(body)
        if problem is not None:  # as OpenAI does, before any answer is scripted
            return error_response(Reply(status=400), problem)
        reply, epoch = self._take(call)
        reply = answered_as_asked(reply, call, self.cap(body))
        if reply.delay_s > 0 and not await wait_unless_disconnected(request, reply.delay_s):
            with self._lock:
                self.abandoned += epoch == self._epoch
            return Response(status_code=499)  # nobody is listening any more
        if reply.status >= 400:
            return error_response(reply)
        completion_id = f"chatcmpl-fake{next(self._ids)}"
        if reply.malformed:
            if call.stream:
                return StreamingResponse(
                    malformed_chunks(completion_id, call),
                    media_type="text/event-stream",
                    headers=reply.headers,
                )
            return PlainTextResponse(
                f'{{"id": "{completion_id}", "choices": [{{"message": ',
                media_type="application/json",
                headers=reply.headers,
            )
        usage = usage_of(call, reply)
        self._report(epoch, usage)
        if call.stream:
            return StreamingResponse(
                chunks(completion_id, call, reply, None if quirks.no_stream_usage else usage),
                media_type="text/event-stream",
                headers=reply.headers,
            )
        return JSONResponse(completion(completion_id, call, reply, usage), headers=reply.headers)


# Keywords OpenAI's strict structured-output mode refuses (a conservative subset).
STRICT_REFUSED = ("minLength", "maxLength", "default")


def strict_schema_problem(body: Mapping[str, Any]) -> str | None:
    """Why OpenAI would refuse this request's strict JSON schema, or None.

    Strict mode wants every object closed (`additionalProperties: false`) with every
    property required, and refuses some keywords; a schema that breaks these gets a 400.
    """
    response_format = body.get("response_format") or {}
    spec = response_format.get("json_schema") if isinstance(response_format, dict) else None
    if not isinstance(spec, dict) or not spec.get("strict"):
        return None
    name = spec.get("name", "?")

    def check(node: Any, where: str) -> str | None:
        if isinstance(node, list):
            return next((p for i, n in enumerate(node) if (p := check(n, f"{where}[{i}]"))), None)
        if not isinstance(node, dict):
            return None
        for keyword in STRICT_REFUSED:
            if keyword in node and where.rsplit(".", 1)[-1] != "properties":
                return f"Invalid schema for response_format '{name}': '{keyword}' is not permitted ({where})."
        properties = node.get("properties")
        if node.get("type") == "object" and isinstance(properties, dict):
            if node.get("additionalProperties") is not False:
                return f"Invalid schema for response_format '{name}': 'additionalProperties' must be false ({where})."
            if set(node.get("required") or []) != set(properties):
                return f"Invalid schema for response_format '{name}': every property must be required ({where})."
        return next(
            (p for key, value in node.items() if (p := check(value, f"{where}.{key}"))), None
        )

    return check(spec.get("schema"), "schema")


def fake_llm_app(fake: FakeLLM) -> Starlette:
    """The fake's routes, with every response closing its connection (see `CloseConnections`)."""
    routes = [Route("/v1/chat/completions", fake.chat_completions, methods=["POST"])]
    return Starlette(routes=routes, middleware=[Middleware(CloseConnections)])


class CloseConnections:
    """Add `Connection: close` to every response, so no client keeps a pooled connection.

    ChatOpenAI shares one cached httpx client per (base_url, timeout) across instances; with a
    fresh event loop per test, a kept-alive connection from an earlier test's (closed) loop
    fails the next request with "RuntimeError: Event loop is closed".
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def send_closing(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [(k, v) for k, v in message.get("headers", []) if k != b"connection"]
                message = {**message, "headers": [*headers, (b"connection", b"close")]}
            await send(message)

        await self.app(scope, receive, send_closing)


async def wait_unless_disconnected(request: Request, delay_s: float) -> bool:
    """Sleep `delay_s`; False as soon as the client hangs up (so no stale reply is counted)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + delay_s
    while (left := deadline - loop.time()) > 0:
        await asyncio.sleep(min(left, DISCONNECT_POLL_S))
        if await request.is_disconnected():
            return False
    return True


def usage_of(call: Call, reply: Reply) -> dict[str, Any]:
    if reply.usage is not None:
        usage = dict(reply.usage)
        usage.setdefault("total_tokens", usage["prompt_tokens"] + usage["completion_tokens"])
        return usage
    prompt, completion_ = prompt_tokens(call.messages), completion_tokens(reply)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion_,
        "total_tokens": prompt + completion_,
    }


def error_body(status: int, message: str | None = None) -> dict[str, Any]:
    """The OpenAI error shape for `status`."""
    kind, code = ERROR_KINDS.get(status, ("server_error", None))
    message = message or f"injected {status}"
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def error_response(reply: Reply, message: str | None = None) -> Response:
    body = reply.error_body or error_body(reply.status, message)
    return JSONResponse(body, status_code=reply.status, headers=reply.headers)


def completion(
    completion_id: str, call: Call, reply: Reply, usage: dict[str, Any]
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.content, "refusal": None}
    if reply.tool_calls:
        message["tool_calls"] = reply.wire_tool_calls()
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": call.model,
        "system_fingerprint": "fp_fake",
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": reply.finish_reason,
            }
        ],
        "usage": usage,
    }


def chunk(
    completion_id: str,
    call: Call,
    choices: list[dict[str, Any]],
    usage: dict[str, Any] | None = None,
) -> dict[str, Any]:
    data: dict[str, Any] = {
        "id": completion_id,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": call.model,
        "system_fingerprint": "fp_fake",
        "choices": choices,
    }
    if call.include_usage:
        data["usage"] = usage  # null on all but the last chunk, as OpenAI does
    return data


def deltas(reply: Reply) -> Iterator[dict[str, Any]]:
    yield {"role": "assistant", "content": "", "refusal": None}
    for piece in pieces(reply.content or ""):
        yield {"content": piece}
    for index, wire in enumerate(reply.wire_tool_calls()):
        function = wire["function"]
        yield {
            "tool_calls": [
                {
                    "index": index,
                    "id": wire["id"],
                    "type": "function",
                    "function": {"name": function["name"], "arguments": ""},
                }
            ]
        }
        arguments = function["arguments"]
        for start in range(0, len(arguments), ARGUMENT_PIECE_CHARS):
            piece = arguments[start : start + ARGUMENT_PIECE_CHARS]
            yield {"tool_calls": [{"index": index, "function": {"arguments": piece}}]}


async def chunks(
    completion_id: str, call: Call, reply: Reply, usage: dict[str, Any] | None
) -> AsyncIterator[bytes]:
    """The reply as OpenAI streams it; `usage` None: a server that never sends usage."""
    for delta in deltas(reply):
        if reply.chunk_delay_s:
            await asyncio.sleep(reply.chunk_delay_s)
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": None}
        yield sse(chunk(completion_id, call, [choice]))
    final = {"index": 0, "delta": {}, "logprobs": None, "finish_reason": reply.finish_reason}
    yield sse(chunk(completion_id, call, [final]))
    if call.include_usage and usage is not None:
        yield sse(chunk(completion_id, call, [], usage))
    yield sse("[DONE]")


async def malformed_chunks(completion_id: str, call: Call) -> AsyncIterator[bytes]:
    """A good first chunk, then one cut off mid-object."""
    role = {"role": "assistant", "content": ""}
    yield sse(chunk(completion_id, call, [{"index": 0, "delta": role, "finish_reason": None}]))
    yield sse(f'{{"id": "{completion_id}", "object": "chat.completion.chunk", "choices": [')
    yield sse("[DONE]")


# Named through `name=` so that importing them (into conftest.py) binds no `llm` that a test's
# `llm` parameter would shadow (ruff F811).
@pytest.fixture(scope="session", name="llm_server")
def llm_server_fixture() -> Iterator[FakeLLM]:
    """One fake chat server for the session."""
    fake = FakeLLM()
    with serve(fake.app) as url:
        fake.base_url = f"{url}/v1"
        yield fake


@pytest.fixture(name="llm")
def llm_fixture(llm_server: FakeLLM) -> FakeLLM:
    """The session's fake, reset: empty script, no calls, zero totals, default responder."""
    llm_server.reset()
    return llm_server
