"""The one repair round of structured output: show the model what was wrong with its answer."""

REPAIR = """Your answer could not be used: {error}
Reply again with only a JSON object that matches the schema exactly: no prose, no code fences."""


def repair_message(error: object) -> str:
    """Return the follow-up message after a parse or validation failure."""
    return REPAIR.format(error=str(error)[:1_000])
