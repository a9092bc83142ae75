"""The LangGraph Platform API, so that `langgraph_sdk` and RemoteGraph clients work unchanged.

Mounted by the same app under the paths the SDK uses, on the same run manager, event
log, registry, auth and checkpointer as `/v1/research`. One assistant, graph `research`.
A thread is a research thread: its first run's `input` is a research request
(`{"topic": ..., "options": {...}}`), and a run with `command={"resume": decision}`
answers the plan approval it waits on. A run streams `metadata`, then one event per
chunk of each stream mode asked for (`values`, `updates`, `custom`, `messages-tuple`,
`debug`), `error` if it failed, and `end`; every event has an id for `Last-Event-ID`.

One module per resource (`assistants`, `threads`, `runs`) holds its request bodies, its
answers (typed as `langgraph_sdk.schema` defines them) and its routes. Here is what they
share: bodies that accept the SDK's unused options, bounded free-form JSON, and the
error answers every route documents. The answers' shapes are documented for
`/openapi.json` by pydantic models that mirror the SDK's types; no response model
filters what a route answers, and the fuzz test checks the answers against them.
"""

from typing import Annotated, Any

from fastapi import APIRouter
from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict
from pydantic_core import to_json

from app.edge import StrictJSONRoute
from core.options import json_number

# Free-form JSON a client sends (metadata, config, filters): how deep it may nest, and how
# large a thread's or run's metadata may be (stored with every record, sent with every
# listing).
MAX_JSON_DEPTH = 16
MAX_METADATA_BYTES = 16 * 1024


def _depth(value: Any) -> int:
    """How deep `value` nests (iterative: a hostile value must not exhaust the stack)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, level)
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, level + 1) for child in children)
    return deepest


def _shallow(value: Any) -> Any:
    if _depth(value) > MAX_JSON_DEPTH:
        raise ValueError(f"nests deeper than {MAX_JSON_DEPTH} levels")
    return value


def _small(value: Any) -> Any:
    size = len(to_json(value))
    if size > MAX_METADATA_BYTES:
        raise ValueError(f"is {size} bytes as JSON; the limit is {MAX_METADATA_BYTES}")
    return value


# Checked before pydantic walks the value, so nothing deep or large reaches a store.
FreeJSON = Annotated[dict[str, Any], BeforeValidator(_shallow)]
Metadata = Annotated[dict[str, Any], AfterValidator(_small), BeforeValidator(_shallow)]


# A count in a body: an integer as JSON Schema has it (5 or 5.0; not true, not "5").
Count = Annotated[int, BeforeValidator(json_number)]


class Lenient(BaseModel):
    """SDK bodies carry options this service has no use for: they are accepted, unused."""

    model_config = ConfigDict(extra="ignore")


class PlatformError(BaseModel):
    """Every Platform error answer: what went wrong, in words."""

    detail: str


def _error(description: str) -> dict[str, Any]:
    return {"model": PlatformError, "description": description}


# The error answers every Platform route may give.
PLATFORM_ERRORS: dict[int | str, dict[str, Any]] = {
    401: _error("no valid API key"),
    404: _error("no such assistant, thread, run or checkpoint for this key"),
    409: _error("the thread's state does not allow this (busy, already there)"),
    413: _error("the body is over the size limit"),
    415: _error("the body is not sent as JSON"),
    422: _error("the request is malformed"),
    429: _error("the run queue is full"),
    503: _error("a store does not answer, or too many streams are open"),
}


def platform_router() -> APIRouter:
    """A router of Platform routes: their tag, their error answers, JSON bodies only."""
    return APIRouter(
        tags=["langgraph platform"], responses=PLATFORM_ERRORS, route_class=StrictJSONRoute
    )


def doc(model: Any, description: str = "Success") -> dict[str, Any]:
    """A route's decorator arguments: its 200 answer documented as `model`, not filtered."""
    return {
        "response_model": None,
        "responses": {200: {"model": model, "description": description}},
    }
