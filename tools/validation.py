"""Turn pydantic validation failures of tool inputs into the taxonomy's VALIDATION_ERROR."""

from typing import TypeVar

from pydantic import BaseModel, ValidationError

from core.models import explain
from tools.errors import ProviderError

M = TypeVar("M", bound=BaseModel)


def validated(model: type[M], **values: object) -> M:
    """Build `model` from `values`, or raise a VALIDATION_ERROR naming each bad field."""
    try:
        return model.model_validate(values)
    except ValidationError as exc:
        raise ProviderError(explain(exc), "VALIDATION_ERROR") from None
