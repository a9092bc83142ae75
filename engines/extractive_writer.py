"""The extractive writer: a briefing of sentences quoted from the sources, each cited.

Query-focused summarisation with maximal marginal relevance: the summary takes the sentences
most like the topic, each section those most like its point, less their likeness to what is chosen.
"""

from collections import Counter
from collections.abc import Callable, Sequence

from core.models import ResearchPlan, Review, SearchResult
from core.urls import normalize_url
from engines.extractive_candidates import Candidate, capitalise, quotable
from engines.extractive_report import may_lead, render
from engines.naming import bare_title, title_stems
from engines.question_form import Answer, answers_asked, says
from engines.relevance import DEVOTED, LINKED, RELATED, TITLED, Relevance
from tools.text import compared_parts, cosine, stems

SUMMARY_SENTENCES = 4
SUMMARY_PER_SOURCE = 2
SENTENCES_PER_POINT = 5
# Sources about the topic that no point quoted: at most this many, each under its title.
MAX_COVERED = 12
SENTENCES_PER_COVERED = 3
# Maximal marginal relevance: the weight of relevance against novelty.
MMR_LAMBDA = 0.7
# Idf-weighted cosine above which a sentence says again what a chosen one says.
REDUNDANT = 0.5
# Share of a point's own words (those not in the topic) a sentence must have (`_Point`).
POINT_WORDS = 0.5
# How much more a summary sentence that answers the question's form (a cause for "why")
# weighs than its likeness to the topic alone.
ANSWER_WEIGHT = 0.3


def _opens(single: Candidate, pair: Candidate) -> bool:
    """Whether `pair` is `single` quoted with the sentence after it, which leans on it."""
    return pair.source is single.source and pair.opening == single.text != ""


def uncovered_points(review: Review | None) -> list[str]:
    """Return the points a review found uncovered, in its order ('...not covered: <point>')."""
    return [
        issue.description.split(":", 1)[1].strip()
        for issue in (review.issues if review else [])
        if issue.type == "completeness" and ":" in issue.description
    ]


class _Choice:
    """Hold the sentences chosen so far, and pick more by maximal marginal relevance."""

    def __init__(self, idf: dict[str, float]) -> None:
        self.idf = idf
        self.chosen: list[Candidate] = []

    def likeness(self, candidate: Candidate) -> float:
        """Return how much of the sentence a chosen one already says (its nearest cosine).

        All of it where one quotes the other (a sentence, and the pair it opens).
        """
        return max((self._likeness(candidate, c) for c in self.chosen), default=0)

    def _likeness(self, candidate: Candidate, chosen: Candidate) -> float:
        if _opens(chosen, candidate) or _opens(candidate, chosen):
            return 1.0
        return cosine(candidate.terms, chosen.terms, self.idf)

    def pick(
        self,
        pool: Sequence[Candidate],
        score: Callable[[Candidate], float],
        count: int,
        per_source: int | None = None,
        after: Sequence[Candidate] = (),
    ) -> list[Candidate]:
        """Pick up to `count` sentences of `pool` by MMR, none repeating a chosen one.

        `per_source` counts the sentences of each source in `after` too (picks this continues).
        """
        picks: list[Candidate] = []
        left = [c for c in pool if c not in self.chosen]
        relevance = {id(c): score(c) for c in left}
        taken: Counter[str] = Counter(c.source.url for c in after)
        while left and len(picks) < count:
            likeness = {id(c): self.likeness(c) for c in left}
            best = max(
                left,
                key=lambda c: MMR_LAMBDA * relevance[id(c)] - (1 - MMR_LAMBDA) * likeness[id(c)],
            )
            left.remove(best)
            if likeness[id(best)] >= REDUNDANT:
                # A pair of sentences that goes on from one picked here takes its place.
                opened = [p for p in picks if _opens(p, best)]
                if opened:
                    picks[picks.index(opened[0])] = best
                    self.chosen[self.chosen.index(opened[0])] = best
                continue
            if per_source is not None and taken[best.source.url] >= per_source:
                continue
            taken[best.source.url] += 1
            picks.append(best)
            self.chosen.append(best)
        return picks


def write_briefing(
    plan: ResearchPlan, sources: Sequence[SearchResult], review: Review | None
) -> str:
    """Compose the briefing: summary, one finding per point, analysis by point, references."""
    relevance = Relevance.of_topic(plan.theme, sources)
    candidates, idf = quotable(sources, relevance)
    choice = _Choice(idf)
    topic = Counter(stems(plan.theme))

    def on_topic(candidate: Candidate) -> float:
        return 0.5 * cosine(candidate.terms, topic, idf) + 0.5 * candidate.base

    asked = answers_asked(plan.theme)

    def answering(candidate: Candidate) -> float:
        answers = any(says(answer, candidate.text) for answer in asked)
        return on_topic(candidate) + ANSWER_WEIGHT * (answers and _speaks_to_subject(candidate))

    # The summary speaks from the subject's own article and those the topic names first
    # (not from a thing of the subject: "Cinema of the Soviet Union"), then from the
    # articles its title names, else from those about it.
    asked_for = [c for c in candidates if relevance.asked_for(c.source)]
    about = (
        [c for c in candidates if c.about >= TITLED]
        or [c for c in candidates if c.topical >= DEVOTED]
        or candidates
    )
    summary = choice.pick(asked_for, answering, SUMMARY_SENTENCES, SUMMARY_PER_SOURCE)
    room = SUMMARY_SENTENCES - len(summary)
    summary += choice.pick(about, answering, room, SUMMARY_PER_SOURCE, after=summary)
    by_point = _answers(asked, candidates, on_topic, choice)
    for answer in asked:  # what the summary answers is no gap, though nothing is left
        if not by_point[answer.heading] and any(says(answer, c.text) for c in summary):
            del by_point[answer.heading]
    compared = _compared(plan.theme, sources, candidates, on_topic, choice)
    relaxed = set(uncovered_points(review))
    # After the plan's points, a section for each article the topic names (both sides of
    # a comparison, both parts of a question), whether or not the plan foresaw it.
    planned = list(dict.fromkeys(plan.investigation_points))
    named = [bare_title(c.source.title) for c in candidates if c.about >= TITLED]
    foreseen = {title_stems(p) for p in planned}  # "Lakes" foresaw the article "Lake"
    unplanned = [p for p in dict.fromkeys(named) if title_stems(p) not in foreseen]
    summarised = {title_stems(c.source.title) for c in summary}
    sections = _sections(planned, topic, candidates, choice, relaxed)  # the plan's first
    sections |= _sections(unplanned, topic, candidates, choice, relaxed)
    for point, picks in sections.items():
        # Only a planned point is a gap, and not when the summary quotes its own article.
        if picks or (point in plan.investigation_points and title_stems(point) not in summarised):
            by_point[point] = _ordered(picks)
    by_point.update(compared)
    _cover_sources(candidates, on_topic, by_point, choice)
    return render(plan, summary, by_point)


class _Point:
    """Tell which sentences speak to a section's point, and how well they fit.

    A sentence speaks to it from the point's own article, by naming all of it, or by enough
    of its own words (not the topic's) weighed by rarity: "Fuji" speaks to Mount Fuji,
    "Mount" does not. A point the last review found uncovered accepts any one.
    """

    def __init__(self, point: str, topic: Counter[str], idf: dict[str, float], relaxed: bool):
        self.idf = idf
        self.wanted = Counter(stems(point))
        self.own_words = set(self.wanted) - set(topic)
        self.needed = 0.0 if relaxed else POINT_WORDS * self._weight(self.own_words)
        self.query = self.wanted + self.wanted + topic  # the point first, the topic beside it

    def _weight(self, words: set[str]) -> float:
        return sum(self.idf.get(t, 1.0) for t in words)

    def own_article(self, candidate: Candidate) -> bool:
        """Return whether the sentence comes from the article the point is the title of."""
        return bool(self.wanted) and title_stems(candidate.source.title) == set(self.wanted)

    def speaks(self, candidate: Candidate) -> bool:
        """Return whether the sentence answers the point (see the class)."""
        if self.own_article(candidate):  # what it is, and what it says of the subject
            # Of an article about the topic that is a work or a part of what it names,
            # also what it says of itself: "A novel of manners, Pride and Prejudice ...".
            itself = candidate.of_a_part and candidate.about >= DEVOTED
            return candidate.position == 0 or itself or _speaks_to_subject(candidate)
        terms = candidate.terms.keys()
        return _speaks_to_subject(candidate) and (
            (bool(self.wanted) and set(self.wanted) <= terms)
            or (
                bool(self.own_words & terms) and self._weight(self.own_words & terms) >= self.needed
            )
        )

    def fit(self, candidate: Candidate) -> float:
        """Score how well the sentence answers the point: likeness, own article, centrality."""
        return (
            0.4 * cosine(candidate.terms, self.query, self.idf)
            + 0.4 * self.own_article(candidate)
            + 0.2 * candidate.base
        )


def answering_sentences(
    question: str, topic: str, candidates: list[Candidate], idf: dict[str, float], count: int
) -> list[Candidate]:
    """Return up to `count` sentences that answer `question`, the best first.

    A question is ranked as a section's point: the sentences that speak to it (any of its
    own words), by fit, less their likeness to those already chosen (MMR), at most two
    from one source.
    """
    point = _Point(question, Counter(stems(topic)), idf, relaxed=True)
    return _Choice(idf).pick(
        [c for c in candidates if point.speaks(c)], point.fit, count, per_source=2
    )


def _sections(
    points: list[str],
    topic: Counter[str],
    candidates: list[Candidate],
    choice: _Choice,
    relaxed: set[str],
) -> dict[str, list[Candidate]]:
    """Return each point's sentences, most relevant first.

    Each point first takes its own article's, then all fill up with those that speak to them:
    chess does not take what the Xiangqi article says of chess before Xiangqi has its own.
    """
    asked = {point: _Point(point, topic, choice.idf, point in relaxed) for point in points}
    picks = {
        point: choice.pick(
            [c for c in candidates if p.own_article(c) and p.speaks(c)], p.fit, SENTENCES_PER_POINT
        )
        for point, p in asked.items()
    }
    for point, p in asked.items():
        room = SENTENCES_PER_POINT - len(picks[point])
        picks[point] += choice.pick([c for c in candidates if p.speaks(c)], p.fit, room)
    return picks


def _answers(
    asked: list[Answer],
    candidates: list[Candidate],
    on_topic: Callable[[Candidate], float],
    choice: _Choice,
) -> dict[str, list[Candidate]]:
    """Return a section for each answer the question's form asks for (`engines.question_form`).

    A sentence that speaks to the subject goes to the answer it says most, at most two from
    one source; an answer none gives stays empty, so the report lists it as an open question.
    """
    sections: dict[str, list[Candidate]] = {}
    for answer in asked:
        fitting = [
            c
            for c in candidates
            if _speaks_to_subject(c)
            and says(answer, c.text) > 0
            and says(answer, c.text) >= max(says(other, c.text) for other in asked)
        ]
        picks = choice.pick(fitting, on_topic, SENTENCES_PER_POINT, per_source=2)
        sections[answer.heading] = _ordered(picks)
    return sections


def _compared(
    theme: str,
    sources: Sequence[SearchResult],
    candidates: list[Candidate],
    on_topic: Callable[[Candidate], float],
    choice: _Choice,
) -> dict[str, list[Candidate]]:
    """Return, for a comparison, a section of the sentences that name every side at once."""
    parts = compared_parts(theme)
    if len(parts) < 2:
        return {}
    sides = [Relevance(part, sources, part) for part in parts]
    both = [c for c in candidates if all(side.names(c.text) for side in sides)]
    picks = choice.pick(both, on_topic, SENTENCES_PER_POINT)
    heading = capitalise(f"{', '.join(parts[:-1])} and {parts[-1]} side by side")
    return {heading: _ordered(picks)} if picks else {}


def _speaks_to_subject(candidate: Candidate) -> bool:
    """Return whether a sentence may answer a point that is not its own article's title.

    It may when it names the subject, or its source is linked by the subject or about one of
    its people: a bossa nova article speaks to jazz only where it names it.
    """
    return candidate.named or candidate.about >= LINKED or candidate.person


def _ordered(picks: list[Candidate]) -> list[Candidate]:
    """Put the best pick that may lead (a key finding) first, the rest in source order."""
    lead = next((c for c in picks if may_lead(c)), None)
    rest = sorted((c for c in picks if c is not lead), key=lambda c: (c.source.url, c.position))
    return [lead, *rest] if lead is not None else rest


def _cover_sources(
    candidates: list[Candidate],
    on_topic: Callable[[Candidate], float],
    by_point: dict[str, list[Candidate]],
    choice: _Choice,
) -> None:
    """Give each source about the topic that nothing quotes yet a section under its title.

    The sources about it first, then those that name it in passing (with the sentences that
    name it), the most relevant first: the briefing draws on all it found.
    """
    quoted = {normalize_url(c.source.url) for c in choice.chosen}
    by_source: dict[str, list[Candidate]] = {}
    for candidate in candidates:
        key = normalize_url(candidate.source.url)
        # A source that only mentions the subject lends the sentences that name it.
        if key not in quoted and (candidate.about >= RELATED or candidate.named):
            by_source.setdefault(key, []).append(candidate)
    ranked = sorted(
        by_source.values(),
        key=lambda group: (group[0].about >= RELATED, max(on_topic(c) for c in group)),
        reverse=True,
    )
    added = 0
    for group in ranked:
        if added == MAX_COVERED:
            break
        heading = bare_title(group[0].source.title)
        if heading in by_point:
            continue
        picks = choice.pick(group, on_topic, SENTENCES_PER_COVERED)
        if picks:
            by_point[heading] = _ordered(picks)
            added += 1
