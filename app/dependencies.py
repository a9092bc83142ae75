"""What routes depend on, as typed aliases, read from the app's state.

`create_app` puts the key auth, metrics, stream slots and report renderer on
`app.state`; its lifespan adds the run manager, the stores and the background work. A
route names what it needs (`owner: Owner`, `manager: Manager`, `thread_id:
StoredThread`, ...) and FastAPI resolves each once per request. Every dependency is a
coroutine: FastAPI runs a plain function one on its thread pool, a thread hop for every
request.
"""

from typing import Annotated

from fastapi import Depends, Request

from app.auth import KeyAuth
from app.background import BackgroundWork
from app.edge import StreamSlots
from app.metrics import ServiceMetrics
from app.report_html import RenderedReports
from app.stores import Stores
from service.runs import RunManager


async def _manager(request: Request) -> RunManager:
    manager: RunManager = request.app.state.manager
    return manager


async def _owner(request: Request) -> str:
    auth: KeyAuth = request.app.state.auth
    return await auth(request)


async def _streams(request: Request) -> StreamSlots:
    streams: StreamSlots = request.app.state.streams
    return streams


async def _metrics(request: Request) -> ServiceMetrics:
    metrics: ServiceMetrics = request.app.state.metrics
    return metrics


async def _reports(request: Request) -> RenderedReports:
    reports: RenderedReports = request.app.state.reports
    return reports


async def _stores(request: Request) -> Stores:
    stores: Stores = request.app.state.stores
    return stores


async def _background(request: Request) -> BackgroundWork:
    background: BackgroundWork = request.app.state.background
    return background


# The run manager of the app's runtime.
Manager = Annotated[RunManager, Depends(_manager)]
# The caller's owner id, from its API key (Unauthorized without a valid one).
Owner = Annotated[str, Depends(_owner)]
# The cap on open event streams.
Streams = Annotated[StreamSlots, Depends(_streams)]
Metrics = Annotated[ServiceMetrics, Depends(_metrics)]
# Reports rendered as HTML, off the event loop.
Reports = Annotated[RenderedReports, Depends(_reports)]
AppStores = Annotated[Stores, Depends(_stores)]
# Tasks that outlive their request, ended with the app.
Background = Annotated[BackgroundWork, Depends(_background)]


async def stored_id(thread_id: str, owner: Owner, manager: Manager) -> str:
    """The path's `thread_id` as the caller's stored thread id (NotFound for any other)."""
    return await manager.resolve(owner, thread_id)


# A path's thread id, as the caller's stored thread.
StoredThread = Annotated[str, Depends(stored_id)]
