"""What a run spends: per node and per model, and the node calls and member answers of each round."""

from collections.abc import Sequence
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field, computed_field, model_validator

from core.models import utcnow


class NodeUsage(BaseModel):
    """What one node (or one model) has spent so far: `calls` are its steps (or calls to the model, a retried one counting once), `requests` are model requests."""

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
            **{f: getattr(self, f) + getattr(other, f) for f in NodeUsage.model_fields}
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
    """Model usage of one node call: requests and tokens, plus cost."""

    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0


class Submission(BaseModel):
    """One piece of work in a round: whether it succeeded, its model usage, when and how long."""

    status: Literal["SUCCESS", "ERROR"]
    error_message: str | None = Field(None, description="Why it failed or fell back.")
    usage: TokenUsage = Field(default_factory=TokenUsage)
    timestamp: datetime = Field(default_factory=utcnow)
    execution_time_ms: float = Field(ge=0)


class NodeSubmission(Submission):
    """One node call: what did the work, whether it succeeded, its usage and duration."""

    name: str = Field(min_length=1, description="The node: supervisor, researcher, ...")
    type: Literal["llm", "extractive", "simulated", "tools"] = Field(
        description="What did the work: a language model, deterministic code, or only tools."
    )


class MemberSubmission(Submission):
    """One member researcher's answer in a round (the team design's `MemberSubmission`)."""

    agent_name: str = Field(min_length=1, description="The member, e.g. member-2.")
    agent_type: str = Field(
        min_length=1, description="What kind of member: web-search or corpus-search."
    )
    content: str = Field("", description="What it found: each query's summary, in order.")


class _Tally(BaseModel):
    """A round's submissions with their success and failure counts and summed model usage."""

    round_number: int = Field(ge=1)
    submissions: Sequence[Submission] = Field(default_factory=list)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def success_count(self) -> int:
        """Submissions that succeeded."""
        return sum(s.status == "SUCCESS" for s in self.submissions)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def failure_count(self) -> int:
        """Submissions that failed or fell back."""
        return sum(s.status == "ERROR" for s in self.submissions)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def total_usage(self) -> TokenUsage:
        """Model usage summed over the round."""
        return TokenUsage(
            **{
                f: sum(getattr(s.usage, f) for s in self.submissions)
                for f in TokenUsage.model_fields
            }
        )


class MemberSubmissionsRecord(_Tally):
    """The member researchers' submissions of one round, in member order (not finish order)."""

    submissions: list[MemberSubmission] = Field(default_factory=list)


class RoundRecord(_Tally):
    """The node calls of one iteration, with their counts; and its members' record, if any."""

    thread_id: str
    submissions: list[NodeSubmission] = Field(default_factory=list)
    members: MemberSubmissionsRecord | None = Field(
        None, description="The member researchers the round's research step ran."
    )

    @model_validator(mode="after")
    def _members_of_this_round(self) -> "RoundRecord":
        if self.members is not None and self.members.round_number != self.round_number:
            raise ValueError(
                f"members: the record of round {self.members.round_number}, not {self.round_number}"
            )
        return self
