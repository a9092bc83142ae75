"""The research vocabulary: plans, sources, notes, drafts, reviews, usage, run options.

This module is a leaf (pydantic and the standard library only): every layer,
engines and nodes included, speaks it without importing the graph itself.
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
    field_validator,
    model_validator,
)

# Seed 001 F005: review weights and the pass thresholds.
REVIEW_WEIGHTS: dict[str, float] = {
    "fact_check": 0.4,
    "completeness": 0.3,
    "logic": 0.2,
    "format": 0.1,
}
PASS_OVERALL = 0.8
PASS_FACT_CHECK = 0.9

TOPIC_MAX_CHARS = 2000
QUERY_MAX_CHARS = 400


def non_blank(max_length: int) -> StringConstraints:
    """Stripped text of 1..max_length characters; the pattern tells the schema it is non-blank."""
    return StringConstraints(
        strip_whitespace=True, min_length=1, max_length=max_length, pattern=r"\S"
    )


Topic = Annotated[str, non_blank(TOPIC_MAX_CHARS)]
Query = Annotated[str, non_blank(QUERY_MAX_CHARS)]
Approval = Literal["none", "plan", "plan_and_report"]
Action = Literal["research", "write", "review", "end"]


def utcnow() -> datetime:
    """Return the current time, timezone-aware."""
    return datetime.now(UTC)


def explain(exc: ValidationError, prefix: tuple[str, ...] = ()) -> str:
    """One line naming each bad field (its path after `prefix`) and what is wrong with it."""
    return "; ".join(
        f"{'.'.join(map(str, (*prefix, *e['loc']))) or 'value'}: {e['msg']}" for e in exc.errors()
    )


class RunOptions(BaseModel):
    """Per-run limits a caller may choose, within the server's bounds."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_iterations: int = Field(
        5, ge=1, le=20, description="Researcher, writer and reviewer steps, each counts one."
    )
    min_sources: int = Field(
        5, ge=1, le=100, description="Sources to collect before the first draft."
    )
    max_results: int = Field(5, ge=1, le=20, description="Search results per query.")
    approval: Approval = Field(
        "none", description="Where a human must approve: nowhere, the plan, or plan and report."
    )
    time_budget_s: float = Field(
        600.0, ge=1, le=86_400, description="Active time budget in seconds."
    )
    max_tokens: int | None = Field(
        None, ge=1, description="Model token budget of the run (input + output); none: no cap."
    )
    max_cost_usd: float | None = Field(
        None, gt=0, description="Estimated model cost budget of the run in US dollars."
    )

    @field_validator(
        "max_iterations",
        "min_sources",
        "max_results",
        "time_budget_s",
        "max_tokens",
        "max_cost_usd",
        mode="before",
    )
    @classmethod
    def _json_number(cls, value: object) -> object:
        # As JSON Schema: 5 and 5.0 are numbers, true and "5" are not (pydantic would coerce).
        if value is None:
            return value
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError("must be a number")
        return value


class ResearchRequest(BaseModel):
    """What a caller asks for: validated at the edge, before anything is written."""

    model_config = ConfigDict(extra="forbid")

    topic: Topic
    options: RunOptions = Field(default_factory=RunOptions)


class ResearchPlan(BaseModel):
    """What to investigate and how to search for it (seed 001 §3.2.5.1)."""

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
    """One search step, kept for audit (seed 002 research_notes)."""

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


class ReviewIssue(BaseModel):
    """A concrete defect found in a draft."""

    type: IssueType
    severity: Literal["low", "medium", "high"]
    description: str
    location: str = ""


class ReviewScores(BaseModel):
    """Scores per criterion, each in 0..1."""

    fact_check: float = Field(ge=0, le=1)
    completeness: float = Field(ge=0, le=1)
    logic: float = Field(ge=0, le=1)
    format: float = Field(ge=0, le=1)

    def overall(self) -> float:
        """Weighted score with the seed 001 F005 weights."""
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
    """A reviewer's verdict on one draft (seed 001 §3.5.6)."""

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
    report: str | None = None
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


class RoutingDecision(BaseModel):
    """The supervisor's choice when no fixed rule applies."""

    action: Literal["research", "write", "end"]
    reasoning: str


class NodeUsage(BaseModel):
    """What one node (or one model) has spent so far.

    `calls` are a node's steps, or the calls made to a model (a retried call is one call
    and several `requests`; a repair round is a call of its own); `requests` are model
    requests in both views.
    """

    calls: int = 0
    seconds: float = 0.0
    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    errors: int = Field(0, description="Requests that failed (a retried request counts each time).")
    estimated: int = Field(
        0, description="Requests whose server reported no usage: their tokens are estimated."
    )

    def __add__(self, other: "NodeUsage") -> "NodeUsage":
        return NodeUsage(
            calls=self.calls + other.calls,
            estimated=self.estimated + other.estimated,
            seconds=self.seconds + other.seconds,
            requests=self.requests + other.requests,
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            cost_usd=self.cost_usd + other.cost_usd,
            errors=self.errors + other.errors,
        )

    @property
    def tokens(self) -> int:
        """Prompt and completion tokens."""
        return self.prompt_tokens + self.completion_tokens


def _merge(left: dict[str, NodeUsage], right: dict[str, NodeUsage]) -> dict[str, NodeUsage]:
    merged = dict(left)
    for name, spent in right.items():
        merged[name] = merged.get(name, NodeUsage()) + spent
    return merged


class Usage(BaseModel):
    """Spending per node and per model; the sum of node seconds is the run's active time."""

    nodes: dict[str, NodeUsage] = Field(default_factory=dict)
    models: dict[str, NodeUsage] = Field(
        default_factory=dict, description="Per model: requests, tokens, latency, estimated cost."
    )

    def __add__(self, other: "Usage") -> "Usage":
        return Usage(
            nodes=_merge(self.nodes, other.nodes), models=_merge(self.models, other.models)
        )

    @property
    def seconds(self) -> float:
        """Active time spent in nodes."""
        return sum(n.seconds for n in self.nodes.values())

    @property
    def total_tokens(self) -> int:
        """Prompt and completion tokens over all nodes."""
        return sum(n.tokens for n in self.nodes.values())

    @property
    def cost_usd(self) -> float:
        """Estimated model cost over all nodes."""
        return sum(n.cost_usd for n in self.nodes.values())


class TokenUsage(BaseModel):
    """Model usage of one node call (seed 003's RunUsage: requests and tokens), plus cost."""

    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0


class NodeSubmission(BaseModel):
    """One node call, shaped after seed 003's MemberSubmission."""

    name: str = Field(min_length=1, description="The node: supervisor, researcher, ...")
    type: Literal["llm", "extractive", "simulated", "tools"] = Field(
        description="What did the work: a language model, deterministic code, or only tools."
    )
    status: Literal["SUCCESS", "ERROR"]
    error_message: str | None = Field(None, description="Why it failed or fell back.")
    usage: TokenUsage = Field(default_factory=TokenUsage)
    timestamp: datetime = Field(default_factory=utcnow)
    execution_time_ms: float = Field(ge=0)


class RoundRecord(BaseModel):
    """The node calls of one iteration (seed 003's MemberSubmissionsRecord); one per round."""

    thread_id: str
    round_number: int = Field(ge=1)
    submissions: list[NodeSubmission] = Field(default_factory=list)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def success_count(self) -> int:
        """Calls that succeeded."""
        return sum(s.status == "SUCCESS" for s in self.submissions)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def failure_count(self) -> int:
        """Calls that failed or fell back."""
        return sum(s.status == "ERROR" for s in self.submissions)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def total_usage(self) -> TokenUsage:
        """Model usage summed over the round."""
        return TokenUsage(
            requests=sum(s.usage.requests for s in self.submissions),
            input_tokens=sum(s.usage.input_tokens for s in self.submissions),
            output_tokens=sum(s.usage.output_tokens for s in self.submissions),
            cost_usd=sum(s.usage.cost_usd for s in self.submissions),
        )
