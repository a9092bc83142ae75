"""Main-text extraction from HTML: the article, its title, date and language, nothing else.

Pure (no network): `extract_main_text(html, url)` is what the scraper calls on every
page it fetches, off the event loop. Metadata come from the document head with
BeautifulSoup; the body text from trafilatura, with a plain-text fallback.
"""

from __future__ import annotations

import re

import trafilatura
from bs4 import BeautifulSoup
from pydantic import BaseModel

_BLANKS = re.compile(r"\n{3,}")


class Page(BaseModel):
    """A page as the researcher reads it."""

    url: str
    final_url: str
    title: str
    text: str
    published_date: str | None = None
    language: str | None = None


def _meta(soup: BeautifulSoup, *names: str) -> str | None:
    for name in names:
        tag = soup.find("meta", attrs={"property": name}) or soup.find("meta", attrs={"name": name})
        content = tag.get("content") if tag else None
        if isinstance(content, str) and content.strip():
            return content.strip()
    return None


def extract_main_text(html: str | bytes, url: str | None = None) -> Page:
    """Extract the main text and metadata of one HTML document."""
    soup = BeautifulSoup(html, "lxml")
    title_tag = soup.find("title")
    title = _meta(soup, "og:title") or (title_tag.get_text(" ", strip=True) if title_tag else "")
    canonical = soup.find("link", rel="canonical")
    href = canonical.get("href") if canonical else None
    html_tag = soup.find("html")
    language = html_tag.get("lang") if html_tag else None
    published = _meta(soup, "article:published_time", "date", "dc.date", "DC.date.issued")
    text = trafilatura.extract(
        html if isinstance(html, str) else html.decode("utf-8", "replace"),
        url=url,
        include_comments=False,
        include_tables=True,
        include_formatting=False,
    )
    if not text:
        body = soup.body or soup
        for tag in body(
            ["script", "style", "noscript", "nav", "header", "footer", "aside", "form"]
        ):
            tag.decompose()
        text = body.get_text("\n", strip=True)
    final = str(href) if isinstance(href, str) and href.startswith(("http://", "https://")) else url
    return Page(
        url=url or final or "",
        final_url=final or "",
        title=title or "",
        text=_BLANKS.sub("\n\n", text).strip(),
        published_date=published,
        language=str(language).split("-")[0].lower()
        if isinstance(language, str) and language
        else None,
    )
