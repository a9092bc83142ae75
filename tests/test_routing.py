from typing import Any

from core.budget import fixed_supervisor_rule
from core.models import Draft, Review, ReviewScores, SearchResult
from core.options import RunOptions
from core.state import ResearchState, initial_state
from core.usage import NodeUsage, Usage
from graph.routing import route_reviewer, route_supervisor


def state(
    sources: int = 0, draft: bool = False, iteration: int = 0, seconds: float = 0.0, **options: Any
) -> ResearchState:
    values = initial_state("topic", RunOptions(**options))
    values["research_data"] = [
        SearchResult(title=str(i), url=f"https://e.org/{i}", content="c") for i in range(sources)
    ]
    values["iteration_count"] = iteration
    values["usage"] = Usage(nodes={"researcher": NodeUsage(seconds=seconds)})
    if draft:
        values["drafts"] = [Draft(version=1, markdown="# d", source_count=sources)]
    return values


def review(approved: bool, action: str = "research") -> Review:
    value = 1.0 if approved else 0.2
    return Review.from_scores(
        ReviewScores(fact_check=value, completeness=value, logic=value, format=value),
        [],
        "fb",
        action,
    )  # type: ignore[arg-type]


def test_spent_iterations_without_a_draft_write_once() -> None:
    assert fixed_supervisor_rule(state(sources=0, iteration=5))[0] == "write"  # type: ignore[index]


def test_spent_iterations_with_a_draft_end() -> None:
    assert fixed_supervisor_rule(state(sources=9, draft=True, iteration=5))[0] == "end"  # type: ignore[index]


def test_spent_time_budget_counts_like_spent_iterations() -> None:
    assert fixed_supervisor_rule(state(sources=0, seconds=11, time_budget_s=10))[0] == "write"  # type: ignore[index]


def test_too_few_sources_research() -> None:
    assert fixed_supervisor_rule(state(sources=4, min_sources=5))[0] == "research"  # type: ignore[index]


def test_enough_sources_without_draft_write() -> None:
    assert fixed_supervisor_rule(state(sources=5, min_sources=5))[0] == "write"  # type: ignore[index]


def test_otherwise_the_engine_decides() -> None:
    assert fixed_supervisor_rule(state(sources=5, draft=True, iteration=3)) is None


def test_an_unapproved_plan_goes_to_approval() -> None:
    values = state(approval="plan")
    values["task_plan"] = None
    assert route_supervisor(values) == "researcher"
    from core.models import ResearchPlan

    values["task_plan"] = ResearchPlan(theme="t", investigation_points=["p"], search_queries=["q"])
    assert route_supervisor(values) == "approve_plan"
    values["plan_approved"] = True
    values["next_action"] = "write"
    assert route_supervisor(values) == "writer"
    values["next_action"] = "end"
    assert route_supervisor(values) == "finalize"


def test_an_approved_review_ends() -> None:
    values = state(sources=5, draft=True, iteration=3)
    values["review"] = review(approved=True)
    assert route_reviewer(values) == "finalize"


def test_a_failed_review_follows_its_suggestion_within_budget() -> None:
    values = state(sources=5, draft=True, iteration=3)
    values["review"] = review(approved=False, action="research")
    assert route_reviewer(values) == "researcher"
    values["review"] = review(approved=False, action="write")
    assert route_reviewer(values) == "writer"


def test_a_failed_review_ends_when_the_budget_is_spent() -> None:
    values = state(sources=5, draft=True, iteration=5)
    values["review"] = review(approved=False, action="research")
    assert route_reviewer(values) == "finalize"
