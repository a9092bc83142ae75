"""The fake chat server speaks the protocol as the real ChatOpenAI / openai clients parse it."""

import asyncio
import json
from typing import Annotated, Any

import openai
import pytest
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage, SystemMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from pydantic import BaseModel, StringConstraints, ValidationError

from .fake_llm import Call, FakeLLM, Reply, ToolCall

MODEL = "gpt-4o-mini"


class Person(BaseModel):
    """A person mentioned in the text."""

    name: str
    age: int


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def chat(fake: FakeLLM, **options: Any) -> ChatOpenAI:
    settings: dict[str, Any] = {"max_retries": 0, "timeout": 2.0} | options
    return ChatOpenAI(model=MODEL, base_url=fake.base_url, api_key="sk-test", **settings)


def reported(fake: FakeLLM) -> dict[str, int]:
    return {
        "input_tokens": fake.reported_prompt_tokens,
        "output_tokens": fake.reported_completion_tokens,
        "total_tokens": fake.reported_prompt_tokens + fake.reported_completion_tokens,
    }


def usage_counts(message: AIMessage) -> dict[str, int]:
    usage = message.usage_metadata
    assert usage is not None
    return {
        "input_tokens": usage["input_tokens"],
        "output_tokens": usage["output_tokens"],
        "total_tokens": usage["total_tokens"],
    }


async def test_invoke_returns_scripted_content_and_reported_usage(llm: FakeLLM) -> None:
    llm.script(Reply(content="General Kenobi, you are a bold one"))

    response = await chat(llm).ainvoke("hi there")

    assert response.content == "General Kenobi, you are a bold one"
    assert response.response_metadata["finish_reason"] == "stop"
    assert response.response_metadata["model_name"] == MODEL
    assert (llm.reported_prompt_tokens, llm.reported_completion_tokens) == (2, 7)
    assert llm.reported_requests == 1
    assert usage_counts(response) == reported(llm)
    [call] = llm.calls
    assert call.headers["authorization"] == "Bearer sk-test"
    assert call.model == MODEL and call.stream is False and call.user == "hi there"


async def test_stream_yields_several_chunks_and_the_usage(llm: FakeLLM) -> None:
    text = "The printing press  spread fast.\nVery fast."
    llm.script(Reply(content=text))

    parts: list[AIMessageChunk] = []
    async for part in chat(llm, stream_usage=True).astream("tell me about presses"):
        parts.append(part)

    contents = [part.content for part in parts if part.content]
    assert len(contents) == 7
    assert "".join(str(c) for c in contents) == text
    total = parts[0]
    for part in parts[1:]:
        total = total + part
    assert total.content == text
    assert (
        usage_counts(total)
        == reported(llm)
        == {
            "input_tokens": 4,
            "output_tokens": 7,
            "total_tokens": 11,
        }
    )
    assert llm.calls[-1].stream and llm.calls[-1].body["stream_options"] == {"include_usage": True}


async def test_stream_without_usage_sends_no_usage_chunk(llm: FakeLLM) -> None:
    llm.script(Reply(content="a b c"))

    parts = [part async for part in chat(llm, stream_usage=False).astream("x")]

    assert all(part.usage_metadata is None for part in parts)
    assert "stream_options" not in llm.calls[-1].body
    assert llm.reported_requests == 1  # the server still counts what it would have billed


async def test_structured_output_json_schema(llm: FakeLLM) -> None:
    llm.script(Reply.json(Person(name="Ada", age=36)))
    structured = chat(llm).with_structured_output(Person, method="json_schema", include_raw=True)

    result = await structured.ainvoke("who?")

    assert result["parsed"] == Person(name="Ada", age=36)
    assert result["parsing_error"] is None
    call = llm.calls[-1]
    assert call.schema_name == "Person"
    assert call.schema is not None and set(call.schema["properties"]) == {"name", "age"}
    assert call.body["response_format"]["type"] == "json_schema"
    assert call.body["response_format"]["json_schema"]["strict"] is True
    assert "tools" not in call.body and call.stream is False
    assert usage_counts(result["raw"]) == reported(llm)


async def test_streamed_json_schema_output_warns_in_langchain_openai(llm: FakeLLM) -> None:
    # Streaming structured output goes through the SDK's beta.chat.completions.stream; ChatOpenAI
    # model_dump()s its events, whose `parsed` field the SDK types as None: pydantic warns, and
    # under filterwarnings=error that warning aborts the stream. (Non-streamed calls are fine.)
    llm.script(Reply.json({"name": "Ada", "age": 36}))
    structured = chat(llm).with_structured_output(Person, method="json_schema")

    with pytest.warns(UserWarning, match="PydanticSerializationUnexpectedValue"):
        parts = [part async for part in structured.astream("who?")]

    assert parts == [Person(name="Ada", age=36)]
    assert llm.calls[-1].stream and llm.calls[-1].schema_name == "Person"


async def test_structured_output_json_schema_bad_json_escapes_include_raw(llm: FakeLLM) -> None:
    # The openai SDK's own `chat.completions.parse` validates the content against the pydantic
    # class inside the client call, so include_raw=True does not turn this into parsing_error.
    llm.script(Reply(content="not json at all"))
    structured = chat(llm).with_structured_output(Person, method="json_schema", include_raw=True)

    with pytest.raises(ValidationError, match="Invalid JSON"):
        await structured.ainvoke("who?")

    assert llm.reported_requests == 1  # the server answered; the client threw it away


async def test_structured_output_function_calling(llm: FakeLLM) -> None:
    llm.script(Reply(tool_calls=[ToolCall("Person", {"name": "Grace", "age": 85})]))
    structured = chat(llm).with_structured_output(
        Person, method="function_calling", include_raw=True
    )

    result = await structured.ainvoke("who?")

    assert result["parsed"] == Person(name="Grace", age=85)
    call = llm.calls[-1]
    assert call.schema_name == "Person" and call.tools == ["Person"]
    assert call.body["tool_choice"] == {"type": "function", "function": {"name": "Person"}}
    assert call.body["parallel_tool_calls"] is False
    assert call.schema is not None and call.schema["required"] == ["name", "age"]


async def test_bind_tools_gets_parsed_tool_calls(llm: FakeLLM) -> None:
    llm.script(Reply(tool_calls=[ToolCall("add", {"a": 2, "b": 3}, id="call_add")]))

    response = await chat(llm).bind_tools([add]).ainvoke("2+3?")

    assert isinstance(response, AIMessage)
    assert response.tool_calls == [
        {"name": "add", "args": {"a": 2, "b": 3}, "id": "call_add", "type": "tool_call"}
    ]
    assert response.response_metadata["finish_reason"] == "tool_calls"
    assert llm.calls[-1].tools == ["add"] and llm.calls[-1].schema_name is None
    # content None counts 0 words; the arguments '{"a": 2, "b": 3}' count 4
    assert llm.reported_completion_tokens == 4
    assert usage_counts(response) == reported(llm)


async def test_streamed_tool_calls_reassemble(llm: FakeLLM) -> None:
    args = {"a": 12345678, "b": 87654321}
    llm.script(Reply(content="Adding now.", tool_calls=[ToolCall("add", args)]))

    total: AIMessageChunk | None = None
    count = 0
    async for part in chat(llm, stream_usage=True).bind_tools([add]).astream("add"):
        assert isinstance(part, AIMessageChunk)
        total = part if total is None else total + part
        count += 1

    assert total is not None and count > 5
    assert total.content == "Adding now."
    assert total.tool_calls == [{"name": "add", "args": args, "id": "call_0", "type": "tool_call"}]
    assert usage_counts(total) == reported(llm)


async def test_tool_round_trip_counts_every_message(llm: FakeLLM) -> None:
    llm.script(Reply(content="five"))
    messages: list[Any] = [
        SystemMessage("be brief"),
        HumanMessage(content=[{"type": "text", "text": "add two and three"}]),
        AIMessage(content="", tool_calls=[{"name": "add", "args": {"a": 2, "b": 3}, "id": "c1"}]),
        {"role": "tool", "content": "5", "tool_call_id": "c1"},
    ]

    response = await chat(llm).bind_tools([add]).ainvoke(messages)

    call = llm.calls[-1]
    assert call.system == "be brief" and call.user == "add two and three"
    assert [m["role"] for m in call.messages] == ["system", "user", "assistant", "tool"]
    assert response.usage_metadata is not None
    assert response.usage_metadata["input_tokens"] == llm.reported_prompt_tokens == 2 + 4 + 1


async def test_explicit_usage_is_reported_as_given(llm: FakeLLM) -> None:
    usage = {"prompt_tokens": 1000, "completion_tokens": 20}
    llm.script(Reply(content="x", usage=usage), Reply(content="y", usage=usage))

    first = await chat(llm).ainvoke("a")
    second = await chat(llm).ainvoke("b")

    assert usage_counts(first) == usage_counts(second)
    assert (llm.reported_prompt_tokens, llm.reported_completion_tokens) == (2000, 40)
    assert llm.reported_requests == 2


async def test_rate_limit_carries_retry_after(llm: FakeLLM) -> None:
    llm.script(Reply(status=429, headers={"Retry-After": "1"}))

    with pytest.raises(openai.RateLimitError) as caught:
        await chat(llm).ainvoke("hi")

    assert caught.value.response.headers["retry-after"] == "1"
    assert caught.value.code == "rate_limit_exceeded"
    assert caught.value.status_code == 429
    assert llm.reported_requests == 0 and len(llm.calls) == 1


@pytest.mark.parametrize(
    ("status", "error"),
    [
        (500, openai.InternalServerError),
        (401, openai.AuthenticationError),
        (400, openai.BadRequestError),
        (404, openai.NotFoundError),
    ],
)
async def test_error_statuses_raise_the_sdk_errors(
    llm: FakeLLM, status: int, error: type[openai.APIStatusError]
) -> None:
    llm.script(Reply(status=status))

    with pytest.raises(error) as caught:
        await chat(llm).ainvoke("hi")

    assert caught.value.status_code == status
    assert caught.value.message.endswith(f"injected {status}")
    assert llm.reported_requests == 0


async def test_custom_error_body(llm: FakeLLM) -> None:
    body = {"error": {"message": "quota gone", "type": "insufficient_quota", "code": "q"}}
    llm.script(Reply(status=429, error_body=body))

    with pytest.raises(openai.RateLimitError) as caught:
        await chat(llm).ainvoke("hi")

    assert caught.value.body == body["error"] and caught.value.type == "insufficient_quota"


async def test_errors_are_retried_by_the_client(llm: FakeLLM) -> None:
    llm.script(Reply(status=500, headers={"retry-after-ms": "10"}), Reply(content="second try"))

    response = await chat(llm, max_retries=1).ainvoke("hi")

    assert response.content == "second try"
    assert len(llm.calls) == 2 and llm.reported_requests == 1


async def test_malformed_body_breaks_the_client(llm: FakeLLM) -> None:
    # ChatOpenAI reads the raw response (with_raw_response), whose .parse() calls
    # response.json(): the decoder error escapes as is, not wrapped in an openai.APIError.
    llm.script(Reply(malformed=True))

    with pytest.raises(json.JSONDecodeError):
        await chat(llm).ainvoke("hi")

    assert llm.reported_requests == 0


async def test_malformed_stream_chunk_breaks_the_client(llm: FakeLLM) -> None:
    llm.script(Reply(malformed=True))

    with pytest.raises(json.JSONDecodeError):
        async for _ in chat(llm).astream("hi"):
            pass

    assert llm.reported_requests == 0


async def test_slow_reply_times_out(llm: FakeLLM) -> None:
    llm.script(Reply(content="too late", delay_s=2))

    with pytest.raises(openai.APITimeoutError):
        await chat(llm, timeout=0.2).ainvoke("hi")

    for _ in range(100):  # the server notices the hang-up within a poll or two
        if llm.abandoned:
            break
        await asyncio.sleep(0.01)
    assert llm.abandoned == 1 and llm.reported_requests == 0


async def test_responder_sees_schema_tools_and_user(llm: FakeLLM) -> None:
    seen: list[Call] = []

    def respond(call: Call) -> Reply:
        seen.append(call)
        if call.schema_name == "Person":
            return Reply.json({"name": call.user.upper(), "age": 1})
        if "add" in call.tools:
            return Reply(tool_calls=[ToolCall("add", {"a": 1, "b": len(call.user)})])
        return Reply(content=f"echo: {call.system} / {call.user}")

    llm.responder = respond
    model = chat(llm)

    person = await model.with_structured_output(Person, method="json_schema").ainvoke("ada")
    tools = await model.bind_tools([add]).ainvoke("four")
    plain = await model.ainvoke([SystemMessage("sys"), HumanMessage("first"), HumanMessage("last")])

    assert person == Person(name="ADA", age=1)
    assert isinstance(tools, AIMessage) and tools.tool_calls[0]["args"] == {"a": 1, "b": 4}
    assert plain.content == "echo: sys / last"
    assert [(c.schema_name, c.tools, c.user) for c in seen] == [
        ("Person", [], "ada"),
        (None, ["add"], "four"),
        (None, [], "last"),
    ]
    assert llm.reported_requests == 3


async def test_script_runs_before_responder_and_reset_restores_default(llm: FakeLLM) -> None:
    llm.responder = lambda call: Reply(content="from responder")
    llm.script(Reply(content="scripted"))
    model = chat(llm)

    assert (await model.ainvoke("1")).content == "scripted"
    assert (await model.ainvoke("2")).content == "from responder"
    assert llm.pending == 0

    llm.script(Reply(content="left over"))
    llm.reset()

    assert (await model.ainvoke("3")).content == "ok"
    assert len(llm.calls) == 1 and llm.reported_requests == 1


async def test_a_failing_responder_answers_500_and_is_kept(llm: FakeLLM) -> None:
    def respond(call: Call) -> Reply:
        raise LookupError(f"no answer for {call.user!r}")

    llm.responder = respond

    with pytest.raises(openai.InternalServerError, match="no answer for 'hi'"):
        await chat(llm).ainvoke("hi")

    assert [type(e) for e in llm.responder_errors] == [LookupError]
    assert llm.reported_requests == 0


async def test_a_strict_schema_openai_would_refuse_gets_a_400(llm: FakeLLM) -> None:
    class Loose(BaseModel):
        name: Annotated[str, StringConstraints(min_length=1)]
        note: str = ""

    model = ChatOpenAI(model="gpt-4o-mini", base_url=llm.base_url, api_key="sk-test", max_retries=0)
    # LangChain recognises OpenAI's message and warns, then the 400 itself is raised.
    with (
        pytest.warns(UserWarning, match="Invalid schema for OpenAI's structured output"),
        pytest.raises(openai.BadRequestError, match="is not permitted"),
    ):
        await model.with_structured_output(Loose, method="json_schema").ainvoke("hi")
    assert llm.reported_requests == 0
