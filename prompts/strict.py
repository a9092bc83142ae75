"""Field types for structured output that OpenAI's strict JSON-schema mode accepts.

Strict mode refuses length keywords and wants every field required: lengths are enforced
by a validator after parsing.
"""

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
