"""The Engine protocol: the "brain" the nodes call, with or without a language model."""

from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

from langchain_core.messages import AIMessage, BaseMessage
from pydantic import BaseModel

from core.models import ResearchPlan, Review, RoutingDecision, SearchResult


class ModelAccessError(Exception):
    """The engine's model refused a request in a way retrying cannot fix (bad key, unknown model).

    The message names the setting to fix and holds no secret; nodes halt the run on it.
    """


class Progress(BaseModel):
    """What the supervisor knows when no fixed routing rule applies."""

    topic: str
    plan: ResearchPlan
    source_count: int
    sources_at_last_draft: int
    has_draft: bool
    last_review: Review | None
    iteration_count: int
    max_iterations: int


@runtime_checkable
class Engine(Protocol):
    """Plans, decides, summarises, writes and reviews; implemented by `extractive` and `llm`.

    A model's bad or missing answer never fails a method (the LLM engine falls back and
    records it); `ModelAccessError` means the model refuses to serve the run at all.
    """

    name: str
    description: str

    @property
    def models(self) -> dict[str, str]:
        """The model each role uses ({} without a language model), for the report."""
        ...

    async def plan(
        self, topic: str, probe: Sequence[SearchResult], feedback: str | None
    ) -> ResearchPlan:
        """Expand a topic into investigation points and short search queries.

        `probe` holds the first results of searching the topic itself; `feedback` is what a
        human asked to change in a rejected plan, if anything.
        """
        ...

    async def refine_queries(
        self,
        plan: ResearchPlan,
        sources: Sequence[SearchResult],
        done: Sequence[str],
        review: Review | None,
    ) -> list[str]:
        """Return new queries (possibly none) that would close the known gaps.

        None of `done` is returned; the last `review`, if any, says what is missing.
        """
        ...

    async def decide(self, progress: Progress) -> RoutingDecision:
        """Choose research, write or end, with a reason, when `core.budget`'s rules do not."""
        ...

    async def summarize(self, query: str, sources: Sequence[SearchResult]) -> str:
        """Summarise one query's results as Markdown for the notes; empty if there is nothing."""
        ...

    async def write(
        self,
        plan: ResearchPlan,
        sources: Sequence[SearchResult],
        review: Review | None,
        feedback: str | None,
        on_token: Callable[[str], None] | None = None,
    ) -> str:
        """Write the Markdown report; every claim cites a source with `[^n]`.

        `sources` are numbered from 1 in this order; the draft addresses the issues of
        `review` and the human's `feedback`; `on_token` receives generated text as it comes.
        """
        ...

    async def review(
        self, draft: str, plan: ResearchPlan, sources: Sequence[SearchResult]
    ) -> Review:
        """Score a draft on fact check, completeness, logic and format; say what to do next."""
        ...


@runtime_checkable
class Investigator(Protocol):
    """An engine that drives research itself (a ReAct loop of tool calls) after the plan's queries.

    The engine answers each turn and the researcher runs the tools, so each turn is
    checkpointed. Engines without it get `refine_queries` instead.
    """

    max_cycles: int

    def react_messages(
        self, plan: ResearchPlan, done: Sequence[str], sources: Sequence[SearchResult]
    ) -> list[BaseMessage]:
        """Return the loop's first messages: instructions, points and what is known already."""
        ...

    def calls_tools(self) -> bool:
        """Return False once the model answered a first turn without a tool call."""
        ...

    async def react_turn(
        self, messages: Sequence[BaseMessage], tools: Sequence[str]
    ) -> AIMessage | None:
        """Answer one Thought -> Action turn; the answer's tool calls are the Actions.

        `tools` names the tools offered; None means the model failed and the loop ends.
        """
        ...

    async def queries_instead(
        self, plan: ResearchPlan, done: Sequence[str], sources: Sequence[SearchResult]
    ) -> list[str]:
        """Return queries that would close the gaps, for a model that does not call tools."""
        ...


@runtime_checkable
class LinkFollower(Protocol):
    """An engine that follows up its plan's first results within the same research step.

    Having found the subject's own article, a researcher reads what it names before
    drafting; `follow_up` (no model call) names those queries, once per step.
    """

    def follow_up(
        self, plan: ResearchPlan, sources: Sequence[SearchResult], done: Sequence[str]
    ) -> list[str]:
        """Return queries for what the sources found so far point to; none already in `done`."""
        ...
