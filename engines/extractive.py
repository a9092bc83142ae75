"""The extractive engine: research without a language model.

It plans by expanding the topic with a topic frame and the key terms of the first
results, writes by extractive multi-document summarisation (sentences scored against
each investigation point with TF-IDF, redundancy removed, grouped by point, each cited
to the source it came from) and reviews with the deterministic checks alone.
Every sentence of its reports is quoted from a source (a leading pronoun may be replaced
by the name it stands for), so its fact check is exact.
"""

import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from core.models import ResearchPlan, Review, RoutingDecision, SearchResult
from core.urls import markdown_url, normalize_url
from engines.base import Progress
from engines.checks import GAPS_SECTION, check_draft
from engines.frames import (
    PEOPLE_CUES,
    all_aspects,
    aspect_point,
    aspects_for,
    cues_for_point,
    match_frame,
)
from engines.keyphrases import key_terms, named_entities
from engines.kinds import kind_of
from engines.relevance import (
    LINKED,
    MENTIONS,
    OFF,
    OWN,
    RELATED,
    TITLED,
    Relevance,
    bare_title,
    group_movement,
    link_queries,
    subject_article,
)
from engines.sentences import split_sentences
from tools.text import STOPWORDS, content_words, cosine, stem, stems, words

MAX_QUERIES = 8
# Each refinement round: this many gap, name and term queries, and as many more for what
# the subject's own article names.
QUERIES_PER_ROUND = 4
LINKS_PER_ROUND = 4
LINKS_IN_PLAN = 2
# After the plan's queries, in the same step: what the subject's own article names.
FOLLOW_UPS = 6
SUMMARY_SENTENCES = 3
SENTENCES_PER_POINT = 4
MAX_FINDINGS = 5
# Sources about the subject that no point chose may add this many sentences in all.
MAX_COVERED = 6
RELATED_SUBJECTS = "Related subjects"
# A key finding comes from a source about the subject (engines.relevance: DEVOTED or
# closer), not from a sentence that names it in passing (PASSING).
KEY_FINDING_TOPICAL = 0.7
PASSING = 0.55
REDUNDANCY_JACCARD = 0.5
_MIN_CHARS, _MAX_CHARS = 40, 420
# Sentences that open with these lean on a previous sentence we may not quote.
_DANGLING = re.compile(
    r"^(?:this|these|those|they|them|such|however|also|but|and|both|another|other)\b",
    re.IGNORECASE,
)
_CONTEXTUAL = re.compile(
    r"\b(?:that|the same|this|the following|the previous)\s+(?:century|year|decade|period|time|day|month)\b"
    r"|\b(?:this|these|those|the latter|the former)\b",
    re.IGNORECASE,
)
_CATEGORY = re.compile(r"^The ([a-z]+)\b")
_PERSONAL = re.compile(r"^(He|She)\b")
_PERSON_PRONOUN = re.compile(r"\b(?:he|she|him|his|her|hers)\b")
_POSSESSIVE = re.compile(r"^(His|Her|Its)\b")
# "The term ...", "The two ...": these stand for something named before; quoted alone,
# a reader cannot tell what. Kept only when the lead defines the noun (see below).
_ANAPHORIC = frozenset(
    "term field two three former latter same work film book album song novel play series "
    "group band company movement game show city country region".split()
)
_NEUTER = re.compile(
    r"^It\b(?!\s+is\s+(?:not\s+)?(?:known|thought|believed|estimated|said|likely|possible|unclear))"
)


@dataclass(slots=True)
class Candidate:
    """A sentence that could go into the report, with what is known about it."""

    text: str
    source: SearchResult
    position: int
    terms: Counter[str]
    topical: float
    about: float = 0.0  # how much its source is about the subject (engines.relevance)
    named: bool = False  # the sentence names the subject
    person: bool = False  # from an article about a person the subject concerns
    base: float = 0.0


def _capitalise(text: str) -> str:
    return text[:1].upper() + text[1:]


def _subject_phrase(source: SearchResult) -> str:
    """How a sentence about the article's subject names it ('the printing press', 'Gutenberg')."""
    title = bare_title(source.title)
    lead = source.content[:200]
    common_noun = title[:1].lower() + title[1:]
    if re.match(rf"(?:A|An|The)\s+{re.escape(common_noun)}\b", lead):
        return f"the {common_noun}"
    if re.match(rf"The\s+{re.escape(title)}\b", lead):
        return f"the {title}"
    return title


def _names_a_person_first(sentence: str, source: SearchResult) -> bool:
    """False when a personal pronoun comes before the name it stands for ("In his youth, he").

    A name counts when it is a run of capitalised words or a word of the source's title
    ("Born in Florence, he studied" names a place, not the sculptor).
    """
    pronoun = _PERSON_PRONOUN.search(sentence)
    if pronoun is None:
        return True
    before = re.findall(r"[\w'’.-]+", sentence[: pronoun.start()])
    title = set(words(source.title))
    return any(
        word[:1].isupper()
        and (
            word.lower().strip(".") in title
            or (i + 1 < len(before) and before[i + 1][:1].isupper() and i > 0)
        )
        for i, word in enumerate(before)
    )


def _resolve_pronoun(sentence: str, source: SearchResult, position: int) -> str | None:
    """Replace a leading pronoun that refers to the article's subject; None if unsafe to quote."""
    if position == 0:
        return sentence
    if _DANGLING.match(sentence) or _CONTEXTUAL.search(sentence):
        return None
    subject = _subject_phrase(source)
    if _PERSONAL.match(sentence):
        return _PERSONAL.sub(_capitalise(subject), sentence, count=1)
    if _POSSESSIVE.match(sentence):
        return _POSSESSIVE.sub(_capitalise(subject) + "'s", sentence, count=1)
    if _NEUTER.match(sentence):
        return _NEUTER.sub(_capitalise(subject), sentence, count=1)
    if sentence.startswith("It "):
        return None  # "It is thought that ...": the pronoun names no one we can substitute
    category = _CATEGORY.match(sentence)
    # The lead must name the category as the head of its predicate: "X is a painting by".
    head = (
        rf"\b(?:is|was|are|were)\s+(?:a|an|the)\s+(?:[\w-]+\s+){{0,3}}{category.group(1)}"
        r"(?=\s*[,.;(]|\s+(?:by|of|in|that|which|who|from|for|with|about|and)\b)"
        if category
        else None
    )
    if category and head and re.search(head, _lead(source)):
        # "The painting ..." in an article whose lead says "X is a painting": it means X.
        return _capitalise(subject) + sentence[category.end() :]
    if (category and category.group(1) in _ANAPHORIC) or sentence.startswith("Their "):
        return None
    return sentence


def _lead(source: SearchResult) -> str:
    return next(iter(split_sentences(source.content)), "")


def _jaccard(a: Counter[str], b: Counter[str]) -> float:
    union = len(a.keys() | b.keys())
    return len(a.keys() & b.keys()) / union if union else 0.0


class ExtractiveEngine:
    """An `Engine` that needs no model: classic NLP over the collected sources."""

    name = "extractive"
    description = "extractive (no language model: sentences quoted from the sources)"

    @property
    def models(self) -> dict[str, str]:
        """No model."""
        return {}

    # -- planning --------------------------------------------------------------------

    async def plan(
        self, topic: str, probe: Sequence[SearchResult], feedback: str | None
    ) -> ResearchPlan:
        """Expand the topic by its frame; add the names and key terms of the first results."""
        frame, subject = match_frame(topic)
        relevance = Relevance(subject, probe)
        movement = group_movement(subject)
        aspects = aspects_for(frame, relevance.kind, group=movement is not None)
        points = [aspect_point(a, topic, subject) for a in aspects]
        article = relevance.article
        subject_stems = set(stems(subject)) | set(relevance.phrase)
        on_topic = [hit for hit in probe if relevance.of(hit) > OFF]
        names = named_entities(on_topic, exclude=subject_stems, limit=2)
        # The topic's own words find what the subject's name alone does not (the system a
        # process acts on, the place of an event): one keyword query, second.
        topic_words = " ".join(content_words(topic, keep_case=True))
        queries = [
            subject,
            movement or "",
            topic_words,
            *link_queries(article, subject, probe, (), LINKS_IN_PLAN),
            *names,
            *(a.query.format(s=subject) for a in aspects),
        ]
        queries += [f"{subject} {t}" for t in key_terms(on_topic, exclude=subject_stems, limit=2)]
        if feedback:
            focus = " ".join(content_words(feedback, keep_case=True)[:6])
            if focus:
                points.append(_capitalise(split_sentences(feedback)[0].strip()[:200]))
                queries.insert(1, f"{subject} {focus}")
        queries = list(dict.fromkeys(q.strip() for q in queries if q.strip()))[:MAX_QUERIES]
        plan_text = (
            f"Investigate {subject} ({relevance.kind or 'kind unknown'}) as a '{frame.name}' "
            f"question along {len(points)} points; "
            f"search {len(queries)} short queries, then widen with key terms of what is found."
        )
        return ResearchPlan(
            theme=_capitalise(topic.strip().rstrip(".?!")),
            investigation_points=points,
            search_queries=queries,
            plan_text=plan_text,
        )

    async def refine_queries(
        self,
        plan: ResearchPlan,
        sources: Sequence[SearchResult],
        done: Sequence[str],
        review: Review | None,
    ) -> list[str]:
        """Plan queries not yet run, then uncovered points, then names and terms in the sources."""
        done_keys = {q.casefold() for q in done}
        _, subject = match_frame(plan.theme)
        candidates = list(plan.search_queries)
        if review is not None:
            for issue in review.issues:
                if issue.type == "completeness" and ":" in issue.description:
                    point = issue.description.split(":", 1)[1].strip()
                    # Anchored on the subject: an aspect alone finds anything.
                    candidates.append(f"{subject} {' '.join(content_words(point)[:4])}")
        relevance = Relevance(subject, sources)
        article = relevance.article
        subject_stems = set(stems(subject)) | set(relevance.phrase)
        on_topic = [s for s in sources if relevance.of(s) > OFF]
        candidates += named_entities(on_topic, exclude=subject_stems, limit=6)
        candidates += [
            f"{subject} {t}" for t in key_terms(on_topic, exclude=subject_stems, limit=4)
        ]
        fresh = [
            q
            for q in dict.fromkeys(c.strip() for c in candidates)
            if q and q.casefold() not in done_keys
        ][:QUERIES_PER_ROUND]
        links = link_queries(article, subject, sources, [*done, *fresh], LINKS_PER_ROUND)
        return [*fresh, *links]

    def follow_up(
        self, plan: ResearchPlan, sources: Sequence[SearchResult], done: Sequence[str]
    ) -> list[str]:
        """What the subject's own article names, now that it may have been found."""
        _, subject = match_frame(plan.theme)
        return link_queries(subject_article(subject, sources), subject, sources, done, FOLLOW_UPS)

    async def decide(self, progress: Progress) -> RoutingDecision:
        """Rewrite only when new sources arrived since the last draft; else stop."""
        if progress.last_review is not None and progress.last_review.approved:
            return RoutingDecision(action="end", reasoning="The last draft passed review.")
        if progress.source_count > progress.sources_at_last_draft:
            gained = progress.source_count - progress.sources_at_last_draft
            return RoutingDecision(
                action="write", reasoning=f"{gained} new source(s) since the last draft: rewrite."
            )
        return RoutingDecision(
            action="end",
            reasoning="No new sources since the last draft: a rewrite would change nothing.",
        )

    async def summarize(self, query: str, sources: Sequence[SearchResult]) -> str:
        """List each source with its lead sentence."""
        lines = []
        for source in sources:
            lead = next(iter(split_sentences(source.content)), "").strip()
            lines.append(f"- **{source.title}** ({source.url}): {lead[:300]}")
        return "\n".join(lines) if lines else f"No results for '{query}'."

    # -- writing ---------------------------------------------------------------------

    def _candidates(
        self, sources: Sequence[SearchResult], relevance: Relevance
    ) -> tuple[list[Candidate], dict[str, float]]:
        """Sentences worth quoting, with their base scores.

        A source that is not about the subject (`Relevance`) is skipped whatever its
        rank; one that mentions it in passing lends only the sentences that name it.
        """
        documents: list[set[str]] = []
        candidates: list[Candidate] = []
        for source in sources:
            documents.append(set(stems(f"{source.title} {source.content}")))
            about = relevance.of(source)
            if about == OFF:
                continue
            for position, raw in enumerate(split_sentences(source.content)):
                if not _MIN_CHARS <= len(raw) <= _MAX_CHARS or raw.endswith(("?", ":")):
                    continue
                text = _resolve_pronoun(raw, source, position)
                if text is None or not _names_a_person_first(text, source):
                    continue
                terms = Counter(stems(text))
                named = relevance.names(text)
                if about <= MENTIONS and not named:
                    continue
                if len(terms) >= 4:
                    # A sentence that names the subject in a source that only mentions
                    # it may inform a section, but not lead one as a key finding.
                    topical = max(about, PASSING) if named else about
                    # The article that is the subject itself opens with its definition.
                    if about == OWN:
                        topical += 0.5 / (1 + position)
                    candidates.append(
                        Candidate(
                            text=text,
                            source=source,
                            position=position,
                            terms=terms,
                            topical=topical,
                            about=about,
                            named=named,
                            person=about >= RELATED and kind_of(source.content) == "person",
                        )
                    )
        n = max(len(documents), 1)
        document_frequency = Counter(t for doc in documents for t in doc)
        idf = {t: math.log(1 + n / df) for t, df in document_frequency.items()}
        centroid: Counter[str] = Counter()
        for candidate in candidates:
            centroid.update(candidate.terms)
        for candidate in candidates:
            candidate.base = (
                0.35 * cosine(candidate.terms, centroid, idf)
                + 0.40 * candidate.topical
                + 0.15 / (1 + candidate.position)
                + 0.10 * (candidate.source.relevance_score or 0.0)
            )
        return candidates, idf

    @staticmethod
    def _point_score(
        candidate: Candidate, point_terms: set[str], cue_terms: set[str], idf: dict[str, float]
    ) -> float:
        words = candidate.terms.keys()
        direct = sum(idf.get(t, 1.0) for t in words & point_terms) / max(
            sum(idf.get(t, 1.0) for t in point_terms), 1e-9
        )
        cues = len(words & cue_terms) / 3
        return direct + min(cues, 1.0)

    async def write(
        self,
        plan: ResearchPlan,
        sources: Sequence[SearchResult],
        review: Review | None,
        feedback: str | None,
        on_token: Callable[[str], None] | None = None,
    ) -> str:
        """Compose the briefing: summary, one finding per point, analysis by point, references.

        Free-text feedback cannot steer an extractive writer; new sources and the review's
        coverage gaps can, so those are what it uses.
        """
        _, subject = match_frame(plan.theme)
        relevance = Relevance(subject, sources)
        candidates, idf = self._candidates(sources, relevance)
        chosen: list[Candidate] = []

        def fresh(candidate: Candidate) -> bool:
            return all(_jaccard(candidate.terms, c.terms) < REDUNDANCY_JACCARD for c in chosen)

        summary: list[Candidate] = []
        per_source: Counter[str] = Counter()
        # The summary speaks from sources about the subject, never from passing mentions;
        # the subject's own article may give every sentence of it.
        about = [c for c in candidates if c.topical >= 1.0] or candidates
        for candidate in sorted(about, key=lambda c: c.base, reverse=True):
            if len(summary) == SUMMARY_SENTENCES:
                break
            limit = SUMMARY_SENTENCES if candidate.topical > 1.0 else 1
            if per_source[candidate.source.url] < limit and fresh(candidate):
                summary.append(candidate)
                chosen.append(candidate)
                per_source[candidate.source.url] += 1

        # Points the last review found uncovered accept weaker matches on a rewrite.
        relaxed = {
            i.description.split(":", 1)[1].strip()
            for i in (review.issues if review else [])
            if i.type == "completeness" and ":" in i.description
        }
        subject_stems = set(stems(subject))
        # fits[point][i]: how well candidate i speaks to the point; score[point][i]: its
        # weight there (0 when the fit is below the point's threshold).
        fits: dict[str, list[float]] = {}
        score: dict[str, list[float]] = {}
        for point in plan.investigation_points:
            point_terms = set(stems(point)) - subject_stems
            cues = (*cues_for_point(point), *_frame_cues(plan.theme, point))
            cue_terms = {stem(w) for w in cues if w not in STOPWORDS}
            # A point about people takes what the articles on those people say.
            people = bool(PEOPLE_CUES & set(cues))
            fits[point] = [
                self._point_score(c, point_terms, cue_terms, idf) + (people and c.person)
                for c in candidates
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
            by_point[point] = self._pick(candidates, mine, score[point], chosen, fresh)
        for point in plan.investigation_points:
            if not by_point[point]:
                anyone = [i for i in range(len(candidates)) if score[point][i] > 0]
                by_point[point] = self._pick(candidates, anyone, score[point], chosen, fresh)
        _cover_sources(candidates, fits, by_point, chosen, fresh)
        return _render(plan, summary, by_point)

    @staticmethod
    def _pick(
        candidates: list[Candidate],
        indices: list[int],
        scores: list[float],
        chosen: list[Candidate],
        fresh: Callable[[Candidate], bool],
    ) -> list[Candidate]:
        """The best unchosen, non-redundant sentences among `indices`; the best first."""
        picks: list[Candidate] = []
        for i in sorted(indices, key=lambda i: scores[i], reverse=True):
            if len(picks) == SENTENCES_PER_POINT:
                break
            candidate = candidates[i]
            if candidate not in chosen and fresh(candidate):
                picks.append(candidate)
                chosen.append(candidate)
        # The best pick that names the subject leads (it may become the key finding);
        # the rest read in source order.
        lead = next(
            (
                c
                for c in picks
                if c.topical >= KEY_FINDING_TOPICAL and (c.named or c.about >= TITLED)
            ),
            None,
        )
        rest = [c for c in picks if c is not lead]
        ordered = sorted(rest, key=lambda c: (c.source.url, c.position))
        return [lead, *ordered] if lead is not None else ordered

    async def review(
        self, draft: str, plan: ResearchPlan, sources: Sequence[SearchResult]
    ) -> Review:
        """Score with the deterministic checks; uncovered points send the run back to research."""
        checks = check_draft(draft, plan, sources)
        feedback = "; ".join(issue.description for issue in checks.issues[:8]) or None
        # Rewriting from the same sources gives the same report: only new sources help.
        return Review.from_scores(
            checks.scores,
            checks.issues,
            feedback,
            "research",
            checks.citations,
            drifts=checks.drifts,
        )


def _speaks_to_subject(candidate: Candidate) -> bool:
    """Whether a sentence may answer a point.

    It may when it names the subject, or when its source is the subject's article, titled
    by it or linked by it, or is about one of its people. A source devoted to something else (a bossa nova article that names jazz) speaks to the
    subject only where it names it; its best sentence may still close the report
    (`_cover_sources`).
    """
    return candidate.named or candidate.about >= LINKED or candidate.person


def _cover_sources(
    candidates: list[Candidate],
    fits: dict[str, list[float]],
    by_point: dict[str, list[Candidate]],
    chosen: list[Candidate],
    fresh: Callable[[Candidate], bool],
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
        if added == MAX_COVERED or not fresh(candidate):
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


def _render(
    plan: ResearchPlan, summary: list[Candidate], by_point: dict[str, list[Candidate]]
) -> str:
    numbers: dict[str, int] = {}
    sources: dict[str, SearchResult] = {}

    def cite(candidate: Candidate) -> str:
        key = normalize_url(candidate.source.url)
        if key not in numbers:
            numbers[key] = len(numbers) + 1
            sources[key] = candidate.source
        text = candidate.text.rstrip()
        return (
            f"{text}[^{numbers[key]}]"
            if text.endswith((".", "!", "?"))
            else f"{text}.[^{numbers[key]}]"
        )

    lines = [f"# {plan.theme}", "", "## Executive Summary", ""]
    lines.append(
        " ".join(cite(c) for c in summary)
        if summary
        else "_The collected sources say little about this topic._"
    )
    lines += ["", "## Key Findings", ""]
    # Seed 001 F004: three to five findings, the best sentence of each point.
    findings = {
        point: picks[0]
        for point, picks in by_point.items()
        if picks
        and picks[0].topical >= KEY_FINDING_TOPICAL
        and (picks[0].named or picks[0].about >= TITLED)
        and point != RELATED_SUBJECTS
    }
    findings = dict(list(findings.items())[:MAX_FINDINGS])
    for point, candidate in findings.items():
        lines.append(f"- **{point}:** {cite(candidate)}")
    if not findings:
        lines.append("_No finding could be supported by the collected sources._")
    lines += ["", "## Detailed Analysis", ""]
    gaps = [point for point, picks in by_point.items() if not picks]
    for point, picks in by_point.items():
        rest = picks[1:] if point in findings else picks
        if not rest:
            continue  # its one passage is the key finding, or it is a gap (below)
        lines += [f"### {point}", "", " ".join(cite(c) for c in rest), ""]
    if gaps:
        # Said once, at the end, rather than as empty sections through the report.
        lines += [f"## {GAPS_SECTION}", "", "The collected sources do not address:", ""]
        lines += [f"- {point}" for point in gaps]
        lines.append("")
    if numbers:
        lines += ["## References", ""]
    for key, number in numbers.items():
        source = sources[key]
        lines.append(f"[^{number}]: [{source.title}]({markdown_url(source.url)})")
    return "\n".join(lines).rstrip() + "\n"
