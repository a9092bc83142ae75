"""The formats `GET /v1/research/{id}/report` answers in, and which one a request's `Accept` picks.

The header's media ranges are weighed as RFC 9110 says: each format takes the `q` of the
most specific range that matches it (a `profile` parameter, then the type, then `type/*`,
then `*/*`); the highest `q` above 0 wins, ties going to the range listed first, then to
the format listed first here. No `Accept` (or `*/*`) is Markdown, as it always was.
"""

from collections.abc import Callable
from dataclasses import dataclass, replace

from app.report_docx import report_docx
from app.report_html import report_document
from app.report_pdf import report_pdf
from service.errors import NotAcceptable


@dataclass(frozen=True)
class ReportFormat:
    """One way the report can be answered."""

    name: str
    media_type: str  # the answer's Content-Type, without its charset
    profile: str | None = None  # matched only by a range naming it (`text/html; profile=...`)

    @property
    def offered_as(self) -> str:
        """Return what a caller puts in `Accept` for this format."""
        return f"{self.media_type}; profile={self.profile}" if self.profile else self.media_type


MARKDOWN = ReportFormat("markdown", "text/markdown")
JSON = ReportFormat("json", "application/json")
HTML = ReportFormat("html", "text/html")
STANDALONE = ReportFormat("standalone", "text/html", profile="standalone")
DOCX = ReportFormat(
    "docx", "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
)
PDF = ReportFormat("pdf", "application/pdf")
FORMATS = (MARKDOWN, JSON, HTML, STANDALONE, DOCX, PDF)
# The formats that are files to keep, by the name `research-agent export --format` takes
# (the web page's downloads too), and each one's renderer (run in the renderer's process).
FILE_FORMATS = {"html": STANDALONE, "docx": DOCX, "pdf": PDF}
RENDERERS: dict[ReportFormat, Callable[[str], str | bytes]] = {
    STANDALONE: report_document,
    DOCX: report_docx,
    PDF: report_pdf,
}


@dataclass(frozen=True)
class _Range:
    type: str
    subtype: str
    profile: str | None
    q: float
    position: int

    def specificity(self, offer: ReportFormat) -> int:
        """Return how closely this range names `offer` (-1: it does not match it)."""
        kind, _, sub = offer.media_type.partition("/")
        if self.profile is not None or offer.profile is not None:
            same = self.profile == offer.profile and (self.type, self.subtype) == (kind, sub)
            return 3 if same else -1
        if (self.type, self.subtype) == (kind, sub):
            return 2
        if self.subtype == "*" and self.type == kind:
            return 1
        return 0 if (self.type, self.subtype) == ("*", "*") else -1


def _ranges(accept: str) -> list[_Range]:
    """Return the media ranges of an `Accept` header (ones that are not `type/subtype` are skipped)."""
    ranges = []
    for position, item in enumerate(accept.split(",")):
        media, *params = (part.strip() for part in item.split(";"))
        kind, slash, sub = media.lower().partition("/")
        if not slash or not kind or not sub:
            continue
        q, profile = 1.0, None
        for param in params:
            key, _, value = param.partition("=")
            key, value = key.strip().lower(), value.strip().strip('"')
            if key == "q":
                try:
                    q = min(max(float(value), 0.0), 1.0)
                except ValueError:
                    q = 0.0
            elif key == "profile":
                profile = value.lower()
        ranges.append(_Range(kind, sub, profile, q, position))
    return ranges


def negotiate(accept: str, standalone: bool = False) -> ReportFormat:
    """Return the format `accept` prefers; raise `NotAcceptable` listing the offers when none fits.

    With `standalone` (`?standalone=1`) the one offer is the whole HTML document, which any
    range matching `text/html` takes.
    """
    offers = (STANDALONE,) if standalone else FORMATS
    ranges = _ranges(accept) or _ranges("*/*")  # none readable: as if none were sent
    if standalone:  # a profile named or not, text/html takes the document
        ranges = [replace(r, profile=None) for r in ranges]
    best: tuple[float, int, int] | None = None
    chosen = None
    for order, offer in enumerate(offers):
        target = HTML if standalone else offer  # `?standalone=1`: matched as plain text/html
        matching = [(r.specificity(target), r) for r in ranges]
        matching = [(s, r) for s, r in matching if s >= 0]
        if not matching:
            continue
        _, closest = max(matching, key=lambda m: (m[0], -m[1].position))
        rank = (closest.q, -closest.position, -order)
        if closest.q > 0 and (best is None or rank > best):
            best, chosen = rank, offer
    if chosen is None and standalone:
        raise not_acceptable(
            f"?standalone=1 answers the HTML document only, and Accept: {accept[:200]!r} "
            "does not take text/html: drop ?standalone=1 or accept text/html"
        )
    if chosen is None:
        raise not_acceptable(f"no format of the report matches Accept: {accept[:200]!r}")
    return chosen


def not_acceptable(reason: str, offered: tuple[ReportFormat, ...] = FORMATS) -> NotAcceptable:
    """Return the 406 failure: the reason, then what a caller may ask for instead."""
    names = [f.offered_as for f in offered]
    return NotAcceptable(
        f"{reason}; ask for one of these (Accept header): {', '.join(names)} "
        "(or ?standalone=1 for the whole HTML document)",
        {"offered": names},
    )
