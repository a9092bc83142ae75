"""Put back the standfirst that trafilatura drops: the lead between headline and body.

Only a lead inside the article's `<header>` or marked by a class or id word (lead, teaser...)
is restored; bylines, dates, captions, bios, link-heavy blocks and body text are refused.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from typing import Any

_WS = re.compile(r"\s+")
_TOKEN_SPLIT = re.compile(r"[\s_-]+|(?<=[a-z])(?=[A-Z])")
_TITLE_WORD = re.compile(r"\w{4,}")
# class/id words that mark a standfirst in one CMS or another
_LEAD_TOKENS = frozenset(
    "lead lede intro standfirst chapo summary excerpt abstract subtitle subheadline subhead "
    "teaser dek deck sapo bajada entradilla copete strapline".split()
)
_SKIP_TOKENS = frozenset(
    "byline author bio date time meta metadata info details credit caption breadcrumb tags "
    "share social related nav menu site".split()
)
# a block inside one of these (below the headline's own ancestors) is not the standfirst
_SKIP_ANCESTOR_TOKENS = frozenset(
    "byline author bio credit caption share social related nav menu breadcrumb comment "
    "comments".split()
)
_NOT_INSIDE = frozenset(
    "nav aside footer figure figcaption form a button li blockquote table".split()
)
_LEAD_TAGS = frozenset("p h2 div span section strong b".split())
_BYLINE = re.compile(r"^(?:by|von|por|par|di|door|av|af|przez|written by|autor|author)\b", re.I)
_DATEISH = re.compile(r"\d{1,2}[./-]\d{1,2}[./-]\d{2,4}|\d{4}-\d{2}-\d{2}|\b\d{1,2}:\d{2}\b")
_SENTENCE_END = (".", "!", "?", "…", '"', "“", "”", "»", "«")
_SCAN_LIMIT = 300
_SAME_START = 60


def norm(text: str) -> str:
    """Collapse whitespace runs to one space."""
    return _WS.sub(" ", text).strip()


def _tokens(element: Any) -> set[str]:
    attrs = f"{element.get('class', '')} {element.get('id', '')}"
    return {token.lower() for token in _TOKEN_SPLIT.split(attrs) if token}


def _headline(tree: Any, title: str) -> Any:
    """Find the article's headline: the h1 (or h2) sharing the most words with the title."""
    h1s = list(tree.iter("h1"))[:8]
    title_words = {word.lower()[:5] for word in _TITLE_WORD.findall(title)}
    best, best_score = None, 1
    for heading in h1s + list(tree.iter("h2"))[:8]:
        words = {word.lower()[:5] for word in _TITLE_WORD.findall(heading.text_content())}
        score = len(words & title_words)
        if score > best_score:
            best, best_score = heading, score
    if best is None and len(h1s) == 1:
        return h1s[0]
    return best


def _following(start: Any) -> Iterator[Any]:
    """Yield the elements after `start` in document order, its own subtree excluded."""
    seen = 0
    node = start
    while node is not None:
        for sibling in node.itersiblings():
            for element in sibling.iter():
                yield element
                seen += 1
                if seen >= _SCAN_LIMIT:
                    return
        node = node.getparent()


def _in_skipped_block(element: Any, headline_ancestors: set[Any]) -> bool:
    for ancestor in element.iterancestors():
        if ancestor in headline_ancestors:
            return False
        if ancestor.tag in _NOT_INSIDE or _tokens(ancestor) & _SKIP_ANCESTOR_TOKENS:
            return True
    return False


def standfirst(tree: Any, title: str, body: str) -> str | None:
    """Return the lead paragraph between headline and body when the body lacks it."""
    headline = _headline(tree, title)
    if headline is None:
        return None
    headline_text = norm(headline.text_content())
    header = next(headline.iterancestors("header", "hgroup"), None)
    headline_ancestors = set(headline.iterancestors())
    for element in _following(headline):
        if element.tag not in _LEAD_TAGS:
            continue
        tokens = _tokens(element)
        marked = bool(tokens & _LEAD_TOKENS)
        in_header = (
            header is not None
            and element.tag in ("p", "h2", "div")
            and any(ancestor is header for ancestor in element.iterancestors())
        )
        if not marked and not in_header:
            if element.tag == "p" and len(norm(element.text_content())) >= 40:
                return None  # the body has begun
            continue
        if tokens & _SKIP_TOKENS:
            continue
        text = norm(element.text_content())
        if (
            not 40 <= len(text) <= 1500
            or text.count(" ") < 5
            or headline_text in text
            or text in headline_text
            or "{" in text  # script text that broken markup left outside its <script>
            or _BYLINE.match(text)
            or (len(text) < 120 and _DATEISH.search(text))
            or (not marked and not text.endswith(_SENTENCE_END))
            or _in_skipped_block(element, headline_ancestors)
        ):
            continue
        linked = sum(len(norm(link.text_content())) for link in element.iter("a"))
        if linked > len(text) / 2:
            continue
        text = unicodedata.normalize("NFC", text)
        # a summary box often repeats the first paragraph, cut short or lightly edited
        return None if strip_soft_hyphens(text)[:_SAME_START] in body else text
    return None


def strip_soft_hyphens(text: str) -> str:
    """Remove soft hyphens, which hide a word from a plain text search."""
    return text.replace("\xad", "")
