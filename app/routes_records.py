"""`/v1/research/{id}/...`: a run's record: its sources as read, re-runs, diffs and export."""

from typing import Annotated, Literal

from fastapi import APIRouter, Body, Path, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from app.dependencies import Manager, Owner, StoredThread
from app.edge import StrictJSONRoute
from app.errors import ERROR_RESPONSES, JSONLine
from app.routes_research import StartAnswer, links
from service.citations import SourceView
from service.run_diff import RunDiff
from service.thread_ids import public_id

router = APIRouter(
    prefix="/v1/research",
    tags=["research records"],
    responses=ERROR_RESPONSES,
    route_class=StrictJSONRoute,
)


class RerunRequest(BaseModel):
    """How to re-run: on the stored evidence, or searching and reading again."""

    model_config = {"extra": "forbid"}

    mode: Literal["replay", "refresh"] = Field(
        "replay",
        description="replay: answer every search and page read from what the run read (no "
        "network; the extractive engine writes the same report); refresh: search and read again.",
    )


@router.get("/{thread_id}/sources/{n}", response_model=SourceView)
async def source(
    thread_id: StoredThread,
    owner: Owner,
    manager: Manager,
    n: Annotated[int, Path(ge=1, le=100_000, description="The footnote's number.")],
) -> SourceView:
    """The exact text the run read for footnote `n`, and the passages its sentences cite."""
    return await manager.source(thread_id, n)


@router.post("/{thread_id}/rerun", status_code=202, response_model=StartAnswer)
async def rerun(
    thread_id: StoredThread,
    owner: Owner,
    manager: Manager,
    response: Response,
    request: Annotated[RerunRequest | None, Body()] = None,
) -> StartAnswer:
    """Run the same topic, options and plan again, as a new thread."""
    mode = (request or RerunRequest()).mode
    record = await manager.rerun(owner, thread_id, mode)
    found = links(record.thread_id)
    response.headers["Location"] = found.self
    return StartAnswer(thread_id=public_id(record.thread_id), status=record.status, links=found)


@router.get("/{thread_id}/diff/{other}", response_model=RunDiff)
async def diff(thread_id: StoredThread, other: str, owner: Owner, manager: Manager) -> RunDiff:
    """What changed from this run to `other`: sources, findings, scores, models, prompts."""
    other_id = await manager.resolve(owner, other)
    return await manager.diff(thread_id, other_id)


@router.get("/{thread_id}/export")
async def export(thread_id: StoredThread, owner: Owner, manager: Manager) -> JSONResponse:
    """The run whole (record, state, events, evidence): `research-agent import` reads it."""
    archive = await manager.export_run(await manager.get(owner, thread_id))
    name = f"research-{public_id(thread_id)}.json"
    return JSONLine(
        archive.model_dump(mode="json"),
        headers={"Content-Disposition": f'attachment; filename="{name}"'},
    )
