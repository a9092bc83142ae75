"""The extractive writer: a briefing made of sentences quoted from the sources.

Extractive multi-document summarisation: the best central sentences about the subject
make the summary; every other sentence goes to the investigation point it fits best
(its words, the point's cue words), redundancy removed; each source about the subject
that nothing quotes yet lends its best sentence; each sentence is cited to its source.
"""

from collections import Counter
from collections.abc import Sequence

from core.models import ResearchPlan, Review, SearchResult
from core.urls import normalize_url
from engines.extractive_candidates import Candidate, quotable
from engines.extractive_report import RELATED_SUBJECTS, may_lead, render
from engines.frame_cues import PEOPLE_CUES, cues_for_point
from engines.frames import all_aspects, aspect_point, match_frame
from engines.relevance import LINKED, RELATED, Relevance
from tools.text import STOPWORDS, stem, stems

SUMMARY_SENTENCES = 3
SENTENCES_PER_POINT = 4
# Sources about the subject that no point chose may add this many sentences in all.
MAX_COVERED = 6
REDUNDANCY_JACCARD = 0.5


def uncovered_points(review: Review | None) -> list[str]:
    """The points a review found uncovered, in its order ('...not covered: <point>')."""
    return [
        issue.description.split(":", 1)[1].strip()
        for issue in (review.issues if review else [])
        if issue.type == "completeness" and ":" in issue.description
    ]


def write_briefing(
    plan: ResearchPlan, sources: Sequence[SearchResult], review: Review | None
) -> str:
    """Compose the briefing: summary, one finding per point, analysis by point, references."""
    _, subject = match_frame(plan.theme)
    candidates, idf = quotable(sources, Relevance(subject, sources, plan.theme))
    chosen: list[Candidate] = []
    summary = _summary(candidates, chosen)
    # Points the last review found uncovered accept weaker matches on a rewrite.
    relaxed = set(uncovered_points(review))
    fits, score = _point_scores(plan, subject, candidates, idf, relaxed)
    # A sentence goes to the point it fits best; a point nobody chose may then take
    # the best sentence left over that fits it at all.
    best_point = {
        i: max(score, key=lambda p: score[p][i])
        for i in range(len(candidates))
        if any(score[p][i] > 0 for p in score)
    }
    by_point: dict[str, list[Candidate]] = {}
    for point in plan.investigation_points:
        mine = [i for i, p in best_point.items() if p == point]
        by_point[point] = _pick(candidates, mine, score[point], chosen)
    for point in plan.investigation_points:
        if not by_point[point]:
            anyone = [i for i in range(len(candidates)) if score[point][i] > 0]
            by_point[point] = _pick(candidates, anyone, score[point], chosen)
    _cover_sources(candidates, fits, by_point, chosen)
    return render(plan, summary, by_point)


def _jaccard(a: Counter[str], b: Counter[str]) -> float:
    union = len(a.keys() | b.keys())
    return len(a.keys() & b.keys()) / union if union else 0.0


def _fresh(candidate: Candidate, chosen: list[Candidate]) -> bool:
    """Whether the sentence says something no chosen sentence already says."""
    return all(_jaccard(candidate.terms, c.terms) < REDUNDANCY_JACCARD for c in chosen)


def _summary(candidates: list[Candidate], chosen: list[Candidate]) -> list[Candidate]:
    """The summary's sentences, added to `chosen`.

    The summary speaks from sources about the subject, never from passing mentions;
    the subject's own article may give every sentence of it.
    """
    summary: list[Candidate] = []
    per_source: Counter[str] = Counter()
    about = [c for c in candidates if c.topical >= 1.0] or candidates
    for candidate in sorted(about, key=lambda c: c.base, reverse=True):
        if len(summary) == SUMMARY_SENTENCES:
            break
        limit = SUMMARY_SENTENCES if candidate.topical > 1.0 else 1
        if per_source[candidate.source.url] < limit and _fresh(candidate, chosen):
            summary.append(candidate)
            chosen.append(candidate)
            per_source[candidate.source.url] += 1
    return summary


def _point_scores(
    plan: ResearchPlan,
    subject: str,
    candidates: list[Candidate],
    idf: dict[str, float],
    relaxed: set[str],
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """How well each candidate fits each point, and its weight there.

    fits[point][i]: how well candidate i speaks to the point; score[point][i]: its weight
    there (0 when the fit is below the point's threshold).
    """
    subject_stems = set(stems(subject))
    fits: dict[str, list[float]] = {}
    score: dict[str, list[float]] = {}
    for point in plan.investigation_points:
        point_terms = set(stems(point)) - subject_stems
        cues = (*cues_for_point(point), *_frame_cues(plan.theme, point))
        cue_terms = {stem(w) for w in cues if w not in STOPWORDS}
        # A point about people takes what the articles on those people say.
        people = bool(PEOPLE_CUES & set(cues))
        fits[point] = [
            _fit(c, point_terms, cue_terms, idf) + (people and c.person) for c in candidates
        ]
        threshold = 0.15 if point in relaxed else 0.3
        score[point] = [
            # A sentence that neither names the subject nor comes from its own
            # article only counts at half weight, whatever its cue words.
            (fit * 0.6 + c.base * 0.4) * min(1.0, c.topical + 0.3)
            if fit >= threshold and _speaks_to_subject(c)
            else 0.0
            for c, fit in zip(candidates, fits[point], strict=True)
        ]
    return fits, score


def _fit(
    candidate: Candidate, point_terms: set[str], cue_terms: set[str], idf: dict[str, float]
) -> float:
    """The point's own words the sentence has (IDF-weighted), plus its cue words."""
    words = candidate.terms.keys()
    direct = sum(idf.get(t, 1.0) for t in words & point_terms) / max(
        sum(idf.get(t, 1.0) for t in point_terms), 1e-9
    )
    cues = len(words & cue_terms) / 3
    return direct + min(cues, 1.0)


def _pick(
    candidates: list[Candidate],
    indices: list[int],
    scores: list[float],
    chosen: list[Candidate],
) -> list[Candidate]:
    """The best unchosen, non-redundant sentences among `indices`; the best first."""
    picks: list[Candidate] = []
    for i in sorted(indices, key=lambda i: scores[i], reverse=True):
        if len(picks) == SENTENCES_PER_POINT:
            break
        candidate = candidates[i]
        if candidate not in chosen and _fresh(candidate, chosen):
            picks.append(candidate)
            chosen.append(candidate)
    # The best pick that names the subject leads (it may become the key finding);
    # the rest read in source order.
    lead = next((c for c in picks if may_lead(c)), None)
    rest = [c for c in picks if c is not lead]
    ordered = sorted(rest, key=lambda c: (c.source.url, c.position))
    return [lead, *ordered] if lead is not None else ordered


def _speaks_to_subject(candidate: Candidate) -> bool:
    """Whether a sentence may answer a point.

    It may when it names the subject, or when its source is the subject's article, titled
    by it or linked by it, or is about one of its people. A source devoted to something
    else (a bossa nova article that names jazz) speaks to the subject only where it names
    it; its best sentence may still close the report (`_cover_sources`).
    """
    return candidate.named or candidate.about >= LINKED or candidate.person


def _cover_sources(
    candidates: list[Candidate],
    fits: dict[str, list[float]],
    by_point: dict[str, list[Candidate]],
    chosen: list[Candidate],
) -> None:
    """Give each source about the subject that nothing quotes yet its best sentence.

    A briefing should draw on every source that is about its subject (the chemist whose
    images showed DNA's helix, the magma a volcano erupts), not only on the few that
    fit the points best. The sentence goes to the point it fits best, if it fits any.
    """
    quoted = {normalize_url(c.source.url) for c in chosen}
    best: dict[str, int] = {}
    for i, candidate in enumerate(candidates):
        key = normalize_url(candidate.source.url)
        if key in quoted or candidate.about < RELATED or candidate in chosen:
            continue
        # A sentence that names the subject says why the source belongs in the report.
        if key not in best or (candidate.named, candidate.base) > (
            candidates[best[key]].named,
            candidates[best[key]].base,
        ):
            best[key] = i
    added = 0
    for i in sorted(best.values(), key=lambda i: candidates[i].base, reverse=True):
        candidate = candidates[i]
        if added == MAX_COVERED or not _fresh(candidate, chosen):
            continue
        point = max(fits, key=lambda p: fits[p][i], default=RELATED_SUBJECTS)
        if fits.get(point, [0.0] * len(candidates))[i] <= 0:
            point = RELATED_SUBJECTS
        if len(by_point.setdefault(point, [])) >= SENTENCES_PER_POINT + 2:
            continue
        by_point[point].append(candidate)
        chosen.append(candidate)
        added += 1


def _frame_cues(theme: str, point: str) -> tuple[str, ...]:
    """Cue words of the frame aspect that produced `point`, if it came from the frame."""
    _, subject = match_frame(theme)
    for aspect in all_aspects():
        if aspect_point(aspect, theme, subject).casefold() == point.casefold():
            return aspect.cues
    return ()
