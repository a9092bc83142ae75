"""What a report's footnote stands on: the exact text the run read, and the quote it cites.

The run's evidence says where the source's text came from and when it was read; the
quote is the passage closest to each report sentence citing the footnote, by the
stemmed-word overlap the review's citation check uses.
"""

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from core.models import SearchResult
from core.urls import normalize_url
from engines.report_markdown import cited_sentences, footnote_urls, split_front_matter
from engines.sentences import split_sentences
from stores.evidence import Hit, PageRead, Record, SearchCall, content_hash
from tools.text import stems

# A quote spans at most this many sentences of the source.
_QUOTE_SENTENCES = 3


class Quote(BaseModel):
    """A report sentence citing the source, and the passage of the source closest to it."""

    sentence: str = Field(description="The report's sentence, as written.")
    start: int = Field(description="Where the passage starts in `text` (characters).")
    end: int = Field(description="Where it ends (exclusive).")
    support: float = Field(description="Share of the sentence's words the passage holds, 0..1.")


class SourceView(BaseModel):
    """Footnote `n` of a report: the text the run read for it, and where it came from."""

    n: int
    title: str
    url: str
    kind: Literal["page", "snippet", "passage"] = Field(
        description="A page the run read in full, a search result's snippet, or a passage "
        "of the local corpus."
    )
    provider: str
    query: str | None = None
    read_at: datetime | None = Field(None, description="When the run read it (None: unknown).")
    content_hash: str = Field(description="SHA-256 of `text`, hex.")
    kept: bool = Field(description="Whether the evidence store still keeps the text.")
    text: str
    quotes: list[Quote] = Field(default_factory=list)
    document: str | None = Field(
        None, description="The uploaded file the passage came from (a collection's)."
    )
    page: int | None = Field(None, description="Its page in that file (a PDF's).")


class FootnoteMissing(LookupError):
    """The report has no footnote of that number; the message lists those it has."""


def _spans(text: str) -> list[tuple[int, int]]:
    """Return where each sentence of `text` starts and ends."""
    spans: list[tuple[int, int]] = []
    cursor = 0
    for sentence in split_sentences(text):
        start = text.find(sentence, cursor)
        if start < 0:
            continue
        spans.append((start, start + len(sentence)))
        cursor = start + len(sentence)
    return spans or [(0, len(text))]


def closest_passage(sentence: str, text: str) -> Quote:
    """Return the run of up to three source sentences holding most of `sentence`'s words."""
    wanted = set(stems(sentence))
    spans = _spans(text)
    terms = [set(stems(text[a:b])) for a, b in spans]
    best = (-1.0, 0, 0)
    for i in range(len(spans)):
        if not terms[i] & wanted and best[0] >= 0:
            continue  # a quote starts with a sentence that holds some of the claim
        covered: set[str] = set()
        for j in range(i, min(i + _QUOTE_SENTENCES, len(spans))):
            gained = terms[j] & wanted
            if j > i and not gained - covered:
                break  # a further sentence adds nothing the quote needs
            covered |= gained
            score = len(covered) / len(wanted) if wanted else 0.0
            # a longer passage must earn its place: ties go to the shorter one
            longer = spans[j][1] - spans[i][0] > best[2] - best[1]
            if score > best[0] + 1e-9 or (abs(score - best[0]) <= 1e-9 and not longer):
                best = (score, spans[i][0], spans[j][1])
    return Quote(sentence=sentence, start=best[1], end=best[2], support=round(best[0], 4))


def _provenance(
    source: SearchResult, digest: str, records: Sequence[Record]
) -> tuple[str, str, str | None, datetime | None, Hit | None]:
    """Return (kind, provider, query, read_at, search hit) of the text, from the run's evidence if it has it."""
    for record in records:
        if isinstance(record, PageRead) and record.content_hash == digest:
            return "page", source.source, source.query, record.at, None
    for record in records:
        if not isinstance(record, SearchCall):
            continue
        hit = next((h for h in record.hits if h.content_hash == digest), None)
        if hit is not None:
            # A local corpus's or a collection's passage, not a web page's snippet.
            kind = "passage" if record.provider == "local" or hit.document else "snippet"
            return kind, record.provider, record.query, record.at, hit
    kind = "passage" if source.source == "local" else "snippet"
    return kind, source.source, source.query, None, None


def numbered_sources(values: dict[str, Any]) -> tuple[dict[int, SearchResult], set[int]]:
    """Return the run's sources by number, and the numbers that are the report's footnotes.

    The report's footnotes keep their numbers; every other source the run collected is
    numbered after the last of them, in the order collected, so an answer to a follow-up
    question (`service.questions`) can cite it and `GET .../sources/{n}` show it.
    """
    _, body = split_front_matter(values.get("final_report") or "")
    collected: list[SearchResult] = list(values.get("research_data", []))
    by_url: dict[str, SearchResult] = {}
    for source in collected:
        by_url.setdefault(normalize_url(source.url), source)
    numbered: dict[int, SearchResult] = {}
    for n, url in footnote_urls(body).items():
        if (found := by_url.get(normalize_url(url))) is not None:
            numbered[n] = found
    cited = {normalize_url(s.url) for s in numbered.values()}
    after = max(footnote_urls(body), default=0)
    for source in by_url.values():
        if normalize_url(source.url) not in cited:
            after += 1
            numbered[after] = source
    return numbered, set(footnote_urls(body))


def source_view(values: dict[str, Any], n: int, records: Sequence[Record]) -> SourceView:
    """Return source `n` of the thread (`values`: its state), or FootnoteMissing.

    Footnote `n` of the report, with the passages its sentences cite; past the report's
    footnotes, a source the run collected that the report does not cite (`numbered_sources`).
    `kept` is False until the caller has asked the evidence store.
    """
    _, body = split_front_matter(values.get("final_report") or "")
    urls = footnote_urls(body)
    numbered, footnotes = numbered_sources(values)
    if n not in urls and n not in numbered:
        listed = ", ".join(map(str, sorted(urls))) or "none"
        others = sorted(set(numbered) - footnotes)
        more = f"; the run's other sources: {others[0]} to {others[-1]}" if others else ""
        raise FootnoteMissing(f"the report has no footnote {n}; its footnotes: {listed}{more}")
    if n not in numbered:
        raise FootnoteMissing(f"footnote {n} names a source the run did not collect")
    source: SearchResult = numbered[n]
    digest = content_hash(source.content)
    kind, provider, query, read_at, hit = _provenance(source, digest, records)
    citing = [s for s, refs in cited_sentences(body) if n in refs] if n in footnotes else []
    return SourceView(
        n=n,
        title=source.title,
        url=source.url,
        kind=kind,
        provider=provider,
        query=query,
        read_at=read_at,
        content_hash=digest,
        kept=False,
        text=source.content,
        quotes=[closest_passage(s, source.content) for s in citing],
        document=hit.document if hit else None,
        page=hit.page if hit else None,
    )
