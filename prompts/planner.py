"""Supervisor prompts: the research plan and the routing decision."""

from collections.abc import Sequence
from typing import Annotated, Literal

from pydantic import BaseModel, Field

from core.models import SearchResult
from prompts.sources import bullet_list, format_sources
from prompts.strict import Line

PLAN_SYSTEM = """You are the Supervisor of a research agent. You turn a topic into a research plan.

Rules:
- 3 to 6 investigation points: the distinct questions a thorough report must answer.
- 1 to 3 short web search queries (a few keywords each, no quotes or operators) that
  together cover the points; at least one names the topic's subject.
- Write the points, queries and plan_text in the same language as the topic.
- Answer with the JSON object the schema describes and nothing else."""

ROUTE_SYSTEM = """You are the Supervisor of a research agent. Decide the next action:
- "research": the collected sources leave an investigation point unanswered, and searching
  again can find it;
- "write": the sources are enough and the latest draft (if any) can be improved by rewriting;
- "end": the latest draft passed review, or nothing more can be gained.
Answer with the JSON object the schema describes: the action and a one-sentence reason."""

Text = Annotated[str, Line(300)]
Query = Annotated[str, Line(200)]


class PlanOutput(BaseModel):
    """The plan as the model writes it (the engine adds the theme and a timestamp)."""

    investigation_points: list[Text] = Field(
        min_length=1, max_length=8, description="The questions the report must answer."
    )
    search_queries: list[Query] = Field(
        min_length=1, max_length=3, description="Short web search queries about the topic."
    )
    plan_text: str = Field(description="Two or three sentences: how the research will proceed.")


class RouteOutput(BaseModel):
    """The routing decision as the model writes it."""

    action: Literal["research", "write", "end"]
    reasoning: str = Field(description="One sentence: why.")


def plan_message(topic: str, probe: Sequence[SearchResult], feedback: str | None) -> str:
    """The user message for planning; the probe results show what the web says first."""
    parts = [
        f"Topic: {topic}",
        "",
        "First search results for the topic:",
        format_sources(probe, 400),
    ]
    if feedback:
        parts += ["", f"A reviewer rejected the previous plan with this feedback: {feedback}"]
    return "\n".join(parts)


def route_message(
    topic: str,
    points: Sequence[str],
    source_count: int,
    new_since_draft: int,
    review_summary: str,
    iteration: int,
    max_iterations: int,
) -> str:
    """The user message for the routing decision."""
    return "\n".join(
        [
            f"Topic: {topic}",
            "Investigation points:",
            bullet_list(points),
            f"Sources collected: {source_count} ({new_since_draft} since the latest draft).",
            f"Latest review: {review_summary}",
            f"Iteration {iteration} of {max_iterations}.",
        ]
    )
