"""The report as a safe HTML fragment, for the web page (and any client that wants HTML).

Rendered on the server with markdown-it-py: raw HTML in the Markdown is escaped (`html`
off), link targets go through markdown-it's URL validation (no `javascript:` or `data:`
links), so text that came from a source can never become markup in the browser.
"""

import html
import json
from functools import cache

from markdown_it import MarkdownIt
from mdit_py_plugins.footnote import footnote_plugin

from engines.checks import split_front_matter


@cache
def _renderer() -> MarkdownIt:
    return (
        MarkdownIt("commonmark", {"html": False, "linkify": False})
        .enable("table")
        .use(footnote_plugin)
    )


def _front_matter_rows(front: str) -> list[tuple[str, str]]:
    """`key: value` pairs of our front matter (strings there are JSON-quoted)."""
    rows = []
    for line in front.strip().strip("-").strip().splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            continue
        text = value.strip()
        try:
            parsed = json.loads(text)
            text = parsed if isinstance(parsed, str) else text
        except ValueError:
            pass
        rows.append((key.strip(), text))
    return rows


def report_html(markdown: str) -> str:
    """An HTML fragment: the front matter as a definition list, then the rendered report."""
    front, body = split_front_matter(markdown)
    parts = []
    rows = _front_matter_rows(front) if front else []
    if rows:
        items = "".join(
            f"<dt>{html.escape(key)}</dt><dd>{html.escape(value)}</dd>" for key, value in rows
        )
        parts.append(f'<dl class="report-meta">{items}</dl>')
    rendered = _renderer().render(body)
    # External links (http and https) open apart and send no referrer; footnote links stay.
    parts.append(
        rendered.replace('<a href="http', '<a rel="noopener noreferrer" target="_blank" href="http')
    )
    return "\n".join(parts)
