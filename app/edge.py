"""What a request meets before its route: the key and the body's size checked first, the body strictly JSON.

FastAPI parses a body before it runs the auth dependency; `RequestGate` answers before
reading it. `StrictJSONRoute` parses with pydantic-core, which refuses what the stores
cannot hold (lone surrogates, deep nesting), and answers 415 for another content type.
"""

import json
import re
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any, TypeVar

from fastapi import Request, Response
from fastapi.routing import APIRoute
from pydantic_core import from_json
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.auth import KeyAuth
from app.errors import PLATFORM_PREFIXES, error_response
from service.errors import TooManyStreams

T = TypeVar("T")

# Paths that need a key when keys are set (the web page, health and docs do not).
API_PREFIXES = ("/v1/", "/mcp", *PLATFORM_PREFIXES)


class RequestGate:
    """Pure ASGI middleware: no key, a 401 at once; a body over the cap, a 413 while read."""

    def __init__(
        self, app: ASGIApp, auth: KeyAuth, max_body_bytes: int, max_upload_bytes: int = 0
    ) -> None:
        self.app = app
        self.auth = auth
        self.max_body_bytes = max_body_bytes
        # A file upload's cap (`POST /v1/collections/{c}/documents`); 0: the body's.
        self.max_upload_bytes = max_upload_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on, or answer without reading its body."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        request = Request(scope)
        cap = self._cap(scope.get("method", ""), path)
        refusal: tuple[int, str, str] | None = None
        if path.startswith(API_PREFIXES) and self.auth.owner(request) is None:
            refusal = (401, "unauthorized", self.auth.REFUSAL)
        elif _declared_length(request) > cap:
            refusal = (413, "payload_too_large", too_large(cap))
        if refusal is not None:
            # A large body is not read (the connection closes); a small one is read and
            # dropped, so a client still sending it gets this answer, not a reset.
            large = _declared_length(request) > _DRAIN_FACTOR * cap
            headers = {"Connection": "close"} if large or refusal[0] == 401 else {}
            if refusal[0] == 401:
                headers["WWW-Authenticate"] = "Bearer"
            await error_response(path, *refusal, headers=headers)(scope, receive, send)
            return
        await self.app(scope, self._counting(receive, cap), send)

    def _cap(self, method: str, path: str) -> int:
        """Return the body cap of a request: an upload's, or every other body's."""
        if self.max_upload_bytes and method == "POST" and _UPLOAD_PATH.match(path):
            return self.max_upload_bytes
        return self.max_body_bytes

    def _counting(self, receive: Receive, cap: int) -> Receive:
        """Wrap `receive` to raise a 413 once the body read passes the cap (chunked bodies)."""
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > cap:
                    raise HTTPException(413, too_large(cap))
            return message

        return counted


_UPLOAD_PATH = re.compile(r"^/v1/collections/[^/]+/documents$")
# A refused body up to this many times the cap is read and dropped, not cut off.
_DRAIN_FACTOR = 4


def too_large(limit: int) -> str:
    """Return what a 413 says."""
    return f"the request body is over the limit of {limit} bytes: send less"


def _declared_length(request: Request) -> int:
    length = request.headers.get("content-length", "")
    return int(length) if length.isascii() and length.isdigit() and len(length) < 19 else 0


class StrictJSONRequest(Request):
    """A request whose JSON body is parsed by pydantic-core (strict, and faster)."""

    async def json(self) -> Any:
        """Return the body parsed; raise JSONDecodeError (FastAPI's 422) when it is not JSON."""
        if not hasattr(self, "_json"):
            body = await self.body()
            try:
                self._json = from_json(body)
            except ValueError as exc:
                text = body[:200].decode("utf-8", "replace")
                raise json.JSONDecodeError(str(exc), text, 0) from None
        return self._json


def _is_json(content_type: str) -> bool:
    kind = content_type.split(";", 1)[0].strip().lower()
    return kind == "application/json" or (
        kind.startswith("application/") and kind.endswith("+json")
    )


class StrictJSONRoute(APIRoute):
    """A route whose body must be JSON (415 otherwise), parsed strictly."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        """Return FastAPI's handler, given a StrictJSONRequest once the content type is checked."""
        handler = super().get_route_handler()
        takes_body = self.body_field is not None

        async def strict(request: Request) -> Response:
            content_type = request.headers.get("content-type")
            if takes_body and content_type and not _is_json(content_type) and _has_body(request):
                raise HTTPException(
                    415,
                    f"send the body as JSON (Content-Type: application/json), not {content_type[:60]}",
                )
            return await handler(StrictJSONRequest(request.scope, request.receive))

        return strict


def _has_body(request: Request) -> bool:
    length = request.headers.get("content-length")
    return length not in (None, "0") or "transfer-encoding" in request.headers


class StreamSlots:
    """How many event streams are open, and a cap past which a new one gets 503."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.open = 0

    def check(self) -> None:
        """Raise TooManyStreams when the cap is reached."""
        if self.open >= self.limit:
            raise TooManyStreams(
                f"{self.open} event streams are open, the most this service serves: "
                "retry in a few seconds"
            )

    async def counted(self, frames: AsyncIterator[T]) -> AsyncIterator[T]:
        """Yield `frames`, counted as an open stream while it runs."""
        self.open += 1
        try:
            async for frame in frames:
                yield frame
        finally:
            self.open -= 1
