"""Reading a report's Markdown: its front matter, sections, footnotes and cited claims.

The review, the finalizer and the views all read reports this way, whoever wrote them.
"""

import re
from collections.abc import Sequence

from core.markdown import plain_text
from core.models import SearchResult
from core.urls import normalize_url
from engines.sentences import split_sentences
from tools.text import stems

# Where a report lists the points its sources do not address.
GAPS_SECTION = "Open Questions"

FOOTNOTE_REF = re.compile(r"\[\^(\d+)\](?!:)")
# A definition starts a line (`_footnote_definitions`): no `^` here, so that the search
# jumps from one "[^" to the next instead of trying every position of the text.
_FOOTNOTE_DEF = re.compile(r"\[\^(\d+)\]:\s*(.+)$", re.MULTILINE)
# A definition's URL: the destination of the link that ends it (which may hold balanced
# parentheses, and whose text may hold anything), an autolink that starts it, or a bare URL.
_LINK_URLS = (
    re.compile(r"\]\(((?:https?|file|collection)://(?:[^()\s]|\([^()\s]*\))+)\)\s*$"),
    re.compile(r"^<([^>]+)>"),
    re.compile(r"((?:https?|file|collection)://\S+)"),
)
_CLAIM_END = re.compile(r"((?:\[\^\d+\])+)")
_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*$", re.MULTILINE)
LABEL = re.compile(r"\*\*(.+?)\*\*")
_BULLET = re.compile(r"^(?:[-*+]|\d+[.)])\s+")
_LEADLABEL = re.compile(r"^\*\*.+?\*\*:?\s*")


def split_front_matter(markdown: str) -> tuple[str, str]:
    """Return (front matter, body); front matter is '' when absent."""
    if markdown.startswith("---\n"):
        end = markdown.find("\n---\n", 4)
        if end != -1:
            return markdown[: end + 5], markdown[end + 5 :].lstrip("\n")
    return "", markdown


def sections(body: str) -> dict[str, str]:
    """Map each heading's text to the text under it, up to the next heading of any level."""
    found: dict[str, str] = {}
    matches = list(_HEADING.finditer(body))
    for i, match in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(body)
        found[plain_text(match.group(2).strip())] = body[match.end() : end]
    return found


def has_gaps(markdown: str) -> bool:
    """Say whether the report lists the points its sources did not address (Open Questions)."""
    return any(
        line.startswith("#") and line.lstrip("#").strip() == GAPS_SECTION
        for line in markdown.splitlines()
    )


def cites_anything(markdown: str) -> bool:
    """Return True when the report's body cites at least one source."""
    _, body = split_front_matter(markdown)
    return FOOTNOTE_REF.search(body) is not None


def _footnote_definitions(text: str) -> list[re.Match[str]]:
    """Return the footnote definitions (`[^N]: ...` at the start of a line), in order.

    What `^` in multiline mode would find, but much faster: a match that does not start a
    line is skipped and the search resumes just after its start, hiding no later one.
    """
    found: list[re.Match[str]] = []
    position = 0
    while (match := _FOOTNOTE_DEF.search(text, position)) is not None:
        start = match.start()
        if start == 0 or text[start - 1] == "\n":
            found.append(match)
            position = match.end()
        else:
            position = start + 1
    return found


def footnote_urls(body: str) -> dict[int, str]:
    """Map footnote numbers to the URL their definition names."""
    return _urls_of(_footnote_definitions(body))


def _urls_of(definitions: list[re.Match[str]]) -> dict[int, str]:
    urls: dict[int, str] = {}
    for number, text in (m.groups() for m in definitions):
        found = (pattern.search(text.strip()) for pattern in _LINK_URLS)
        match = next((m for m in found if m is not None), None)
        if match:
            urls[int(number)] = match.group(1)
    return urls


def strip_unknown_footnotes(draft: str, sources: Sequence[SearchResult]) -> tuple[str, list[int]]:
    """Remove footnotes that name no collected source (or are never defined); return their numbers.

    A model may invent a source or a number: such a footnote must not survive into the report.
    """
    known = {normalize_url(s.url) for s in sources}
    found = _footnote_definitions(draft)
    definitions = _urls_of(found)
    used = {int(n) for n in FOOTNOTE_REF.findall(draft)}
    defined = {int(m.group(1)) for m in found}
    unknown = sorted(
        {n for n, url in definitions.items() if normalize_url(url) not in known}
        | (used - defined)
        | (defined - set(definitions))  # a definition that names no URL at all
    )
    if not unknown:
        return draft, []
    wanted = {str(n) for n in unknown}
    cleaned = re.sub(
        r"^\[\^(\d+)\]:.*(?:\n|$)",
        lambda m: "" if m.group(1) in wanted else m.group(0),
        draft,
        flags=re.MULTILINE,
    )
    cleaned = FOOTNOTE_REF.sub(lambda m: "" if m.group(1) in wanted else m.group(0), cleaned)
    return cleaned, unknown


def cited_sentences(body: str) -> list[tuple[str, list[int]]]:
    """Return the prose's sentences (references excluded) with the footnotes each cites."""
    pieces, end = [], 0
    for match in _footnote_definitions(body):
        pieces.append(body[end : match.start()])
        end = match.end()
    prose = "".join(pieces) + body[end:]
    result: list[tuple[str, list[int]]] = []
    in_gaps = False
    for line in prose.splitlines():
        text = line.strip()
        if text.startswith("#"):
            # The open questions name what is not known: no claim there.
            in_gaps = text.lstrip("#").strip() == GAPS_SECTION
        if in_gaps:
            continue
        # Headings, quotes and italic editorial notes make no claim about the world.
        if not text or text.startswith(("#", ">")) or (text.startswith("_") and text.endswith("_")):
            continue
        text = _LEADLABEL.sub("", _BULLET.sub("", text)).strip()
        # A run of footnotes closes a claim; earlier sentences in the same run are uncited.
        parts = _CLAIM_END.split(text)
        for piece, marks in zip(parts[::2], [*parts[1::2], ""], strict=True):
            refs = [int(n) for n in FOOTNOTE_REF.findall(marks)]
            sentences = split_sentences(piece)
            for i, sentence in enumerate(sentences):
                if len(stems(sentence)) >= 3:
                    result.append((sentence.strip(), refs if i == len(sentences) - 1 else []))
    return result
