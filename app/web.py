"""The web page and its assets, every HTML answer under a Content-Security-Policy (the docs page under its own)."""

import base64
import hashlib
import re
from pathlib import Path

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse
from fastapi.staticfiles import StaticFiles
from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

STATIC = Path(__file__).parent / "static"
PAGE_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; "
    "form-action 'self'"
)
PAGE_HEADERS = {
    "Content-Security-Policy": PAGE_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}
# Swagger UI's assets, as FastAPI's docs page loads them.
_DOCS_CDN = "https://cdn.jsdelivr.net"
_INLINE_SCRIPT = re.compile(r"<script>(.*?)</script>", re.DOTALL)


def mount_web(app: FastAPI) -> None:
    """Serve the page at `/`, its assets under `/static`, the API's docs at `/docs`."""

    @app.get("/", include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(STATIC / "index.html")  # `HTMLPolicy` adds PAGE_HEADERS

    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    docs = _docs_page(app)

    @app.get("/docs", include_in_schema=False)
    async def api_docs() -> HTMLResponse:
        return docs


def _docs_page(app: FastAPI) -> HTMLResponse:
    """Return Swagger UI, allowed its CDN assets and its own inline start-up script (by hash)."""
    page = get_swagger_ui_html(openapi_url=app.openapi_url or "/openapi.json", title=app.title)
    body = bytes(page.body).decode()
    hashes = " ".join(
        f"'sha256-{base64.b64encode(hashlib.sha256(s.encode()).digest()).decode()}'"
        for s in _INLINE_SCRIPT.findall(body)
    )
    policy = (
        f"default-src 'none'; script-src {_DOCS_CDN} {hashes}; style-src {_DOCS_CDN}; "
        "img-src 'self' data:; connect-src 'self'; base-uri 'none'; frame-ancestors 'none'; "
        "form-action 'none'"
    )
    return HTMLResponse(body, headers=PAGE_HEADERS | {"Content-Security-Policy": policy})


class HTMLPolicy:
    """Pure ASGI middleware: an HTML answer with no policy of its own gets the page's."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on; add the headers to an HTML response's start."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def guarded(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                html = headers.get("content-type", "").startswith("text/html")
                if html and "content-security-policy" not in headers:
                    for name, value in PAGE_HEADERS.items():
                        headers.setdefault(name, value)
            await send(message)

        await self.app(scope, receive, guarded)
