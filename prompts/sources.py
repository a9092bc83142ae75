"""How sources are shown to a model: numbered, so `[^n]` can name them."""

from collections.abc import Sequence

from core.models import SearchResult

SOURCE_CHARS = 2_000


def format_sources(sources: Sequence[SearchResult], chars: int = SOURCE_CHARS) -> str:
    """Return `[Source n]` blocks with title, URL and the start of the text; n counts from 1."""
    blocks = []
    for number, source in enumerate(sources, start=1):
        text = " ".join(source.content.split())
        if len(text) > chars:
            text = text[:chars].rsplit(" ", 1)[0] + " …"
        lines = [f"[Source {number}]", f"Title: {source.title}", f"URL: {source.url}"]
        if source.published_date:
            lines.append(f"Published: {source.published_date}")
        lines.append(f"Text: {text}")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) or "(no sources)"


def bullet_list(items: Sequence[str]) -> str:
    """Return Markdown bullets, or '(none)'."""
    return "\n".join(f"- {item}" for item in items) or "(none)"
