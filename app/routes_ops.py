"""Operations: liveness, readiness and Prometheus metrics."""

from fastapi import APIRouter, Response
from fastapi.responses import PlainTextResponse
from prometheus_client import CONTENT_TYPE_LATEST

from app.dependencies import AppStores, Metrics
from app.errors import ERROR_RESPONSES
from service.errors import BackendUnavailable
from service.runner import thread_config

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
async def readyz(stores: AppStores) -> dict[str, str]:
    """The checkpointer, the event log and the registry answer."""
    try:
        await stores.events.ping()
        await stores.registry.ping()
        await stores.saver.aget_tuple(thread_config("readyz"))
    except Exception as exc:
        raise BackendUnavailable(f"a store does not answer ({type(exc).__name__})") from exc
    return {"status": "ready"}
