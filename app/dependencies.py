"""What routes depend on, as typed aliases read from the app's state (coroutines: no thread hop)."""

from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from fastapi import Depends, Request

from app.background import BackgroundWork
from app.edge import StreamSlots
from app.metrics import ServiceMetrics
from app.report_html import RenderedReports
from app.stores import Stores
from service.runs import RunManager


def _state(name: str) -> Callable[[Request], Awaitable[Any]]:
    """Return a dependency that reads `app.state.<name>`."""

    async def read(request: Request) -> Any:
        return getattr(request.app.state, name)

    return read


async def _owner(request: Request) -> str:
    owner: str = await request.app.state.auth(request)
    return owner


Manager = Annotated[RunManager, Depends(_state("manager"))]
# The caller's owner id, from its API key (Unauthorized without a valid one).
Owner = Annotated[str, Depends(_owner)]
Streams = Annotated[StreamSlots, Depends(_state("streams"))]
Metrics = Annotated[ServiceMetrics, Depends(_state("metrics"))]
Reports = Annotated[RenderedReports, Depends(_state("reports"))]
AppStores = Annotated[Stores, Depends(_state("stores"))]
Background = Annotated[BackgroundWork, Depends(_state("background"))]


async def stored_id(thread_id: str, owner: Owner, manager: Manager) -> str:
    """Return the path's `thread_id` as the caller's stored thread id (NotFound for any other)."""
    return await manager.resolve(owner, thread_id)


# A path's thread id, as the caller's stored thread.
StoredThread = Annotated[str, Depends(stored_id)]
