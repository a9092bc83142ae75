"""The extractive engine: research without a language model.

It plans from the first results' titles, names and terms, writes by quoting the sources
(`engines.extractive_writer`) and reviews with the deterministic checks alone.
"""

from collections.abc import Callable, Sequence

from core.models import ResearchPlan, Review, RoutingDecision, SearchResult
from engines.base import Progress
from engines.checks import check_draft
from engines.extractive_candidates import capitalise, lead_sentence
from engines.extractive_writer import uncovered_points, write_briefing
from engines.keyphrases import key_terms, named_entities
from engines.naming import LONG_PHRASE, bare_title
from engines.relevance import DEVOTED, OFF, TITLED, Relevance, group_movement, topic_subject
from engines.sentences import split_sentences
from engines.subject import match_frame
from tools.text import content_words, stems, topic_parts

MAX_QUERIES = 8
# Investigation points: the titles of the first results about the topic.
MAX_POINTS = 5
# Each refinement round: this many gap, name and term queries, and as many more for what
# the subject's own article names.
QUERIES_PER_ROUND = 4
LINKS_PER_ROUND = 4
LINKS_IN_PLAN = 2
# After the plan's queries, in the same step: what the subject's own article names.
FOLLOW_UPS = 6


def _on_topic(
    subject: str, sources: Sequence[SearchResult], topic: str = ""
) -> tuple[Relevance, set[str], list[SearchResult]]:
    """Return how the sources relate to the subject, its stems, and the sources about it."""
    relevance = Relevance(subject, sources, topic)
    subject_stems = set(stems(subject)) | set(relevance.phrase)
    return relevance, subject_stems, [s for s in sources if relevance.of(s) > OFF]


def _distinct(queries: Sequence[str]) -> list[str]:
    """Return the queries in order, each once whatever its case, none empty."""
    seen: set[str] = set()
    kept = []
    for query in (q.strip() for q in queries):
        if query and query.casefold() not in seen:
            seen.add(query.casefold())
            kept.append(query)
    return kept


def outline(
    subject: str, topic: str, probe: Sequence[SearchResult], relevance: Relevance
) -> list[str]:
    """Return the investigation points: the titles of the first results about the topic.

    The articles the topic names come first, then those whose titles name the subject, then
    the rest, each in rank order; with none, the things the question joins, else the
    subject. A long subject (judged by most of its words, which fits too much) takes only
    the articles the topic names.
    """
    bar = TITLED if len(relevance.phrase) > LONG_PHRASE else DEVOTED
    about = [s for s in probe if relevance.of(s) >= bar]
    # Stable: rank kept within the articles the topic names, the others titled, the rest.
    about.sort(key=lambda s: (relevance.asked_for(s), relevance.of(s) >= TITLED), reverse=True)
    points = [bare_title(s.title) for s in about] or [capitalise(p) for p in topic_parts(topic)]
    return list(dict.fromkeys(p for p in points if p))[:MAX_POINTS] or [capitalise(subject)]


class ExtractiveEngine:
    """An `Engine` that needs no model: classic NLP over the collected sources."""

    name = "extractive"
    description = "extractive (no language model: sentences quoted from the sources)"

    @property
    def models(self) -> dict[str, str]:
        """Return no model: none is used."""
        return {}

    async def plan(
        self, topic: str, probe: Sequence[SearchResult], feedback: str | None
    ) -> ResearchPlan:
        """Plan points from what the first results are about; queries for each, names, terms."""
        frame = match_frame(topic)[0]
        subject = topic_subject(topic, probe)
        relevance, subject_stems, on_topic = _on_topic(subject, probe, topic)
        points = outline(subject, topic, probe, relevance)
        names = named_entities(on_topic, exclude=subject_stems, limit=2)
        # Feedback terms that no point's query already holds ("wing", not "aircraft").
        known = subject_stems | set(stems(topic)) | set(stems(" ".join(points)))
        terms = key_terms(probe, known, 2, relevance.of)
        # (The topic's own keyword query leads every plan: `nodes.supervisor.led_by_topic`.)
        queries = [
            subject,
            group_movement(subject) or "",
            *points,
            *relevance.link_queries(probe, (), LINKS_IN_PLAN),
            *(f"{subject} {t}" for t in terms),
            *names,
        ]
        if feedback:
            focus = " ".join(content_words(feedback, keep_case=True)[:6])
            if focus:
                points.append(capitalise(split_sentences(feedback)[0].strip()[:200]))
                queries.insert(1, f"{subject} {focus}")
        queries = _distinct(queries)[:MAX_QUERIES]
        plan_text = (
            f"Investigate {subject} ({relevance.kind or 'kind unknown'}, a '{frame.name}' "
            f"question) through {len(points)} points drawn from the first results; "
            f"search {len(queries)} short queries, then widen with key terms of what is found."
        )
        return ResearchPlan(
            theme=capitalise(topic.strip().rstrip(".?!")),
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
        """Return plan queries not yet run, uncovered points, then names and terms found."""
        done_keys = {q.casefold() for q in done}
        subject = topic_subject(plan.theme, sources)
        candidates = list(plan.search_queries)
        # Anchored on the subject: an aspect alone finds anything.
        candidates += [
            f"{subject} {' '.join(content_words(point)[:4])}" for point in uncovered_points(review)
        ]
        relevance, subject_stems, on_topic = _on_topic(subject, sources, plan.theme)
        candidates += named_entities(on_topic, exclude=subject_stems, limit=6)
        terms = key_terms(sources, subject_stems | set(stems(plan.theme)), 4, relevance.of)
        candidates += [f"{subject} {t}" for t in terms]
        fresh = [
            q
            for q in dict.fromkeys(c.strip() for c in candidates)
            if q and q.casefold() not in done_keys
        ][:QUERIES_PER_ROUND]
        links = relevance.link_queries(sources, [*done, *fresh], LINKS_PER_ROUND)
        return [*fresh, *links]

    def follow_up(
        self, plan: ResearchPlan, sources: Sequence[SearchResult], done: Sequence[str]
    ) -> list[str]:
        """Return what the subject's own article names, now that it may have been found."""
        relevance = Relevance.of_topic(plan.theme, sources)
        return relevance.link_queries(sources, done, FOLLOW_UPS)

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
            lead = lead_sentence(source).strip()
            lines.append(f"- **{source.title}** ({source.url}): {lead[:300]}")
        return "\n".join(lines) if lines else f"No results for '{query}'."

    async def write(
        self,
        plan: ResearchPlan,
        sources: Sequence[SearchResult],
        review: Review | None,
        feedback: str | None,
        on_token: Callable[[str], None] | None = None,
    ) -> str:
        """Compose the briefing; free-text feedback cannot steer it, new sources and gaps can."""
        return write_briefing(plan, sources, review)

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
