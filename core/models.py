"""The research vocabulary: plans, sources, notes, drafts, reviews and decisions.

A leaf (pydantic and the standard library only), so every layer can speak it.
"""

from datetime import UTC, datetime
from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    computed_field,
    model_validator,
)

# Review criteria weights and the pass thresholds (`Review.from_scores`).
REVIEW_WEIGHTS: dict[str, float] = {
    "fact_check": 0.4,
    "completeness": 0.3,
    "logic": 0.2,
    "format": 0.1,
}
PASS_OVERALL = 0.8
PASS_FACT_CHECK = 0.9

QUERY_MAX_CHARS = 400


def non_blank(max_length: int) -> StringConstraints:
    """Return the constraints of stripped text of 1..max_length characters (non-blank, in the schema too)."""
    return StringConstraints(
        strip_whitespace=True, min_length=1, max_length=max_length, pattern=r"\S"
    )


# The longest report a client may give (an edited report, an imported run): about 30,000
# words, many times what a run writes.
REPORT_MAX_CHARS = 200_000
Query = Annotated[str, non_blank(QUERY_MAX_CHARS)]
Action = Literal["research", "write", "review", "end"]


def utcnow() -> datetime:
    """Return the current time, timezone-aware."""
    return datetime.now(UTC)


def explain(exc: ValidationError, prefix: tuple[str, ...] = ()) -> str:
    """Return one line naming each bad field (its path after `prefix`) and what is wrong with it."""
    return "; ".join(
        f"{'.'.join(map(str, (*prefix, *e['loc']))) or 'value'}: {e['msg']}" for e in exc.errors()
    )


class ResearchPlan(BaseModel):
    """What to investigate (the investigation points) and how to search for it (the queries)."""

    theme: Annotated[str, non_blank(300)]
    investigation_points: list[Annotated[str, non_blank(300)]] = Field(min_length=1, max_length=12)
    search_queries: list[Query] = Field(default_factory=list, max_length=20)
    plan_text: str = ""
    created_at: datetime = Field(default_factory=utcnow)


class SearchResult(BaseModel):
    """One source collected for the report."""

    title: str
    url: str
    content: str
    source: str = "local"
    published_date: str | None = None
    relevance_score: float | None = None
    query: str | None = None


class ResearchNote(BaseModel):
    """One search step, kept for audit: the query, a summary and the sources it found."""

    step_no: int = Field(ge=1)
    query: str
    summary_md: str
    sources: list[str] = Field(default_factory=list)
    status: Literal["ok", "empty", "failed"] = "ok"
    error: str | None = None
    pages_read: int = Field(
        0, ge=0, description="Result pages whose full text replaced the snippet."
    )
    page_errors: list[str] = Field(
        default_factory=list, description="Pages that could not be read."
    )
    created_at: datetime = Field(default_factory=utcnow)


IssueType = Literal["fact_check", "completeness", "logic", "format"]
Severity = Literal["low", "medium", "high"]


class ReviewIssue(BaseModel):
    """A concrete defect found in a draft."""

    type: IssueType
    severity: Severity
    description: str
    location: str = ""


class ReviewScores(BaseModel):
    """Scores per criterion, each in 0..1."""

    fact_check: float = Field(ge=0, le=1)
    completeness: float = Field(ge=0, le=1)
    logic: float = Field(ge=0, le=1)
    format: float = Field(ge=0, le=1)

    def overall(self) -> float:
        """Return the score weighted with `REVIEW_WEIGHTS`."""
        values = self.model_dump()
        return round(sum(float(values[name]) * w for name, w in REVIEW_WEIGHTS.items()), 4)


class CitationCheck(BaseModel):
    """How a draft's footnotes held up against the sources the run collected."""

    cited_claims: int = Field(0, ge=0, description="Sentences that cite at least one source.")
    supported: int = Field(0, ge=0, description="Cited sentences their source's text supports.")
    uncited_claims: int = Field(
        0, ge=0, description="Sentences that make a claim with no footnote."
    )
    unknown_removed: int = Field(
        0, ge=0, description="Footnotes to sources the run never collected, removed from the draft."
    )

    @computed_field  # type: ignore[prop-decorator]
    @property
    def share(self) -> float | None:
        """Supported share of the cited sentences (None when nothing is cited: no share)."""
        return round(self.supported / self.cited_claims, 4) if self.cited_claims else None


class Review(BaseModel):
    """A reviewer's verdict on one draft: scores, issues, feedback and the next action."""

    approved: bool
    overall_score: float = Field(ge=0, le=1)
    scores: ReviewScores
    feedback: str | None = None
    suggested_action: Literal["research", "write", "end"] = "end"
    issues: list[ReviewIssue] = Field(default_factory=list)
    citations: CitationCheck | None = None

    @classmethod
    def from_scores(
        cls,
        scores: ReviewScores,
        issues: list[ReviewIssue],
        feedback: str | None,
        suggested_action: Literal["research", "write"],
        citations: CitationCheck | None = None,
        drifts: bool = False,
    ) -> "Review":
        """Apply the pass rule: overall >= 0.8 and fact_check >= 0.9, and no drift.

        `drifts`: too little of what the draft cites is about its subject
        (`engines.checks`); such a draft goes back however well it scores otherwise.
        """
        overall = scores.overall()
        approved = overall >= PASS_OVERALL and scores.fact_check >= PASS_FACT_CHECK and not drifts
        return cls(
            approved=approved,
            overall_score=overall,
            scores=scores,
            feedback=None if approved else feedback,
            suggested_action="end" if approved else suggested_action,
            issues=issues,
            citations=citations,
        )

    @model_validator(mode="after")
    def _approved_means_end(self) -> "Review":
        if self.approved and self.suggested_action != "end":
            self.suggested_action = "end"
        return self


class Draft(BaseModel):
    """A written report and, once reviewed, its review."""

    version: int = Field(ge=1)
    markdown: str
    source_count: int = Field(0, ge=0, description="Sources collected when it was written.")
    review: Review | None = None
    created_at: datetime = Field(default_factory=utcnow)


class DraftReview(BaseModel):
    """A review of a draft already in the state, merged into it by version (`markdown`: only if the review changed the text)."""

    version: int = Field(ge=1)
    review: Review
    markdown: str | None = None


class ApprovalDecision(BaseModel):
    """A human's answer to an approval interrupt (plan or report)."""

    # The schema states the rules of the validator below, so clients can know them.
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "allOf": [
                {
                    "if": {"properties": {"decision": {"const": "edit"}}},
                    "then": {
                        "anyOf": [
                            {"required": ["plan"], "properties": {"plan": {"type": "object"}}},
                            {"required": ["report"], "properties": {"report": {"type": "string"}}},
                        ]
                    },
                },
                {
                    "if": {"properties": {"decision": {"const": "reject"}}},
                    "then": {
                        "required": ["feedback"],
                        "properties": {"feedback": {"type": "string", "pattern": "\\S"}},
                    },
                },
            ]
        },
    )

    decision: Literal["approve", "edit", "reject"]
    plan: ResearchPlan | None = None
    report: str | None = Field(None, max_length=REPORT_MAX_CHARS)
    feedback: str | None = Field(None, max_length=4000)

    @model_validator(mode="after")
    def _payload_matches_decision(self) -> "ApprovalDecision":
        if self.decision == "edit" and self.plan is None and self.report is None:
            raise ValueError(
                "decision 'edit' needs a 'plan' (plan gate) or a 'report' (report gate)"
            )
        if self.decision == "reject" and not (self.feedback or "").strip():
            raise ValueError("decision 'reject' needs 'feedback' saying what to change")
        return self


class Rerun(BaseModel):
    """A run that re-runs another's topic, options and plan: on its evidence, or afresh.

    `replay` answers every search and page read from the records of the run it re-runs
    (no network: with the extractive engine the report is the same); `refresh` searches
    and reads again.
    """

    of: str = Field(description="The thread it re-runs, as its owner knows it.")
    mode: Literal["replay", "refresh"]


class RoutingDecision(BaseModel):
    """The supervisor's choice when no fixed rule applies."""

    action: Literal["research", "write", "end"]
    reasoning: str
