"""The service's app: the HTTP routes, one module per resource, over one runtime."""

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from importlib.util import find_spec

from fastapi import FastAPI

from app import routes_collections, routes_ops, routes_questions, routes_research, routes_watches
from app.auth import KeyAuth
from app.background import BackgroundWork
from app.edge import RequestGate, StreamSlots
from app.errors import JSONLine, error_body, install_error_handlers
from app.metrics import ServiceMetrics
from app.platform import assistants, runs, threads
from app.report_html import RenderedReports
from app.retention import keep_evidence_within
from app.runtime import open_runtime, running_worker
from app.settings import Settings
from app.web import HTMLPolicy, mount_web

# In this order: the OpenAPI document lists them so.
ROUTERS = (
    routes_research.router,
    routes_research.records_router,
    routes_questions.router,
    routes_watches.router,
    routes_collections.router,
    routes_collections.upload_router,
    assistants.router,
    threads.router,
    runs.router,
)


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    """Open the runtime; at shutdown end the app's background work, then the runs, then the stores."""
    settings: Settings = app.state.settings
    metrics: ServiceMetrics = app.state.metrics
    async with AsyncExitStack() as stack:
        stack.callback(app.state.reports.close)
        runtime = await stack.enter_async_context(open_runtime(settings))
        runtime.executor.observe(metrics.record_status)
        app.state.manager, app.state.stores = runtime.manager, runtime.stores
        app.state.watches = runtime.watches
        if runtime.queue is not None and settings.in_process_worker:
            await stack.enter_async_context(running_worker(runtime))
        stack.push_async_callback(runtime.manager.shutdown)
        app.state.background = background = BackgroundWork()
        stack.push_async_callback(background.close)
        # MCP's sessions end first: a tool following a run stops before the runs do.
        if app.state.mcp is not None:
            await stack.enter_async_context(app.state.mcp.session_manager.run())
        await runtime.manager.recover()
        background.start(keep_evidence_within(runtime.stores.evidence, settings))
        if runtime.queue is None:  # embedded: this process schedules watches (on Redis, workers)
            await runtime.watches.tick()  # refreshes that fell due while it was down start now
            background.start(runtime.watches.run(settings.watch_poll_seconds))
        yield


MCP_MISSING = (
    "the MCP face needs the mcp extra, not installed here: "
    "pip install 'research-agent[mcp]' (the official MCP SDK)"
)


async def mcp_not_installed() -> JSONLine:
    """Answer /mcp where the SDK is not installed: 501, saying what to install."""
    return JSONLine(error_body("not_installed", MCP_MISSING), 501)


def create_app(settings: Settings) -> FastAPI:
    """Return the service's app: one graph, one run manager, the stores the settings choose."""
    auth = KeyAuth([k.get_secret_value() for k in settings.api_keys])
    app = FastAPI(
        title="research-agent",
        version="0.1.0",
        description="Deep research as a service: start a run, stream its progress, approve, read the report.",
        lifespan=lifespan,
        docs_url=None,  # served by `mount_web`, under the page's kind of policy
        redoc_url=None,
        default_response_class=JSONLine,
    )
    app.state.settings = settings
    app.state.auth = auth
    app.state.metrics = ServiceMetrics()
    app.state.streams = StreamSlots(settings.max_streams)
    app.state.reports = RenderedReports()
    app.add_middleware(
        RequestGate,
        auth=auth,
        max_body_bytes=settings.max_body_bytes,
        max_upload_bytes=settings.collection_max_upload_bytes,
    )
    app.add_middleware(HTMLPolicy)
    install_error_handlers(app)
    for router in ROUTERS:
        app.include_router(router)
    app.state.mcp = None
    if find_spec("mcp") is None:  # the `mcp` extra is not installed: /mcp says so
        app.add_api_route(
            "/mcp", mcp_not_installed, methods=["GET", "POST", "DELETE"], include_in_schema=False
        )
    else:
        from app.mcp_server import mount_mcp

        app.state.mcp = mount_mcp(app, auth, settings)
    mount_web(app)
    app.include_router(routes_ops.router)
    return app
