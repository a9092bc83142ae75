"""Every model a checkpoint may hold is read back as itself by the checkpointers' serializer."""

import types
import typing
from datetime import UTC, datetime
from typing import Any, Literal, get_args, get_origin

import pytest
from pydantic import BaseModel, ValidationError

from core.models import ApprovalDecision, DraftReview, Review, SearchResult
from core.state import CHECKPOINT_ROOTS
from core.usage import RoundRecord, Usage
from nodes.research_state import QueryOutcome, ResearcherState
from stores.checkpointer import STATE_TYPES, model_types, serializer


def _value(hint: Any, name: str) -> Any:
    """A plausible value of the type `hint` for a field called `name`."""
    origin, args = get_origin(hint), get_args(hint)
    if origin is typing.Annotated:
        return _value(args[0], name)
    if origin is Literal:
        return args[0]
    if origin in (typing.Union, types.UnionType):
        return _value(next(a for a in args if a is not type(None)), name)
    if origin is list:
        return [_value(args[0], name)]
    if origin is dict:
        return {"researcher": _value(args[1], name)}
    if isinstance(hint, type) and issubclass(hint, BaseModel):
        return _instance(hint)
    if hint is bool:
        return True
    if hint is int:
        return 1
    if hint is float:
        return 0.5
    if hint is datetime:
        return datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    if hint is str:
        return "https://example.org/page" if "url" in name else f"a {name.replace('_', ' ')}"
    return None


def _instance(model: type[BaseModel]) -> BaseModel:
    """A valid instance: every field filled, or the defaults where a filled one breaks a rule."""
    fields = model.model_fields.items()
    every = {name: _value(f.annotation, name) for name, f in fields}
    try:
        return model.model_validate(every)
    except ValidationError:
        required = {name: every[name] for name, f in fields if f.is_required()}
        return model.model_validate(required)


def test_the_allowlist_is_every_model_reachable_from_the_state() -> None:
    assert set(STATE_TYPES) == set(model_types(*CHECKPOINT_ROOTS, ResearcherState))
    # Nested ones too: a round's submissions, a review's scores, usage per node.
    names = {t.__name__ for t in STATE_TYPES}
    assert {"NodeSubmission", "ReviewScores", "NodeUsage", "ApprovalDecision"} <= names
    assert {SearchResult, Review, RoundRecord, Usage, ApprovalDecision, DraftReview} <= set(
        STATE_TYPES
    )
    assert QueryOutcome in STATE_TYPES, "the researcher subgraph's state is checkpointed too"


@pytest.mark.parametrize("model", STATE_TYPES, ids=lambda t: t.__name__)
def test_every_state_model_round_trips(model: type[BaseModel]) -> None:
    serde = serializer()
    original = _instance(model)
    revived = serde.loads_typed(serde.dumps_typed({"value": [original]}))["value"][0]
    assert type(revived) is model, f"{model.__name__} came back as {type(revived).__name__}"
    assert revived == original


def test_a_model_outside_the_state_is_not_revived() -> None:
    """The allowlist is what keeps a checkpoint from naming any class to construct."""
    serde = serializer()

    class Stranger(BaseModel):
        name: str = "x"

    revived = serde.loads_typed(serde.dumps_typed({"value": Stranger()}))["value"]
    assert not isinstance(revived, Stranger)
