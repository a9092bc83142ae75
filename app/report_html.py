"""The report as a safe HTML fragment, for the web page (and any client that wants HTML).

Rendered on the server with markdown-it-py: raw HTML in the Markdown is escaped (`html`
off), link targets go through markdown-it's URL validation (no `javascript:` or `data:`
links), so text that came from a source can never become markup in the browser.
"""

import html
import json
import re
from collections.abc import Sequence
from functools import cache
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.token import Token
from mdit_py_plugins.footnote import footnote_plugin

from engines.checks import split_front_matter

# A References heading with nothing under it (the report cites nothing).
_EMPTY_REFERENCES = re.compile(r"^#{1,6}\s*References\s*\Z", re.MULTILINE)


def _one_caption_per_source(
    self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any
) -> str:
    """`[1]` for every citation of source 1 (the plugin numbers repeats `[1:1]`, `[1:2]`)."""
    return f"[{tokens[idx].meta['id'] + 1}]"


@cache
def _renderer() -> MarkdownIt:
    md = (
        MarkdownIt("commonmark", {"html": False, "linkify": False})
        .enable("table")
        .use(footnote_plugin)
    )
    md.add_render_rule("footnote_caption", _one_caption_per_source)
    return md


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


def _summary(rows: dict[str, str]) -> str:
    """One line: the status, then sources, review score and engine."""
    status = rows.get("status", "")
    parts = (
        [
            f'<span class="report-status" data-status="{html.escape(status)}">{html.escape(status)}</span>'
        ]
        if status
        else []
    )
    if "sources" in rows:
        parts.append(f"{html.escape(rows['sources'])} sources")
    if "review_score" in rows:
        parts.append(f"review score {html.escape(rows['review_score'])}")
    if "engine" in rows:
        parts.append(html.escape(rows["engine"]))
    return f'<p class="report-summary">{" · ".join(parts)}</p>'


def report_html(markdown: str) -> str:
    """An HTML fragment: a one-line summary with the front matter folded, then the report."""
    front, body = split_front_matter(markdown)
    parts = []
    rows = _front_matter_rows(front) if front else []
    if rows:
        parts.append(_summary(dict(rows)))
        items = "".join(
            f"<dt>{html.escape(key)}</dt><dd>{html.escape(value)}</dd>" for key, value in rows
        )
        parts.append(
            '<details class="report-details"><summary>How this report was made</summary>'
            f'<dl class="report-meta">{items}</dl></details>'
        )
    body = _EMPTY_REFERENCES.sub("", body.rstrip())
    rendered = _renderer().render(body)
    # External links (http and https) open apart and send no referrer; footnote links stay.
    parts.append(
        rendered.replace('<a href="http', '<a rel="noopener noreferrer" target="_blank" href="http')
    )
    return "\n".join(parts)
