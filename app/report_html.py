"""The report as a safe HTML fragment: raw HTML escaped, and only its references as links."""

import asyncio
import contextlib
import hashlib
import html
import json
import multiprocessing
import re
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from functools import cache
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.token import Token
from mdit_py_plugins.footnote import footnote_plugin

from engines.report_markdown import split_front_matter

# A References heading with nothing under it (the report cites nothing).
_EMPTY_REFERENCES = re.compile(r"^#{1,6}\s*References\s*\Z", re.MULTILINE)


def _one_caption_per_source(
    self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any
) -> str:
    """Render `[1]` for every citation of source 1 (the plugin numbers repeats `[1:1]`, `[1:2]`)."""
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
    """Return the `key: value` pairs of our front matter (strings there are JSON-quoted)."""
    rows = []
    for line in front.strip().strip("-").strip().splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            continue
        text = value.strip()
        with contextlib.suppress(ValueError):
            parsed = json.loads(text)
            text = parsed if isinstance(parsed, str) else text
        rows.append((key.strip(), text))
    return rows


def _summary(rows: dict[str, str]) -> str:
    """Return one line: the status, then sources, review score and engine."""
    status = html.escape(rows.get("status", ""))
    parts = (
        [f'<span class="report-status" data-status="{status}">{status}</span>'] if status else []
    )
    shown = {"sources": "{} sources", "review_score": "review score {}", "engine": "{}"}
    parts += [form.format(html.escape(rows[key])) for key, form in shown.items() if key in rows]
    return f'<p class="report-summary">{" · ".join(parts)}</p>'


def _only_references_link(tokens: list[Token]) -> list[Token]:
    """Return `tokens` with links outside the footnotes' definitions, and images, made text."""
    in_footnote = False
    for token in tokens:
        if token.type in ("footnote_open", "footnote_close"):
            in_footnote = token.type == "footnote_open"
        if token.type != "inline" or not token.children:
            continue
        kept: list[Token] = []
        for child in token.children:
            if child.type == "image":
                kept.append(Token("text", "", 0, content=child.content))
            elif child.type in ("link_open", "link_close") and not in_footnote:
                continue  # its text stays
            else:
                kept.append(child)
        token.children = kept
    return tokens


def report_html(markdown: str) -> str:
    """Return an HTML fragment: a one-line summary, the front matter folded, then the report."""
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
    md = _renderer()
    env: dict[str, Any] = {}
    rendered = md.renderer.render(_only_references_link(md.parse(body, env)), md.options, env)
    # External links (http and https) open apart and send no referrer; footnote links stay.
    parts.append(
        rendered.replace('<a href="http', '<a rel="noopener noreferrer" target="_blank" href="http')
    )
    return "\n".join(parts)


class RenderedReports:
    """Reports rendered as HTML in a process of their own, each once, the latest few kept.

    Not in a thread: a render holds the GIL, and the event loop would wait for it. A
    request for a report already being rendered waits for that render.
    """

    def __init__(self, kept: int = 32, render: Callable[[str], str] = report_html) -> None:
        self._kept = kept
        self._render = render  # a module's function: it is sent to the renderer by name
        self._renderer = _renderer_process()
        self._rendered: OrderedDict[str, asyncio.Future[str]] = OrderedDict()

    async def html(self, markdown: str) -> str:
        """Return `render(markdown)`, done in the renderer's process or found kept."""
        key = hashlib.sha256(markdown.encode()).hexdigest()
        rendered = self._rendered.get(key)
        if rendered is None:
            rendered = asyncio.ensure_future(self._rendering(markdown))
            self._rendered[key] = rendered
            while len(self._rendered) > self._kept:
                self._rendered.popitem(last=False)
        else:
            self._rendered.move_to_end(key)
        try:
            return await asyncio.shield(rendered)
        except Exception:
            self._rendered.pop(key, None)  # not kept: the next request tries again
            raise

    async def _rendering(self, markdown: str) -> str:
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._renderer, self._render, markdown)
        except BrokenProcessPool:  # the process died (killed, out of memory): a new one
            self._renderer = _renderer_process()
            return await loop.run_in_executor(self._renderer, self._render, markdown)

    def close(self) -> None:
        """Stop the renderer's process (a render under way finishes)."""
        self._renderer.shutdown(wait=False, cancel_futures=True)


def _renderer_process() -> ProcessPoolExecutor:
    """Return one process, started at the first render; spawned (forking a threaded server is not safe)."""
    return ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
