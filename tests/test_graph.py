import json
import re
from collections.abc import Sequence
from typing import Any

from langgraph.types import Command

from core.models import ResearchPlan, Review, SearchResult
from core.urls import normalize_url
from engines.checks import REQUIRED_SECTIONS
from engines.extractive import ExtractiveEngine
from engines.report_markdown import footnote_urls, sections, split_front_matter
from graph.builder import ResearchGraph
from nodes.context import Deps
from tools.local_corpus import LocalCorpus

from .support import FlakyProvider, run_graph, start


async def test_a_run_ends_with_a_cited_report_on_the_fixture_corpus(
    graph: ResearchGraph, deps: Deps
) -> None:
    values = await run_graph(graph, deps, "e2e", start())
    report = values["final_report"]
    front, body = split_front_matter(report)
    assert 'engine: "extractive' in front
    assert values["report_status"] in ("final", "partial", "insufficient")
    assert f"status: {values['report_status']}" in front
    headings = sections(body)
    assert all(name in headings for name in REQUIRED_SECTIONS)
    assert body.startswith("# History of the printing press")

    collected = {normalize_url(s.url) for s in values["research_data"]}
    definitions = footnote_urls(body)
    cited = {int(n) for n in re.findall(r"\[\^(\d+)\](?!:)", body)}
    assert cited, "the report cites nothing"
    assert cited == set(definitions), "every footnote resolves and every reference is cited"
    assert sorted(definitions) == list(range(1, len(definitions) + 1))
    assert all(normalize_url(u) in collected for u in definitions.values())
    assert len(set(definitions.values())) == len(definitions), "a source is listed twice"

    queries = values["queries_done"]
    assert [n.query for n in values["notes"]] == queries, "one research note per query"
    assert [n.step_no for n in values["notes"]] == list(range(1, len(queries) + 1))
    assert all(n.summary_md for n in values["notes"] if n.status == "ok")


async def test_every_report_sentence_is_quoted_from_its_source(
    graph: ResearchGraph, deps: Deps
) -> None:
    values = await run_graph(graph, deps, "quotes", start())
    review: Review = values["drafts"][-1].review
    assert review.scores.fact_check == 1.0


async def test_the_reviewer_streams_its_review_not_a_second_copy_of_the_draft(
    graph: ResearchGraph, deps: Deps
) -> None:
    config = {"configurable": {"thread_id": "review-bytes"}}
    reviews: list[dict[str, Any]] = []
    async for chunk in graph.astream(start(), config, context=deps, stream_mode="updates"):
        reviews += [update for node, update in chunk.items() if node == "reviewer"]
    values = (await graph.aget_state(config)).values
    assert reviews, "the run was reviewed"
    draft = values["drafts"][-1]
    assert draft.review is not None and draft.markdown
    for update in reviews:
        assert draft.markdown not in json.dumps(update, default=str)
        assert [d.markdown for d in update["drafts"]] == [None]


class FailingReviewEngine(ExtractiveEngine):
    """Never satisfied, so the run can only end by spending its budget."""

    async def review(
        self, draft: str, plan: ResearchPlan, sources: Sequence[SearchResult]
    ) -> Review:
        real = await super().review(draft, plan, sources)
        return real.model_copy(
            update={"approved": False, "suggested_action": "research", "overall_score": 0.5}
        )


async def test_a_spent_budget_ends_with_a_report_marked_partial(
    graph: ResearchGraph, corpus: LocalCorpus
) -> None:
    deps = Deps(engine=FailingReviewEngine(), search=corpus)
    values = await run_graph(graph, deps, "budget", start(max_iterations=4))
    assert values["iteration_count"] == 4
    assert values["report_status"] == "partial"
    front, _ = split_front_matter(values["final_report"])
    assert "status: partial" in front
    assert "Partial report" in values["final_report"]


async def test_the_first_draft_is_written_even_when_the_budget_is_spent_early(
    graph: ResearchGraph, deps: Deps
) -> None:
    values = await run_graph(graph, deps, "tiny", start(max_iterations=1, min_sources=50))
    assert len(values["drafts"]) == 1
    assert values["final_report"]
    # The front matter's count and the budget it names agree, with the step past it said.
    front, _ = split_front_matter(values["final_report"])
    assert "iteration_budget: 1" in front
    assert f"iterations: {values['iteration_count']}" in front and values["iteration_count"] > 1
    assert "past_budget:" in front and "wrote and reviewed a first draft" in front


async def test_a_provider_failing_every_second_query_still_gives_a_report(
    graph: ResearchGraph, corpus: LocalCorpus
) -> None:
    deps = Deps(engine=ExtractiveEngine(), search=FlakyProvider(corpus))
    values = await run_graph(graph, deps, "flaky", start())
    failed = [n for n in values["notes"] if n.status == "failed"]
    assert failed, "the failures are recorded in the notes"
    assert all("ConnectionError" in (n.error or "") for n in failed)
    assert any(n.status == "ok" for n in values["notes"])
    assert values["final_report"]


async def test_a_topic_the_corpus_knows_nothing_about_ends_with_an_honest_insufficient_report(
    graph: ResearchGraph, deps: Deps
) -> None:
    values = await run_graph(graph, deps, "nothing", start("zyxwv frobnication", max_iterations=3))
    _, body = split_front_matter(values["final_report"])
    assert values["report_status"] == "insufficient"
    assert "[^" not in body, "off-topic sources are not cited"
    assert "say little about this topic" in body
    # With nothing cited there is no supported share to boast of.
    front, _ = split_front_matter(values["final_report"])
    assert "supported_citations: null" in front and "cited_claims: 0" in front
    assert values["review"].citations.share is None


async def test_a_partial_report_points_to_its_gaps_only_when_it_lists_them(
    graph: ResearchGraph, corpus: LocalCorpus
) -> None:
    deps = Deps(engine=FailingReviewEngine(), search=corpus)
    values = await run_graph(graph, deps, "gaps", start(max_iterations=2))
    _, body = split_front_matter(values["final_report"])
    banner = next(line for line in values["final_report"].splitlines() if "Partial report" in line)
    assert ("Open Questions" in banner) == ("## Open Questions" in body)


async def test_a_plan_edited_down_to_no_queries_ends_insufficient_and_says_why(
    graph: ResearchGraph, deps: Deps
) -> None:
    question = await _plan_interrupt(graph, deps, "noqueries")
    plan = {**question["plan"], "search_queries": []}
    values = await run_graph(
        graph, deps, "noqueries", Command(resume={"decision": "edit", "plan": plan})
    )
    assert values["report_status"] == "insufficient"
    assert "no search queries" in values["final_report"]
    assert values.get("research_data", []) == []


async def _plan_interrupt(graph: ResearchGraph, deps: Deps, thread: str) -> dict[str, Any]:
    values = await run_graph(graph, deps, thread, start(approval="plan"))
    snapshot = await graph.aget_state({"configurable": {"thread_id": thread}})
    assert snapshot.next == ("approve_plan",)
    assert values.get("research_data", []) == [], "nothing is searched before approval"
    question = snapshot.tasks[0].interrupts[0].value
    assert question["type"] == "plan"
    return question  # type: ignore[no-any-return]


async def test_approving_the_plan_runs_its_queries(graph: ResearchGraph, deps: Deps) -> None:
    question = await _plan_interrupt(graph, deps, "approve")
    values = await run_graph(graph, deps, "approve", Command(resume={"decision": "approve"}))
    assert (
        values["queries_done"][: len(question["plan"]["search_queries"])]
        == question["plan"]["search_queries"]
    )
    assert values["final_report"]


async def test_an_edited_plan_replaces_the_queries(graph: ResearchGraph, deps: Deps) -> None:
    question = await _plan_interrupt(graph, deps, "edit")
    plan = dict(question["plan"], search_queries=["Gutenberg Bible Mainz", "movable type Korea"])
    values = await run_graph(
        graph, deps, "edit", Command(resume={"decision": "edit", "plan": plan})
    )
    assert values["task_plan"].search_queries == ["Gutenberg Bible Mainz", "movable type Korea"]
    assert values["queries_done"][:2] == ["Gutenberg Bible Mainz", "movable type Korea"]


async def test_a_rejected_plan_is_replanned_with_the_feedback(
    graph: ResearchGraph, deps: Deps
) -> None:
    await _plan_interrupt(graph, deps, "reject")
    await run_graph(
        graph,
        deps,
        "reject",
        Command(resume={"decision": "reject", "feedback": "focus on movable type in Korea"}),
    )
    snapshot = await graph.aget_state({"configurable": {"thread_id": "reject"}})
    assert snapshot.next == ("approve_plan",), "the new plan waits for approval again"
    new_plan = snapshot.values["task_plan"]
    assert any("korea" in p.lower() for p in new_plan.investigation_points)
    assert any("korea" in q.lower() for q in new_plan.search_queries)


async def test_the_report_gate_rewrites_on_reject_and_ends_on_approve(
    graph: ResearchGraph, deps: Deps
) -> None:
    thread = "report-gate"
    await run_graph(graph, deps, thread, start(approval="plan_and_report"))
    await run_graph(graph, deps, thread, Command(resume={"decision": "approve"}))
    snapshot = await graph.aget_state({"configurable": {"thread_id": thread}})
    assert snapshot.next == ("finalize",)
    assert snapshot.tasks[0].interrupts[0].value["type"] == "report"
    drafts_before = len(snapshot.values["drafts"])

    await run_graph(
        graph, deps, thread, Command(resume={"decision": "reject", "feedback": "shorter please"})
    )
    snapshot = await graph.aget_state({"configurable": {"thread_id": thread}})
    assert len(snapshot.values["drafts"]) > drafts_before, (
        "a reject sends the report back to the writer"
    )
    assert snapshot.next == ("finalize",), "and the new report waits for sign-off"

    values = await run_graph(graph, deps, thread, Command(resume={"decision": "approve"}))
    assert values["final_report"]
    assert not (await graph.aget_state({"configurable": {"thread_id": thread}})).next


class FailingSummaryEngine(ExtractiveEngine):
    """Its summariser breaks on every query naming Gutenberg."""

    async def summarize(self, query: str, sources: Sequence[SearchResult]) -> str:
        if "gutenberg" in query.lower():
            raise TimeoutError("summariser timed out")
        return await super().summarize(query, sources)


async def test_a_failed_summary_keeps_its_sources_and_the_run_goes_on(
    graph: ResearchGraph, corpus: LocalCorpus
) -> None:
    deps = Deps(engine=FailingSummaryEngine(), search=corpus)
    values = await run_graph(graph, deps, "summary", start())
    broken = [n for n in values["notes"] if n.error and "summary failed" in n.error]
    assert broken, "the failure is recorded in the notes"
    assert all(n.status == "ok" and n.sources for n in broken)
    assert values["final_report"]


async def test_the_front_matter_is_yaml_even_for_awkward_topics(
    graph: ResearchGraph, deps: Deps
) -> None:
    topic = "printing press: \"quotes\", 'apostrophes' and a back\\slash"
    values = await run_graph(graph, deps, "yaml", start(topic, max_iterations=2))
    front, _ = split_front_matter(values["final_report"])
    fields = dict(line.split(": ", 1) for line in front.strip("-\n").splitlines())
    assert json.loads(fields["topic"]) == topic
