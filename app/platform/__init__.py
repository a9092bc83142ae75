"""The LangGraph Platform API, so that `langgraph_sdk` and RemoteGraph clients work unchanged.

One assistant (graph `research`) over the same run manager, stores and auth as
`/v1/research`; a thread's first run takes a research request as `input`, and
`command={"resume": decision}` answers the approval it waits on. One module per
resource (`assistants`, `threads`, `runs`); here is what they share. The answers are
documented by pydantic models mirroring `langgraph_sdk.schema`, never filtered by them.
"""

from typing import Annotated, Any

from fastapi import APIRouter
from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict
from pydantic_core import to_json

from app.edge import StrictJSONRoute
from app.errors import documented
from core.options import json_number

# Free-form JSON a client sends: how deep it may nest, and how large metadata may be.
MAX_JSON_DEPTH = 16
MAX_METADATA_BYTES = 16 * 1024


def _depth(value: Any) -> int:
    """Return how deep `value` nests (iterative: a hostile value must not exhaust the stack)."""
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


# The error answers every Platform route may give.
PLATFORM_ERRORS = documented(
    PlatformError,
    {
        401: "no valid API key",
        404: "no such assistant, thread, run or checkpoint for this key",
        409: "the thread's state does not allow this (busy, already there)",
        413: "the body is over the size limit",
        415: "the body is not sent as JSON",
        422: "the request is malformed",
        429: "the run queue is full",
        503: "a store does not answer, or too many streams are open",
    },
)


def platform_router() -> APIRouter:
    """Return a router of Platform routes: their tag, their error answers, JSON bodies only."""
    return APIRouter(
        tags=["langgraph platform"], responses=PLATFORM_ERRORS, route_class=StrictJSONRoute
    )


def doc(model: Any, description: str = "Success") -> dict[str, Any]:
    """Return a route's decorator arguments: its 200 answer documented as `model`, not filtered."""
    return {
        "response_model": None,
        "responses": {200: {"model": model, "description": description}},
    }
