import pytest
from pydantic import ValidationError

from core.models import (
    ApprovalDecision,
    Draft,
    DraftReview,
    Review,
    ReviewScores,
    SearchResult,
)
from core.options import (
    ResearchRequest,
    RunOptions,
)
from core.state import merge_drafts, merge_sources, union_queries
from core.usage import (
    NodeUsage,
    Usage,
)
from nodes.finalize import best_draft


def source(url: str, title: str = "t") -> SearchResult:
    return SearchResult(title=title, url=url, content="c")


def test_sources_are_deduplicated_by_normalised_url() -> None:
    left = [source("https://Example.org/a/", "first")]
    right = [
        source("https://example.org/a#x", "dup"),
        source("https://example.org/a?utm_medium=m", "dup2"),
        source("https://example.org/b", "new"),
    ]
    merged = merge_sources(left, right)
    assert [s.title for s in merged] == ["first", "new"]


def test_a_reviewed_draft_replaces_its_unreviewed_version() -> None:
    review = Review.from_scores(
        ReviewScores(fact_check=1, completeness=1, logic=1, format=1), [], None, "write"
    )
    drafts = merge_drafts(
        [Draft(version=1, markdown="a", source_count=1)],
        [Draft(version=1, markdown="a", source_count=1, review=review)],
    )
    assert len(drafts) == 1 and drafts[0].review == review
    assert [
        d.version for d in merge_drafts(drafts, [Draft(version=2, markdown="b", source_count=2)])
    ] == [1, 2]


def test_a_review_joins_its_draft_without_a_copy_of_the_text() -> None:
    review = Review.from_scores(
        ReviewScores(fact_check=0.9, completeness=0.9, logic=0.9, format=0.9), [], None, "end"
    )
    drafts = [Draft(version=1, markdown="one"), Draft(version=2, markdown="two [^9]")]
    kept = merge_drafts(drafts, [DraftReview(version=1, review=review)])
    assert [(d.version, d.markdown, d.review) for d in kept] == [
        (1, "one", review),
        (2, "two [^9]", None),
    ]
    # A review that removed footnotes carries the text it left.
    edited = merge_drafts(kept, [DraftReview(version=2, review=review, markdown="two")])
    assert [(d.markdown, d.review) for d in edited] == [("one", review), ("two", review)]
    assert edited[0].created_at == drafts[0].created_at
    with pytest.raises(ValueError, match="draft 3"):
        merge_drafts(drafts, [DraftReview(version=3, review=review)])


def test_queries_are_remembered_once_case_insensitively() -> None:
    assert union_queries(["Printing press"], ["printing press", "Gutenberg"]) == [
        "Printing press",
        "Gutenberg",
    ]


def test_usage_adds_up_per_node() -> None:
    total = Usage(nodes={"writer": NodeUsage(calls=1, seconds=0.5)}) + Usage(
        nodes={
            "writer": NodeUsage(calls=1, seconds=0.25),
            "reviewer": NodeUsage(calls=1, seconds=1),
        }
    )
    assert total.nodes["writer"].calls == 2
    assert total.seconds == pytest.approx(1.75)


@pytest.mark.parametrize(
    ("scores", "approved"),
    [
        ((0.9, 0.8, 0.7, 0.6), True),  # overall 0.8, fact_check 0.9: both thresholds met exactly
        ((0.85, 1.0, 1.0, 1.0), False),  # overall 0.94 but fact_check below 0.9
        ((1.0, 0.5, 0.5, 0.5), False),  # fact_check fine, overall 0.7
    ],
)
def test_review_pass_rule_uses_the_review_weights_and_thresholds(
    scores: tuple[float, ...], approved: bool
) -> None:
    fact, completeness, logic, fmt = scores
    review = Review.from_scores(
        ReviewScores(fact_check=fact, completeness=completeness, logic=logic, format=fmt),
        [],
        "fix it",
        "research",
    )
    assert review.approved is approved
    assert review.suggested_action == ("end" if approved else "research")


@pytest.mark.parametrize(
    "options",
    [
        {"max_iterations": 0},
        {"max_iterations": 21},
        {"min_sources": 0},
        {"max_results": 21},
        {"approval": "always"},
        {"time_budget_s": 0},
        {"max_results": True},
        {"min_sources": "5"},
        {"colour": "red"},
    ],
)
def test_run_options_out_of_bounds_are_rejected(options: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        RunOptions(**options)  # type: ignore[arg-type]


def test_run_option_defaults_are_the_documented_ones() -> None:
    options = RunOptions()
    assert (options.max_iterations, options.min_sources, options.approval) == (5, 5, "none")


@pytest.mark.parametrize("topic", ["", "   ", "x" * 2001])
def test_empty_or_overlong_topics_are_rejected(topic: str) -> None:
    with pytest.raises(ValidationError):
        ResearchRequest(topic=topic)


def test_approval_decisions_need_their_payload() -> None:
    with pytest.raises(ValidationError, match="needs a 'plan'"):
        ApprovalDecision(decision="edit")
    with pytest.raises(ValidationError, match="needs 'feedback'"):
        ApprovalDecision(decision="reject", feedback=" ")
    assert ApprovalDecision(decision="approve").decision == "approve"


def test_best_draft_prefers_approved_then_highest_score() -> None:
    def reviewed(version: int, fact: float, completeness: float) -> Draft:
        review = Review.from_scores(
            ReviewScores(fact_check=fact, completeness=completeness, logic=1, format=1),
            [],
            "x",
            "write",
        )
        return Draft(version=version, markdown=str(version), source_count=1, review=review)

    assert (
        best_draft([reviewed(1, 0.5, 0.5), reviewed(2, 0.8, 0.9), reviewed(3, 0.6, 0.6)]).version
        == 2
    )  # type: ignore[union-attr]
    assert best_draft([reviewed(1, 1, 1), reviewed(2, 0.8, 1)]).version == 1  # type: ignore[union-attr]
    assert best_draft([]) is None
