"""The report as safe HTML: raw HTML escaped, and only its references as links.

As a fragment (the web page shows it) or as a whole document (a download, and what the
PDF is printed from): the document holds its own style, its title and its language's
direction, and nothing runs in it.
"""

import asyncio
import base64
import contextlib
import hashlib
import html
import json
import multiprocessing
import re
import unicodedata
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from functools import cache
from typing import Any, TypeVar

from markdown_it import MarkdownIt
from markdown_it.token import Token
from mdit_py_plugins.footnote import footnote_plugin

from engines.report_markdown import split_front_matter

T = TypeVar("T")

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


_SHOWN = {"sources": "{} sources", "review_score": "review score {}", "engine": "{}"}


def _summary(rows: dict[str, str]) -> str:
    """Return one line: the status, then sources, review score and engine."""
    status = html.escape(rows.get("status", ""))
    parts = (
        [f'<span class="report-status" data-status="{status}">{status}</span>'] if status else []
    )
    parts += [form.format(html.escape(rows[key])) for key, form in _SHOWN.items() if key in rows]
    return f'<p class="report-summary" dir="ltr">{" · ".join(parts)}</p>'


def summary_text(rows: dict[str, str]) -> str:
    """Return `_summary`'s line as plain text (a Word file's)."""
    parts = [rows["status"]] if rows.get("status") else []
    return " · ".join(parts + [form.format(rows[k]) for k, form in _SHOWN.items() if k in rows])


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


@dataclass
class ParsedReport:
    """A report read once: its front matter, its body's tokens, its title and script."""

    rows: list[tuple[str, str]]
    tokens: list[Token]
    env: dict[str, Any]
    title: str
    language: str | None
    direction: str

    @property
    def summary(self) -> str:
        """Return the summary line as plain text ("" without front matter)."""
        return summary_text(dict(self.rows)) if self.rows else ""


def parsed_report(markdown: str) -> ParsedReport:
    """Return the report parsed: links outside the references and images made text.

    The title is the text of the first level-1 heading, else the front matter's topic;
    the language and direction are those of the title's script.
    """
    front, body = split_front_matter(markdown)
    rows = _front_matter_rows(front) if front else []
    body = _EMPTY_REFERENCES.sub("", body.rstrip())
    env: dict[str, Any] = {}
    tokens = _only_references_link(_renderer().parse(body, env))
    title = _title(tokens) or dict(rows).get("topic", "") or "Research report"
    language, direction = language_and_direction(title)
    return ParsedReport(rows, tokens, env, title, language, direction)


def _report_parts(markdown: str, document: bool = False) -> tuple[list[str], ParsedReport]:
    """Return the summary and front matter's HTML, then the report's, and the report parsed.

    For a `document` the title (and what comes before it) goes first, and each
    paragraph, heading, item and cell is marked with the direction of its first letter
    that has one (what `dir="auto"` does in a browser, which the PDF renderer does not
    do): a right-to-left line in a left-to-right report (or the other way) reads as written.
    """
    report = parsed_report(markdown)
    parts = []
    if report.rows:
        parts.append(_summary(dict(report.rows)))
        items = "".join(
            f"<dt>{html.escape(key)}</dt><dd>{html.escape(value)}</dd>"
            for key, value in report.rows
        )
        parts.append(
            '<details class="report-details" dir="ltr"><summary>How this report was made</summary>'
            f'<dl class="report-meta">{items}</dl></details>'
        )
    tokens, head = report.tokens, 0
    if document:
        for at, token in enumerate(tokens):
            if token.type in _BLOCKS_WITH_TEXT:
                text = next((t.content for t in tokens[at + 1 :] if t.type == "inline"), "")
                token.attrSet("dir", language_and_direction(text)[1])
        head = next(
            (at + 1 for at, t in enumerate(tokens) if t.type == "heading_close" and t.tag == "h1"),
            0,
        )
    md = _renderer()
    rendered = [
        md.renderer.render(part, md.options, report.env) for part in (tokens[:head], tokens[head:])
    ]
    # External links (http and https) open apart and send no referrer; footnote links stay.
    opened = [
        r.replace('<a href="http', '<a rel="noopener noreferrer" target="_blank" href="http')
        for r in rendered
    ]
    return [p for p in [opened[0], *parts, opened[1]] if p], report


_BLOCKS_WITH_TEXT = {"paragraph_open", "heading_open", "list_item_open", "th_open", "td_open"}


def _title(tokens: list[Token]) -> str:
    """Return the text of the first level-1 heading ("" when there is none)."""
    for at, token in enumerate(tokens[:-1]):
        if token.type == "heading_open" and token.tag == "h1":
            children = tokens[at + 1].children or []
            return "".join(c.content for c in children if c.type in ("text", "code_inline"))
    return ""


def report_html(markdown: str) -> str:
    """Return an HTML fragment: a one-line summary, the front matter folded, then the report."""
    return "\n".join(_report_parts(markdown)[0])


# By the first letters of a script found in a title: the language it most likely is. A
# title in Latin (or another script shared by many languages) names none.
_SCRIPT_LANGUAGES = [
    ("ARABIC", "ar"),
    ("HEBREW", "he"),
    ("HIRAGANA", "ja"),
    ("KATAKANA", "ja"),
    ("HANGUL", "ko"),
    ("CJK UNIFIED IDEOGRAPH", "zh"),
    ("THAI", "th"),
    ("GREEK", "el"),
    ("CYRILLIC", "ru"),
    ("DEVANAGARI", "hi"),
]


def language_and_direction(text: str) -> tuple[str | None, str]:
    """Return the language `text`'s script suggests (None: no telling) and its direction.

    The direction is that of the first letter with one (Unicode's bidirectional class);
    the language is Japanese when kana is found anywhere, else that of the first script
    in `_SCRIPT_LANGUAGES` found (Chinese for ideographs alone).
    """
    direction = next(
        (
            "rtl" if kind in ("R", "AL") else "ltr"
            for kind in map(unicodedata.bidirectional, text)
            if kind in ("L", "R", "AL")
        ),
        "ltr",
    )
    names = [unicodedata.name(c, "") for c in text if c.isalpha()]
    if any(n.startswith(("HIRAGANA", "KATAKANA")) for n in names):
        return "ja", direction
    for name in names:
        for prefix, language in _SCRIPT_LANGUAGES:
            if name.startswith(prefix):
                return language, direction
    return None, direction


DOCUMENT_STYLE = """
body { font-family: "DejaVu Sans", "WenQuanYi Micro Hei", "Noto Sans CJK SC", sans-serif;
  line-height: 1.5; max-width: 46em; margin: 2em auto; padding: 0 1em; color: #1b1b1b; }
h1 { font-size: 1.7em; margin-bottom: 0.2em; }
h2 { font-size: 1.3em; margin-top: 1.6em; border-bottom: 1px solid #ccc; }
h3 { font-size: 1.1em; }
.report-summary { color: #555; margin-top: 0; }
.report-details summary { color: #555; }
.report-meta { display: grid; grid-template-columns: max-content auto; gap: 0 1em; }
.report-meta dt { font-weight: bold; }
.report-meta dd { margin: 0; }
table { border-collapse: collapse; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.5em; }
.footnote-ref a, .footnote-backref { text-decoration: none; }
.footnotes-sep { display: none; }
.footnote-item a[href^="http"]::after { content: " " attr(href); color: #555;
  word-break: break-all; }
@page { size: A4; margin: 2cm; }
@media print { body { margin: 0; max-width: none; } .footnote-backref, .report-details {
  display: none; } }
""".strip()

# The document's policy: its own style (by hash) and nothing else: no script, no fetch.
DOCUMENT_POLICY = (
    "default-src 'none'; style-src 'sha256-"
    + base64.b64encode(hashlib.sha256(DOCUMENT_STYLE.encode()).digest()).decode()
    + "'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)


def report_document(markdown: str) -> str:
    """Return the report as a whole HTML document: title, summary, sections, references.

    The footnote marks link to the references, whose URLs show after their titles (a
    printed copy keeps them). `lang` and `dir` follow the title's script.
    """
    parts, report = _report_parts(markdown, document=True)
    title, language, direction = report.title, report.language, report.direction
    lang = f' lang="{language}"' if language else ""
    return (
        f'<!DOCTYPE html>\n<html{lang} dir="{direction}">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{html.escape(title)}</title>\n<style>{DOCUMENT_STYLE}</style>\n</head>\n"
        '<body>\n<article class="report">\n' + "\n".join(parts) + "\n</article>\n</body>\n</html>\n"
    )


class RenderedReports:
    """Reports rendered as HTML in a process of their own, each once, the latest few kept.

    Not in a thread: a render holds the GIL, and the event loop would wait for it. A
    request for a report already being rendered waits for that render.
    """

    def __init__(self, kept: int = 32, render: Callable[[str], str] = report_html) -> None:
        self._kept = kept
        self._render = render  # a module's function: it is sent to the renderer by name
        self._renderer = _renderer_process()
        self._rendered: OrderedDict[str, asyncio.Future[Any]] = OrderedDict()

    async def html(self, markdown: str) -> str:
        """Return the fragment (`render(markdown)`), done in the renderer's process or found kept."""
        return await self.rendered(self._render, markdown)

    async def rendered(self, render: Callable[[str], T], markdown: str) -> T:
        """Return `render(markdown)`, done in the renderer's process or found kept.

        `render` is a module's function (sent to the process by name): the fragment, the
        HTML document, the Word or the PDF file.
        """
        key = f"{render.__module__}.{render.__qualname__} {hashlib.sha256(markdown.encode()).hexdigest()}"
        rendered = self._rendered.get(key)
        if rendered is None:
            rendered = asyncio.ensure_future(self._rendering(render, markdown))
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

    async def _rendering(self, render: Callable[[str], T], markdown: str) -> T:
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._renderer, render, markdown)
        except BrokenProcessPool:  # the process died (killed, out of memory): a new one
            self._renderer = _renderer_process()
            return await loop.run_in_executor(self._renderer, render, markdown)

    def close(self) -> None:
        """Stop the renderer's process (a render under way finishes)."""
        self._renderer.shutdown(wait=False, cancel_futures=True)


def _renderer_process() -> ProcessPoolExecutor:
    """Return one process, started at the first render; spawned (forking a threaded server is not safe)."""
    return ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
