"""What a checkpoint may hold, and the serializer that revives that and nothing else.

Every checkpointer of the service deserialises only our pydantic models reachable from
the state (`STATE_TYPES`): a checkpoint cannot name any other class to construct.
"""

from asyncio import CancelledError
from collections.abc import Sequence
from typing import Any, get_args, get_origin, get_type_hints, is_typeddict

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.serde.types import ERROR
from pydantic import BaseModel

from core.state import CHECKPOINT_ROOTS
from nodes.research_state import ResearcherState


def model_types(*roots: Any) -> tuple[type[BaseModel], ...]:
    """Return our pydantic models reachable from `roots` through type hints and fields.

    LangGraph's and LangChain's own types (messages) are left out: the serializer
    revives those itself.
    """
    found: dict[type[BaseModel], None] = {}

    def visit(hint: Any) -> None:
        if get_origin(hint) is not None:
            for arg in get_args(hint):
                visit(arg)
        elif is_typeddict(hint):
            for field_hint in get_type_hints(hint).values():
                visit(field_hint)
        elif isinstance(hint, type) and issubclass(hint, BaseModel):
            if hint in found or hint.__module__.startswith(_LIBRARY_MODULES):
                return
            found[hint] = None
            for field in hint.model_fields.values():
                visit(field.annotation)

    for root in roots:
        visit(root)
    return tuple(found)


_LIBRARY_MODULES = ("langchain_core.", "langgraph.", "pydantic.")
# Everything a checkpoint may hold beyond LangGraph's own safe types: derived, so a model
# added to the state (or to the researcher subgraph's) can always be read back.
STATE_TYPES = model_types(*CHECKPOINT_ROOTS, ResearcherState)
# The (module, class) names a checkpoint may use for them.
ALLOWED_NAMES = [(t.__module__, t.__name__) for t in STATE_TYPES]


def serializer() -> JsonPlusSerializer:
    """Return a serializer that refuses to revive any type not in `STATE_TYPES`."""
    return JsonPlusSerializer(allowed_msgpack_modules=ALLOWED_NAMES)


def memory_saver() -> InMemorySaver:
    """Return an in-process checkpointer for tests and benchmarks."""
    return InMemorySaver(serde=serializer())


def kept_writes(writes: Sequence[tuple[str, Any]]) -> Sequence[tuple[str, Any]]:
    """Return a task's writes as a checkpointer should keep them: none for a cancelled task.

    LangGraph saves a cancelled task's partial writes and on resume applies them as the
    finished task's output, so a node cancelled before its routing ended the run with no
    next step. Kept as nothing, the task runs again on resume, as after a kill.
    """
    if any(channel == ERROR and isinstance(value, CancelledError) for channel, value in writes):
        return ()
    return writes
