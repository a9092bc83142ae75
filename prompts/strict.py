"""Field types for OpenAI's strict JSON-schema mode: no length keywords, lengths enforced after parsing."""

from typing import Any

from pydantic import AfterValidator


def Line(max_chars: int) -> Any:  # capitalised: it is used like a type
    """Return a validator of a non-blank line: whitespace collapsed, cut to `max_chars`."""

    def clean(value: str) -> str:
        text = " ".join(value.split())
        if not text:
            raise ValueError("must not be blank")
        return text[:max_chars].rstrip()

    return AfterValidator(clean)
