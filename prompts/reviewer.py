"""Reviewer prompt: the review criteria, their weights and the verdict format."""

from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, Field

from core.models import ResearchPlan, SearchResult
from prompts.sources import bullet_list, format_sources

SYSTEM = """You are the Reviewer of research reports. Score the draft from 0 to 1 on:
1. fact_check (weight 40%): every claim agrees with the source its footnote names; no
   invented facts or sources.
2. completeness (weight 30%): every investigation point is answered.
3. logic (weight 20%): a clear line of argument, no contradiction, nothing repeated.
4. format (weight 10%): correct Markdown, the sections Executive Summary, Key Findings,
   Detailed Analysis and References.
List each concrete defect as an issue (type, severity, description, location). Say in the
feedback what to change, and suggest "research" when sources are missing for a point,
"write" when a rewrite from the same sources would fix it.
Answer with the JSON object the schema describes and nothing else."""


class ScoresOutput(BaseModel):
    """Scores per criterion."""

    fact_check: float = Field(ge=0, le=1)
    completeness: float = Field(ge=0, le=1)
    logic: float = Field(ge=0, le=1)
    format: float = Field(ge=0, le=1)


class IssueOutput(BaseModel):
    """One defect."""

    type: Literal["fact_check", "completeness", "logic", "format"]
    severity: Literal["low", "medium", "high"]
    description: str
    location: str = Field(description="Where: a section name, or '' for the whole report.")


class ReviewOutput(BaseModel):
    """The review as the model writes it; the engine applies the pass rule itself."""

    scores: ScoresOutput
    feedback: str = Field(description="What to change, in a few sentences.")
    suggested_action: Literal["research", "write"]
    issues: list[IssueOutput] = Field(max_length=20, description="Concrete defects; may be empty.")


def message(draft: str, plan: ResearchPlan, sources: Sequence[SearchResult]) -> str:
    """The user message: the plan, the numbered sources and the draft."""
    return "\n".join(
        [
            f"Theme: {plan.theme}",
            "Investigation points:",
            bullet_list(plan.investigation_points),
            "",
            "Sources:",
            format_sources(sources, 1_000),
            "",
            "Draft:",
            draft,
        ]
    )
