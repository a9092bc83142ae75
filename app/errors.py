"""The one place that maps the service's failures (`service.errors`) to HTTP answers."""

import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from starlette.exceptions import HTTPException as StarletteHTTPException

from service.errors import (
    BackendUnavailable,
    DocumentTooLarge,
    InvalidState,
    LimitReached,
    NotAcceptable,
    NotFound,
    ResearchError,
    TooManyRuns,
    TooManyStreams,
    Unauthorized,
    Unprocessable,
    UnreadableDocument,
    UnsupportedDocument,
)
from stores.data_file import storage_failure

# Subclasses first: the first kind a failure is decides its answer.
_STATUS: dict[type[ResearchError], tuple[int, str]] = {
    UnreadableDocument: (422, "unreadable_document"),
    UnsupportedDocument: (415, "unsupported_media_type"),
    DocumentTooLarge: (413, "payload_too_large"),
    LimitReached: (409, "limit_reached"),
    NotFound: (404, "not_found"),
    InvalidState: (409, "invalid_state"),
    Unprocessable: (422, "validation_error"),
    NotAcceptable: (406, "not_acceptable"),
    TooManyRuns: (429, "too_many_runs"),
    TooManyStreams: (503, "too_many_streams"),
    Unauthorized: (401, "unauthorized"),
    BackendUnavailable: (503, "backend_unavailable"),
}


def error_code(exc: ResearchError) -> str:
    """Return the stable code of a service failure (`not_found`, `invalid_state`, ...)."""
    return next((code for kind, (_, code) in _STATUS.items() if isinstance(exc, kind)), "internal")


class JSONLine(JSONResponse):
    """A JSON answer ending with a newline: what follows `curl` starts on a line of its own."""

    def render(self, content: Any) -> bytes:
        """Return the JSON, then a newline."""
        return super().render(content) + b"\n"


class ErrorDetail(BaseModel):
    """What went wrong: a stable code, a message that says what to fix, details."""

    code: str = Field(examples=["not_found"])
    message: str
    details: dict[str, Any] = Field(default_factory=dict)


class ErrorBody(BaseModel):
    """The body of every error answer."""

    error: ErrorDetail


def documented(model: type[BaseModel], answers: dict[int, str]) -> dict[int | str, dict[str, Any]]:
    """Return error answers for the OpenAPI document: each status's body model and description."""
    return {status: {"model": model, "description": text} for status, text in answers.items()}


# The error answers every route may give, for the OpenAPI document.
ERROR_RESPONSES = documented(
    ErrorBody,
    {
        400: "bad_request: the body is not JSON",
        401: "unauthorized: no valid API key",
        404: "not_found: no such thread for this key",
        409: "invalid_state: the thread's state does not allow this",
        413: "payload_too_large: the body is over the size limit",
        415: "unsupported_media_type: the body is not sent as JSON",
        422: "validation_error: the request is malformed (field details)",
        429: "too_many_runs: the run queue is full",
        503: "backend_unavailable: a store does not answer; too_many_streams: retry after a moment",
        507: "insufficient_storage: the disk holding the data file is full",
    },
)

_HTTP_CODES = {
    400: "bad_request",
    404: "not_found",
    405: "method_not_allowed",
    413: "payload_too_large",
    415: "unsupported_media_type",
}


# Paths of the LangGraph Platform API (app/platform/): its clients expect the
# Platform's own error shape, `{"detail": message}`, with the same status codes.
PLATFORM_PREFIXES = ("/assistants", "/threads", "/runs")


def error_body(code: str, message: str, details: Any = None) -> dict[str, Any]:
    """Return the JSON shape of every error answer."""
    return {"error": {"code": code, "message": message, "details": details or {}}}


def error_response(
    path: str,
    status: int,
    code: str,
    message: str,
    details: Any = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    """Return an error answer in the shape the path's clients expect."""
    if path.startswith(PLATFORM_PREFIXES):
        return JSONLine({"detail": message}, status, headers=headers)
    return JSONLine(error_body(code, message, details), status, headers=headers)


async def _research_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ResearchError)
    status, code = next(
        (value for kind, value in _STATUS.items() if isinstance(exc, kind)), (500, "internal")
    )
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    if isinstance(exc, TooManyStreams):
        headers = {"Retry-After": "5"}
    return error_response(request.url.path, status, code, exc.message, exc.details, headers)


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    message, details = validation_failure(exc.errors())
    return error_response(request.url.path, 422, "validation_error", message, details)


def validation_failure(
    errors: Sequence[Mapping[str, Any]], whole: str = "body"
) -> tuple[str, dict[str, Any]]:
    """Return a `validation_error`'s message and details from pydantic's errors (HTTP and MCP).

    `whole` names what an error of no one field is about: the body, a tool's arguments.
    """
    fields = [_field_error(e) for e in errors]
    message = "; ".join(f"{f['field'] or whole}: {f['message']}" for f in fields)
    return message, {"fields": fields}


def _field_error(error: Mapping[str, Any]) -> dict[str, str]:
    if error["type"] == "json_invalid":  # its `loc` holds a character offset, not a field
        reason = error.get("ctx", {}).get("error", "")
        return {"field": "", "message": f"not valid JSON ({reason})"}
    field = ".".join(str(p) for p in error["loc"] if p != "body")
    # A validator's own message says what to do; pydantic's prefix adds nothing to it.
    return {"field": field, "message": error["msg"].removeprefix("Value error, ")}


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    code = _HTTP_CODES.get(exc.status_code, "http_error")
    headers = dict(exc.headers or {})
    if exc.status_code == 413:
        headers["Connection"] = "close"  # the rest of the body is not read
    return error_response(request.url.path, exc.status_code, code, str(exc.detail), headers=headers)


STORE_FAILURES = (RedisConnectionError, RedisTimeoutError, sqlite3.DatabaseError)


def store_failure_answer(exc: BaseException) -> tuple[int, str, str] | None:
    """Return the status, code and message of a store's failure (HTTP and MCP), None for another error.

    Redis down or restarting, or the SQLite data file full, damaged, failing or locked.
    """
    if isinstance(exc, RedisConnectionError | RedisTimeoutError):
        # The client may retry; the pool reconnects by itself.
        message = f"the store does not answer ({type(exc).__name__}); retry in a few seconds"
        return 503, "backend_unavailable", message
    if not isinstance(exc, sqlite3.DatabaseError):
        return None
    kind = storage_failure(exc)
    if kind == "full":
        message = (
            "the disk holding the data file is full: free space on it, then retry "
            "(nothing stored was lost)"
        )
        return 507, "insufficient_storage", message
    if kind == "damaged":
        message = (
            f"the data file cannot be read or written ({exc}): stop the service and restore "
            "the file from a backup"
        )
    elif kind == "io":
        message = f"the disk failed a read or write of the data file ({exc}): check the disk"
    else:
        message = f"the data file does not answer ({exc}); retry in a few seconds"
    return 503, "backend_unavailable", message


async def _store_failed(request: Request, exc: Exception) -> JSONResponse:
    """Answer a store's failure: Redis away, or the data file full, damaged, failing or locked."""
    answer = store_failure_answer(exc)
    assert answer is not None
    if isinstance(exc, sqlite3.DatabaseError) and storage_failure(exc) == "damaged":
        # Readiness goes down with it: a damaged file does not mend while the service runs.
        request.app.state.data_file_damage = str(exc)
    return error_response(request.url.path, *answer)


def install_error_handlers(app: FastAPI) -> None:
    """Answer every expected failure as `{"error": {code, message, details}}`."""
    for failure in STORE_FAILURES:
        app.add_exception_handler(failure, _store_failed)
    app.add_exception_handler(ResearchError, _research_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
