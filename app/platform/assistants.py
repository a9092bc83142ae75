"""The Platform API's assistants: the one assistant, graph `research`."""

import uuid
from datetime import UTC, datetime
from typing import Any

from langgraph_sdk import schema as sdk
from pydantic import BaseModel, Field

from app.dependencies import Manager, Owner
from app.platform import Count, Lenient, doc, platform_router
from core.models import ApprovalDecision
from core.options import ResearchRequest
from service.errors import NotFound

GRAPH_ID = "research"
ASSISTANT_ID = str(uuid.uuid5(uuid.NAMESPACE_URL, "research-agent/graphs/research"))
_CREATED = datetime(2026, 1, 1, tzinfo=UTC)


def check_assistant(assistant_id: str) -> None:
    """NotFound unless `assistant_id` names the one assistant (by its id or graph id)."""
    if assistant_id not in (ASSISTANT_ID, GRAPH_ID):
        raise NotFound(f"no assistant {assistant_id!r}: the one assistant is {GRAPH_ID!r}")


class AssistantSearch(Lenient):
    """POST /assistants/search."""

    graph_id: str | None = None
    limit: Count = Field(10, ge=1, le=1000)
    offset: Count = Field(0, ge=0)


class Assistant(BaseModel):
    """The one assistant (graph `research`)."""

    assistant_id: str
    graph_id: str
    name: str
    description: str | None
    config: dict[str, Any]
    context: dict[str, Any]
    metadata: dict[str, Any]
    version: int
    created_at: datetime
    updated_at: datetime


class GraphSchemas(BaseModel):
    """What a run's input and a resume take."""

    graph_id: str
    input_schema: dict[str, Any] | None
    output_schema: dict[str, Any] | None
    state_schema: dict[str, Any] | None
    config_schema: dict[str, Any] | None
    context_schema: dict[str, Any] | None
    resume_schema: dict[str, Any] | None


def assistant_json() -> sdk.Assistant:
    """Return the one assistant, as the SDK reads it."""
    return sdk.Assistant(
        assistant_id=ASSISTANT_ID,
        graph_id=GRAPH_ID,
        name=GRAPH_ID,
        description="Deep research: plan, search, write a cited report, review it.",
        config={},
        context={},
        metadata={},
        version=1,
        created_at=_CREATED,
        updated_at=_CREATED,
    )


router = platform_router()


@router.post("/assistants/search", **doc(list[Assistant]))
async def search_assistants(body: AssistantSearch, owner: Owner) -> list[sdk.Assistant]:
    """The one assistant (graph `research`), if it matches."""
    found = [assistant_json()] if body.graph_id in (None, GRAPH_ID) else []
    return found[body.offset : body.offset + body.limit]


@router.get("/assistants/{assistant_id}", **doc(Assistant))
async def get_assistant(assistant_id: str, owner: Owner) -> sdk.Assistant:
    """The assistant, by its id or its graph id."""
    check_assistant(assistant_id)
    return assistant_json()


@router.get("/assistants/{assistant_id}/graph", **doc(dict[str, Any]))
async def get_assistant_graph(assistant_id: str, owner: Owner, manager: Manager) -> dict[str, Any]:
    """The graph's nodes and edges."""
    check_assistant(assistant_id)
    return manager.drawing()


@router.get("/assistants/{assistant_id}/schemas", **doc(GraphSchemas))
async def get_assistant_schemas(assistant_id: str, owner: Owner) -> dict[str, Any]:
    """What a run's input takes (a research request) and what a decision looks like."""
    check_assistant(assistant_id)
    return {
        "graph_id": GRAPH_ID,
        "input_schema": ResearchRequest.model_json_schema(),
        "output_schema": None,
        "state_schema": None,
        "config_schema": None,
        "context_schema": None,
        "resume_schema": ApprovalDecision.model_json_schema(),
    }
