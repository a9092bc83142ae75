"""Structured answers from any chat model: the four ways to ask for one, and how to read each.

Servers differ in what they honour, so "auto" tries them in `AUTO_ORDER` and keeps the first
a server accepts. Answers are read from the raw message, so a misfit still counts its tokens.
"""

import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

import openai
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from langchain_core.runnables import Runnable
from pydantic import BaseModel

S = TypeVar("S", bound=BaseModel)
Method = Literal["json_schema", "function_calling", "json_mode", "prompt"]
# OpenAI and llama-server fill a JSON schema; vLLM and most hosted APIs force a tool call;
# llama-cpp-python knows only JSON mode; any model can be asked in the prompt.
AUTO_ORDER: tuple[Method, ...] = ("json_schema", "function_calling", "json_mode", "prompt")
# Only OpenAI's wire protocol has `response_format`; other providers get tools, then the prompt.
OTHER_PROVIDERS_ORDER: tuple[Method, ...] = ("function_calling", "prompt")
# What a server's refusal of a way of asking names (llama-cpp-python: "response_format.type:
# Input should be 'text' or 'json_object'"; vLLM: "tool_choice ... not supported").
_REFUSAL_WORDS = re.compile(
    r"response_format|json_schema|json_object|schema|tool|function|grammar|'text'",
    re.IGNORECASE,
)
_REFUSAL_STATUS = frozenset({400, 422, 500, 501})
_FENCE = re.compile(r"^```[a-zA-Z]*\s*|\s*```$")


class MethodRefused(Exception):
    """The server refused (or ignored) this way of asking: the next one is tried."""

    def __init__(self, method: Method, why: str) -> None:
        super().__init__(f"{method}: {why}")
        self.method = method
        self.why = why


class UnusableAnswer(ValueError):
    """The answer cannot be read as the schema: what the repair round tells the model."""


def function_spec(schema: type[BaseModel]) -> dict[str, Any]:
    """Return the schema as OpenAI's strict function spec (closed objects, all fields required)."""
    return dict(openai.pydantic_function_tool(schema)["function"])


def bind(model: BaseChatModel, schema: type[BaseModel], method: Method) -> Runnable[Any, Any]:
    """Return `model` asking for `schema` by `method`; it answers with the raw AIMessage."""
    if method == "json_schema":
        spec = function_spec(schema)
        wanted = {"name": spec["name"], "schema": spec["parameters"], "strict": True}
        return model.bind(response_format={"type": "json_schema", "json_schema": wanted})
    if method == "function_calling":
        return model.bind_tools([schema], tool_choice=schema.__name__)
    if method == "json_mode":
        return model.bind(response_format={"type": "json_object"})
    return model


def with_instructions(
    messages: list[BaseMessage], schema: type[BaseModel], method: Method
) -> list[BaseMessage]:
    """Spell the schema out in the system message where the request itself does not carry it."""
    if method in ("json_schema", "function_calling") or not messages:
        return messages
    spec = function_spec(schema)
    shape = json.dumps(spec["parameters"], ensure_ascii=False)
    note = (
        f"\n\nAnswer with one JSON object (a {spec['name']}) that fits this JSON schema, "
        f"and nothing else: no prose, no code fences.\n{shape}"
    )
    first, *rest = messages
    if isinstance(first, SystemMessage):
        return [SystemMessage(content=f"{first.text}{note}"), *rest]
    return [SystemMessage(content=note.strip()), *messages]


def read(message: AIMessage, schema: type[S], method: Method) -> S:
    """Read the answer as `schema`; raise UnusableAnswer (or pydantic's ValidationError)."""
    if message.response_metadata.get("finish_reason") == "length":
        raise UnusableAnswer(
            "the answer was cut off by the token limit before it was complete: answer more briefly"
        )
    if message.response_metadata.get("finish_reason") == "content_filter":
        raise UnusableAnswer("the answer was withheld by the provider's content filter")
    if method == "function_calling":
        calls = [c for c in message.tool_calls if c["name"] == schema.__name__]
        if not calls:
            raise UnusableAnswer(f"the answer did not call the {schema.__name__} function")
        return schema.model_validate(calls[0]["args"])
    return schema.model_validate(json_object(message.text))


def json_object(text: str) -> Any:
    """Return the first JSON object in `text`, ignoring code fences and prose around it."""
    text = _FENCE.sub("", text.strip())
    start = text.find("{")
    if start < 0:
        raise UnusableAnswer("the answer contains no JSON object")
    try:
        value, _ = json.JSONDecoder().raw_decode(text, start)
    except json.JSONDecodeError as exc:
        raise UnusableAnswer(f"the answer is not valid JSON ({exc.msg} at char {exc.pos})") from exc
    return value


def refuses(method: Method, exc: BaseException) -> MethodRefused | None:
    """Return a MethodRefused when the server's error says `method` itself is not supported."""
    status = getattr(exc, "status_code", None)
    if method == "prompt" or status not in _REFUSAL_STATUS:
        return None
    message = str(getattr(exc, "message", "") or exc)
    body = getattr(exc, "body", None)
    if body is not None:
        message += f" {body}"
    if not _REFUSAL_WORDS.search(message):
        return None
    return MethodRefused(method, f"HTTP {status}: {message[:200]}")


@dataclass
class Capabilities:
    """Which way of asking each model answers, found out once per model and remembered."""

    order: tuple[Method, ...]
    chosen: dict[str, Method] = field(default_factory=dict)
    refused: dict[str, dict[str, str]] = field(default_factory=dict)

    def candidates(self, model: str, configured: str) -> tuple[Method, ...]:
        """Return the methods to try for `model`, best first."""
        if configured != "auto":
            return (configured,)  # type: ignore[return-value]
        if model in self.chosen:
            return (self.chosen[model],)
        skipped = self.refused.get(model, {})
        return tuple(m for m in self.order if m not in skipped)

    def confirm(self, model: str, method: Method) -> None:
        """Remember that `model` answers `method` (asked again the same way from now on)."""
        self.chosen[model] = method

    def refuse(self, model: str, refusal: MethodRefused) -> None:
        """Remember that `model`'s server refused a method (it is not tried again).

        A method that worked before and is refused now (a schema the server cannot turn
        into a grammar) is given up too: the next call looks for another.
        """
        self.refused.setdefault(model, {})[refusal.method] = refusal.why
        if self.chosen.get(model) == refusal.method:
            del self.chosen[model]
