"""Main-text extraction from HTML: the article, its title, date and language, nothing else.

trafilatura does the work; around it, a dropped standfirst is put back, boilerplate lines
go, and a page without an article still yields its visible text. No network here.
"""

from __future__ import annotations

import codecs
import re
from contextlib import suppress
from copy import copy
from typing import Any

from bs4 import Tag
from lxml import etree
from lxml.html import (
    HtmlComment,
    HtmlElement,
    HtmlEntity,
    HtmlProcessingInstruction,
    document_fromstring,
)
from pydantic import BaseModel

from tools.boilerplate import drop_boilerplate
from tools.page_metadata import (
    DATE_META,
    canonical_url,
    head_soup,
    json_ld_date,
    language,
    meta_content,
)
from tools.standfirst import norm, standfirst, strip_soft_hyphens


class Page(BaseModel):
    """A page as the researcher reads it."""

    url: str
    final_url: str
    title: str
    text: str
    published_date: str | None = None
    language: str | None = None


_DECLARED_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.I)
# what browsers do with these labels (WHATWG encoding standard)
_CHARSET_ALIASES = {
    "iso-8859-1": "cp1252",
    "iso8859-1": "cp1252",
    "latin1": "cp1252",
    "latin-1": "cp1252",
    "us-ascii": "cp1252",
    "ascii": "cp1252",
    "gb2312": "gb18030",
    "gbk": "gb18030",
}

# lxml parses the page once and trafilatura works on (a copy of) that tree. Every element
# is a plain HtmlElement: lxml.html's own per-element class lookup is a Python callback
# that trafilatura's many passes over the tree would pay for again and again.
_PARSER = etree.HTMLParser(
    collect_ids=False,
    default_doctype=False,
    remove_comments=True,
    remove_pis=True,
    encoding="utf-8",
)
_PARSER.set_element_class_lookup(
    etree.ElementDefaultClassLookup(
        element=HtmlElement,
        comment=HtmlComment,
        pi=HtmlProcessingInstruction,
        entity=HtmlEntity,
    )
)


def _decode(raw: bytes) -> str:
    """Decode page bytes: BOM, else UTF-8 if valid, else the declared charset, else cp1252.

    Valid UTF-8 wins over a declared charset because pages that say iso-8859-1 while
    sending UTF-8 are common, and real single-byte text is almost never valid UTF-8.
    """
    for bom, codec in (
        (codecs.BOM_UTF8, "utf-8"),
        (codecs.BOM_UTF16_LE, "utf-16-le"),
        (codecs.BOM_UTF16_BE, "utf-16-be"),
    ):
        if raw.startswith(bom):
            return raw[len(bom) :].decode(codec, "replace")
    with suppress(UnicodeDecodeError):
        return raw.decode("utf-8")
    match = _DECLARED_CHARSET.search(raw[:4096])
    if match:
        label = match.group(1).decode("ascii").lower()
        with suppress(LookupError):  # a charset Python does not know
            return raw.decode(_CHARSET_ALIASES.get(label, label), "replace")
    return raw.decode("cp1252", "replace")


def _parse(doc: str) -> Any:
    """Parse a document into an lxml tree, or None when there is nothing to parse."""
    try:
        # bytes with a fixed encoding: a str carrying an XML encoding declaration is refused
        tree = document_fromstring(doc.encode("utf-8", "replace"), parser=_PARSER)
    except (etree.ParserError, ValueError):
        return None
    _drop_inert(tree)
    return tree


def _drop_inert(tree: Any) -> None:
    """Remove what no extractor reads, so that trafilatura copies and walks a smaller tree.

    JSON-LD stays: it carries the publication date, and trafilatura reads it to tell a
    forum thread (whose comments are the content) from an article.
    """
    head = tree.find("head")
    for element in list(head if head is not None else ()):
        if not _is_json_ld(element):
            head.remove(element)
    for script in list(tree.iter("script")):
        if not _is_json_ld(script):
            script.drop_tree()
    etree.strip_elements(tree, "style", "noscript", "svg", "template", with_tail=False)


def _is_json_ld(element: Any) -> bool:
    return bool(element.tag == "script" and element.get("type") == "application/ld+json")


_BLOCK_TAGS = frozenset(
    "address article aside blockquote body br dd div dl dt figcaption figure footer h1 h2 h3 h4 "
    "h5 h6 header hr li main nav ol p pre section table td th tr ul".split()
)
# scripts, styles and the like are gone already (_drop_inert)
_INVISIBLE = ("nav", "header", "footer", "aside", "form", "iframe", "button", "select")
_MIN_TEXT = 250  # trafilatura's own MIN_EXTRACTED_SIZE


def _visible_text(tree: Any) -> str:
    """Return the text a reader sees outside navigation and page chrome, one block a line."""
    body = tree.find("body")
    root = copy(body if body is not None else tree)
    for element in list(root.iter(*_INVISIBLE)):
        element.drop_tree()
    parts: list[str] = []
    _collect(root, parts)
    lines = (norm(line) for line in "".join(parts).split("\n"))
    return "\n".join(line for line in lines if line)


def _collect(element: Any, parts: list[str]) -> None:
    block = element.tag in _BLOCK_TAGS
    if block:
        parts.append("\n")
    if element.text:
        parts.append(element.text)
    for child in element:
        if isinstance(child.tag, str):
            _collect(child, parts)
        if child.tail:
            parts.append(child.tail)
    if block:
        parts.append("\n")


def _body_text(tree: Any, url: str | None) -> str:
    """Extract the article body with trafilatura, falling back when it finds next to nothing."""
    # Imported on the first page read, not with the module: every process that may read a
    # page (the service, a worker, the terminal's run) imports this module, and trafilatura
    # takes a quarter of a second to load; a run on the local corpus reads none.
    import trafilatura

    options: dict[str, Any] = {
        "url": url,
        "include_comments": False,
        "include_tables": True,
        "include_formatting": False,
    }
    text: str = trafilatura.extract(tree, **options) or ""
    if len(text) < _MIN_TEXT:
        # recall mode keeps containers that balanced mode drops wholesale (a content div
        # nested in a mislabelled menu, say); only worth its cost on a near-empty result
        recall: str = trafilatura.extract(tree, favor_recall=True, **options) or ""
        if len(recall) > len(text):
            text = recall
    return text or _visible_text(tree)


_BLANKS = re.compile(r"\n{3,}")


def extract_main_text(html: str | bytes, url: str | None = None) -> Page:
    """Extract the main text and metadata of one HTML document."""
    doc = html if isinstance(html, str) else _decode(html)
    soup = head_soup(doc)
    title_tag = soup.find("title")
    title_text = norm(title_tag.get_text(" ")) if isinstance(title_tag, Tag) else ""
    og_title = meta_content(soup, "og:title")
    title = og_title or title_text
    final = canonical_url(soup, url) or url
    published = meta_content(soup, *DATE_META)
    tree = _parse(doc)
    text = ""
    if tree is not None:
        if not title:
            heading = tree.find(".//h1")
            title = norm(heading.text_content()) if heading is not None else ""
        published = published or json_ld_date(tree)
        text = drop_boilerplate(_body_text(tree, url))
        lead = standfirst(tree, f"{title} {title_text}", strip_soft_hyphens(norm(text)))
        if lead:
            text = f"{lead}\n{text}"
    return Page(
        url=url or final or "",
        final_url=final or "",
        title=title,
        text=_BLANKS.sub("\n\n", text).strip(),
        published_date=published,
        language=language(soup),
    )
