"""Operations: liveness, readiness and Prometheus metrics."""

from fastapi import APIRouter, Request, Response
from fastapi.responses import PlainTextResponse
from prometheus_client import CONTENT_TYPE_LATEST

from app.dependencies import AppStores, Metrics
from app.errors import ERROR_RESPONSES
from service.errors import BackendUnavailable
from service.runner import thread_config
from stores.data_file import storage_failure

router = APIRouter(tags=["ops"])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """The process is up."""
    return {"status": "ok"}


@router.get("/metrics", response_class=PlainTextResponse)
async def prometheus(metrics: Metrics) -> Response:
    """Prometheus metrics: runs by status, run duration, events sent, SSE clients."""
    return Response(metrics.exposition(), media_type=CONTENT_TYPE_LATEST)


@router.get("/readyz", responses={503: ERROR_RESPONSES[503]})
async def readyz(request: Request, stores: AppStores) -> dict[str, str]:
    """The checkpointer, the event log and the registry answer, and the data file takes writes."""
    damage = getattr(request.app.state, "data_file_damage", None)
    if damage is not None:
        raise BackendUnavailable(f"the data file is damaged ({damage}): restore it from a backup")
    try:
        await stores.events.ping()
        await stores.registry.ping()
        await stores.saver.aget_tuple(thread_config("readyz"))
    except Exception as exc:
        if storage_failure(exc) == "full":
            raise BackendUnavailable("the disk holding the data file is full: free space") from exc
        raise BackendUnavailable(f"a store does not answer ({type(exc).__name__})") from exc
    return {"status": "ready"}
