"""Page metadata from the document head: title, canonical URL, language, publication date."""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import urljoin

from bs4 import BeautifulSoup, Tag

_HEAD_END = re.compile(r"</head\s*>|<body[\s>]", re.I)
_HEAD_TAGS = re.compile(
    r"<html\b[^>]*>|<title\b[^>]*>.*?</title\s*>|<(?:meta|link)\b[^>]*>", re.I | re.S
)
# BeautifulSoup gets only the tags that can carry what we read: a whole head, with its
# scripts and dozens of icon and tracking tags, costs it more than the rest of a page's work
_WANTED_TAG = re.compile(
    r"<html|<title|og:(?:title|url|locale)|date|publish|content-language|canonical", re.I
)
DATE_META = tuple(
    "article:published_time og:published_time datePublished pubdate publishdate publish-date "
    "date dc.date DC.date.issued dcterms.created parsely-pub-date sailthru.date".split()
)
_LANG = re.compile(r"[A-Za-z]{2,3}(?=$|[-_])")


def head_soup(doc: str) -> BeautifulSoup:
    """Parse just the metadata-bearing tags of the document head."""
    end = _HEAD_END.search(doc)
    head = doc[: end.start()] if end else doc
    tags = (tag for tag in _HEAD_TAGS.findall(head) if _WANTED_TAG.search(tag))
    return BeautifulSoup("".join(tags), "lxml")


def _attr(tag: object, name: str) -> str | None:
    """Return a tag's attribute stripped; None when it is blank, or `tag` is no tag."""
    value = tag.get(name) if isinstance(tag, Tag) else None
    return (value.strip() or None) if isinstance(value, str) else None


def meta_content(soup: BeautifulSoup, *names: str) -> str | None:
    """Return the content of the first of `names` present as a meta name or property."""
    wanted = {name.lower() for name in names}
    found: dict[str, str] = {}
    for tag in soup.find_all("meta"):
        key = _attr(tag, "property") or _attr(tag, "name") or _attr(tag, "itemprop")
        content = _attr(tag, "content")
        if key and content and key.lower() in wanted:
            found.setdefault(key.lower(), content)
    return next((found[name.lower()] for name in names if name.lower() in found), None)


def language(soup: BeautifulSoup) -> str | None:
    """Return the page language as a short code ("de-DE" -> "de"), when declared."""
    raw = _attr(soup.find("html"), "lang")
    if raw is None:
        equiv = soup.find("meta", attrs={"http-equiv": re.compile("^content-language$", re.I)})
        raw = _attr(equiv, "content")
    raw = raw or meta_content(soup, "og:locale")
    match = _LANG.match(raw) if raw else None
    return match.group(0).lower() if match else None


def canonical_url(soup: BeautifulSoup, url: str | None) -> str | None:
    """Return the canonical link (made absolute against `url`), else og:url."""
    href = _attr(soup.find("link", rel="canonical"), "href") or meta_content(soup, "og:url")
    if not href:
        return None
    absolute = urljoin(url or "", href)
    return absolute if absolute.startswith(("http://", "https://")) else None


def json_ld_date(tree: Any) -> str | None:
    """Find datePublished in the page's JSON-LD, wherever the script sits."""
    for script in tree.iterfind(".//script[@type='application/ld+json']"):
        if not script.text or "datePublished" not in script.text:
            continue
        try:
            data = json.loads(script.text)
        except ValueError:
            continue
        date = _find_key(data, "datePublished")
        if date:
            return date
    return None


def _find_key(data: object, key: str) -> str | None:
    if isinstance(data, dict):
        value = data.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
        data = list(data.values())
    if isinstance(data, list):
        return next(filter(None, (_find_key(item, key) for item in data)), None)
    return None
