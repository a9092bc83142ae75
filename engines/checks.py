"""Deterministic draft checks that every engine's review runs, and the scores they give.

They measure what needs no judgement: citations resolve and are supported, sections exist,
points are covered, nothing is said twice, and what is cited is about the subject.
"""

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from core.markdown import plain_text
from core.models import (
    CitationCheck,
    IssueType,
    ResearchPlan,
    ReviewIssue,
    ReviewScores,
    SearchResult,
    Severity,
)
from core.urls import normalize_url
from engines.naming import title_stems
from engines.relevance import DEVOTED, RELATED, Relevance
from engines.report_markdown import (
    FOOTNOTE_REF,
    LABEL,
    cited_sentences,
    footnote_urls,
    sections,
    split_front_matter,
)
from tools.text import FORM_WORDS, STOPWORDS, content_words, stem, stems

# Below this share of cited sentences about the subject, a draft drifts: it cannot pass.
DRIFT_LIMIT = 0.8
REQUIRED_SECTIONS = ("Executive Summary", "Key Findings", "Detailed Analysis", "References")
SUPPORT_THRESHOLD = 0.7


@dataclass
class DraftChecks:
    """Hold the findings of the deterministic checks, and the scores they imply."""

    scores: ReviewScores
    issues: list[ReviewIssue] = field(default_factory=list)
    uncovered_points: list[str] = field(default_factory=list)
    citations: CitationCheck = field(default_factory=CitationCheck)
    on_subject: float = 1.0  # share of the cited sentences that are about the subject

    @property
    def drifts(self) -> bool:
        """Return True when too little of what is cited is about the subject to pass review."""
        return self.on_subject < DRIFT_LIMIT


def _support(sentence: str, source_terms: set[str]) -> float:
    words = set(stems(sentence))
    if not words:
        return 1.0
    return len(words & source_terms) / len(words)


def supports(sentence: str, source: SearchResult) -> bool:
    """Return whether `source` holds enough of the sentence's words: the fact check's rule."""
    terms = set(stems(f"{source.title} {source.content}"))
    return _support(sentence, terms) >= SUPPORT_THRESHOLD


def _point_covered(
    point: str, theme: str, body_sections: dict[str, str], body: str, cited: set[frozenset[str]]
) -> bool:
    """Return whether cited text addresses the point.

    It does under its heading or label, by citing the article it names (`cited`: the cited
    sources' title stems), or in a cited sentence with most of its own words.
    """
    if title_stems(point) in cited:
        return True
    wanted = point.strip().casefold()
    for heading, text in body_sections.items():
        if heading.casefold() == wanted and FOOTNOTE_REF.search(text):
            return True
    for line in body.splitlines():
        labels = [plain_text(m).casefold() for m in LABEL.findall(line)]
        if any(label.strip(" :") == wanted for label in labels) and FOOTNOTE_REF.search(line):
            return True
    distinctive = set(stems(point)) - set(stems(theme))
    if not distinctive:
        return True
    for sentence, refs in cited_sentences(body):
        if refs and len(distinctive & set(stems(sentence))) / len(distinctive) >= 0.6:
            return True
    return False


def _drifting_claims(
    claims: list[tuple[str, list[int]]],
    definitions: dict[int, str],
    by_url: dict[str, SearchResult],
    relevance: Relevance,
) -> list[str]:
    """Return the cited sentences that neither name the subject nor cite a source about it."""
    drifting = []
    for sentence, refs in claims:
        cited = [by_url.get(normalize_url(definitions.get(n, ""))) for n in refs]
        sources = [s for s in cited if s is not None]
        if not sources or relevance.names(sentence):
            continue
        if all(relevance.of(s) < RELATED for s in sources):
            drifting.append(sentence)
    return drifting


def unfound_words(theme: str, sources: Sequence[SearchResult]) -> list[str]:
    """Return the subject's words no source about the topic uses, when they are most of it.

    "electric" in "pros and cons of electric cars" when the only source about it is on cars.
    The words that shape a question and what follows the head phrase ("on the body") count
    for nothing there; but the head may be a facet the question's words do not list
    ("decline" in "the decline of the Aztec empire"), so most of the whole topic's words
    must be unsaid too (not counting a request around it: "I want to learn about").
    Empty when the sources cover the subject.
    """
    relevance = Relevance.of_topic(theme, sources)
    used: set[str] = set()
    for source in sources:
        if relevance.of(source) >= DEVOTED:
            used.update(stems(f"{source.title} {source.content}"))
    words = relevance.subject.split()
    while words and (words[0].lower() in FORM_WORDS or words[0].lower() in STOPWORDS):
        words = words[1:]  # "pros and cons of"
    head = _PREPOSITION.split(" ".join(words), maxsplit=1)[0]  # not "on the body"
    wanted, asked = _asked_words(head), _asked_words(relevance.topic)
    unfound = [w for w in wanted if stem(w) not in used]
    elsewhere = [w for w in asked if stem(w) not in used]
    most = 2 * len(unfound) >= max(len(wanted), 1)
    return unfound if most and 2 * len(elsewhere) >= len(asked) else []


def _asked_words(text: str) -> list[str]:
    """Return the content words of `text` that do not shape a question, each once."""
    return list(dict.fromkeys(w for w in content_words(text) if w not in FORM_WORDS))


# Where a subject's head phrase ends and what places it begins: "caffeine | on the body".
_PREPOSITION = re.compile(
    r"\s+(?:of|on|in|for|to|from|at|by|about|during|under|over|through|across|among|against)\s+",
    re.IGNORECASE,
)


def _issue(kind: IssueType, severity: Severity, description: str, location: str) -> ReviewIssue:
    return ReviewIssue(type=kind, severity=severity, description=description, location=location)


class _Verdict(NamedTuple):
    """Hold one check's score and the issues it found."""

    score: float
    issues: list[ReviewIssue]


def _check_format(
    body: str, body_sections: dict[str, str], definitions: dict[int, str]
) -> _Verdict:
    """Check the title and required sections, references numbered 1..n without duplicates."""
    has_title = bool(re.search(r"^#\s+\S", body, re.MULTILINE))
    present = [name for name in REQUIRED_SECTIONS if name in body_sections]
    missing = [name for name in REQUIRED_SECTIONS if name not in body_sections]
    issues = [_issue("format", "high", f"Section '{name}' is missing.", name) for name in missing]
    if not has_title:
        issues.append(_issue("format", "medium", "The report has no '# ' title.", "top"))
    numbers = sorted(definitions)
    numbering_ok = numbers == list(range(1, len(numbers) + 1))
    if not numbering_ok:
        issues.append(_issue("format", "low", "References are not numbered 1..n.", "References"))
    defined_urls = [normalize_url(u) for u in definitions.values()]
    duplicates_ok = len(set(defined_urls)) == len(defined_urls)
    if not duplicates_ok:
        issues.append(
            _issue("format", "low", "A source is listed twice in References.", "References")
        )
    score = (len(present) + has_title + numbering_ok + duplicates_ok) / (len(REQUIRED_SECTIONS) + 3)
    return _Verdict(score, issues)


def _check_facts(
    claims: list[tuple[str, list[int]]],
    definitions: dict[int, str],
    by_url: dict[str, SearchResult],
) -> tuple[_Verdict, CitationCheck]:
    """Check that each cited sentence resolves to a collected source that supports it."""
    issues: list[ReviewIssue] = []
    source_terms: dict[str, set[str]] = {}  # a source's stems, once however often it is cited
    verified = 0
    for sentence, refs in claims:
        if not refs:
            issues.append(
                _issue("fact_check", "high", f"Claim without a source: '{sentence[:120]}'", "body")
            )
            continue
        resolved = [by_url.get(normalize_url(definitions[n])) for n in refs if n in definitions]
        sources = [s for s in resolved if s is not None]
        if len(resolved) < len(refs) or len(sources) < len(resolved):
            problem = f"Footnote does not resolve to a collected source: '{sentence[:120]}'"
            issues.append(_issue("fact_check", "high", problem, "body"))
            continue
        for source in sources:
            key = normalize_url(source.url)
            if key not in source_terms:
                source_terms[key] = set(stems(f"{source.title} {source.content}"))
        support = max(_support(sentence, source_terms[normalize_url(s.url)]) for s in sources)
        if support >= SUPPORT_THRESHOLD:
            verified += 1
        else:
            problem = f"The cited source does not support: '{sentence[:120]}'"
            issues.append(_issue("fact_check", "medium", problem, "body"))
    if not claims:
        issues.append(_issue("fact_check", "high", "The report makes no cited claim.", "body"))
    cited = sum(bool(refs) for _, refs in claims)
    citations = CitationCheck(
        cited_claims=cited, supported=verified, uncited_claims=len(claims) - cited
    )
    return _Verdict(verified / len(claims) if claims else 0.0, issues), citations


def _check_completeness(
    plan: ResearchPlan, body_sections: dict[str, str], body: str, cited: list[SearchResult]
) -> tuple[_Verdict, list[str]]:
    """Check that cited text addresses every investigation point; return those it does not."""
    titles = {title_stems(s.title) for s in cited}
    uncovered = [
        p
        for p in plan.investigation_points
        if not _point_covered(p, plan.theme, body_sections, body, titles)
    ]
    issues = [
        _issue(
            "completeness",
            "medium",
            f"Investigation point not covered: {point}",
            "Detailed Analysis",
        )
        for point in uncovered
    ]
    return _Verdict(1 - len(uncovered) / len(plan.investigation_points), issues), uncovered


def _check_logic(
    claims: list[tuple[str, list[int]]],
    body_sections: dict[str, str],
    drifting: list[str],
    relevance: Relevance,
) -> tuple[_Verdict, float]:
    """Check nothing is said twice, no section is empty or astray, the summary names the subject.

    Return the verdict and the share of cited sentences about the subject (drift lowers it).
    """
    seen: set[str] = set()
    repeats = 0
    for sentence, _refs in claims:
        key = " ".join(stems(sentence))
        repeats += key in seen
        seen.add(key)
    issues = (
        [_issue("logic", "medium", f"{repeats} sentence(s) repeated.", "body")] if repeats else []
    )
    # Only these must say something: the analysis may all be in the key findings.
    empty = [
        name
        for name in ("Executive Summary", "Key Findings")
        if name in body_sections and not body_sections[name].strip()
    ]
    issues += [_issue("logic", "medium", f"Section '{name}' is empty.", name) for name in empty]
    summary = body_sections.get("Executive Summary", "")
    # A summary that never names what was asked answers another question.
    astray = bool(cited_sentences(summary)) and not relevance.names(plain_text(summary))
    if astray:
        problem = f"The executive summary never names the subject ({relevance.subject})."
        issues.append(_issue("logic", "high", problem, "Executive Summary"))
    # A section whose every cited sentence is about something else fails its heading.
    stray = set(drifting)
    astray_sections = [
        name
        for name, text in body_sections.items()
        if name not in REQUIRED_SECTIONS
        and (quoted := [s for s, refs in cited_sentences(text) if refs])
        and stray.issuperset(quoted)
    ]
    issues += [
        _issue("logic", "medium", f"Section '{name}' is not about {relevance.subject}.", name)
        for name in astray_sections
    ]
    cited = sum(bool(refs) for _, refs in claims)
    on_subject = 1 - len(drifting) / cited if cited else 1.0
    if on_subject < DRIFT_LIMIT:
        problem = (
            f"{len(drifting)} of {cited} cited sentences are not about the subject, "
            f"e.g. '{drifting[0][:120]}'"
        )
        issues.append(_issue("logic", "high", problem, "body"))
    faults = len(empty) + astray + len(astray_sections)
    logic = max(0.0, 1 - repeats / max(len(claims), 1) - 0.25 * faults) * min(
        1.0, on_subject / DRIFT_LIMIT
    )
    return _Verdict(logic, issues), on_subject


def check_draft(draft: str, plan: ResearchPlan, sources: Sequence[SearchResult]) -> DraftChecks:
    """Run every deterministic check and score the draft with them."""
    _, body = split_front_matter(draft)
    body_sections = sections(body)
    by_url = {normalize_url(s.url): s for s in sources}
    definitions = footnote_urls(body)
    claims = cited_sentences(body)
    form = _check_format(body, body_sections, definitions)
    facts, citations = _check_facts(claims, definitions, by_url)
    cited = [by_url[u] for u in map(normalize_url, definitions.values()) if u in by_url]
    completeness, uncovered = _check_completeness(plan, body_sections, body, cited)
    relevance = Relevance.of_topic(plan.theme, list(by_url.values()))
    drifting = _drifting_claims(claims, definitions, by_url, relevance)
    logic, on_subject = _check_logic(claims, body_sections, drifting, relevance)
    return DraftChecks(
        scores=ReviewScores(
            fact_check=round(facts.score, 4),
            completeness=round(completeness.score, 4),
            logic=round(logic.score, 4),
            format=round(form.score, 4),
        ),
        issues=[*form.issues, *facts.issues, *completeness.issues, *logic.issues],
        uncovered_points=uncovered,
        on_subject=round(on_subject, 4),
        citations=citations,
    )
