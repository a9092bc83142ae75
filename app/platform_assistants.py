"""The Platform API's assistants: the one assistant, graph `research`."""

from typing import Any

from fastapi import APIRouter
from langgraph_sdk import schema as sdk

from app.dependencies import Manager, Owner
from app.edge import StrictJSONRoute
from app.platform_api import GRAPH_ID, AssistantSearch, check_assistant
from app.platform_json import assistant_json
from app.platform_schema import PLATFORM_ERRORS, Assistant, GraphSchemas, doc
from core.models import ApprovalDecision
from core.options import ResearchRequest

router = APIRouter(
    tags=["langgraph platform"], responses=PLATFORM_ERRORS, route_class=StrictJSONRoute
)


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
