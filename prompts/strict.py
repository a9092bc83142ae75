"""Field types for structured output that OpenAI's strict JSON-schema mode accepts.

Strict mode refuses some keywords (string lengths among them) and wants every field
required, so the output schemas carry no defaults and no length keywords: lengths are
enforced by a validator after parsing, which the schema does not show.
"""

from typing import Any

from pydantic import AfterValidator


def Line(max_chars: int) -> Any:  # capitalised: it is used like a type
    """A non-blank line of text: whitespace collapsed, cut to `max_chars`; blank is an error."""

    def clean(value: str) -> str:
        text = " ".join(value.split())
        if not text:
            raise ValueError("must not be blank")
        return text[:max_chars].rstrip()

    return AfterValidator(clean)
