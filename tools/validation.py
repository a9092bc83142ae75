"""Turn pydantic validation failures of tool inputs into the taxonomy's VALIDATION_ERROR."""

from typing import TypeVar

from pydantic import BaseModel, ValidationError

from tools.errors import ProviderError

M = TypeVar("M", bound=BaseModel)


def validated(model: type[M], **values: object) -> M:
    """Build `model` from `values`, or raise a VALIDATION_ERROR naming each bad field."""
    try:
        return model.model_validate(values)
    except ValidationError as exc:
        reasons = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'input'}: {e['msg']}" for e in exc.errors()
        )
        raise ProviderError(reasons, "VALIDATION_ERROR") from None
