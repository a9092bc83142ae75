"""The Engine protocol: the "brain" the nodes call, with or without a language model."""

from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

from langchain_core.messages import AIMessage, BaseMessage
from pydantic import BaseModel

from core.models import ResearchPlan, Review, RoutingDecision, SearchResult


class ModelAccessError(Exception):
    """The engine's model refused a request in a way retrying cannot fix (bad key, unknown model).

    The message names the setting to fix and never contains a secret. Nodes halt the run
    on it: a partial report when sources were collected, else the run fails with it.
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

    A method never fails for a model's bad or missing answer: the LLM engine falls back to
    the extractive engine and records it. Every method may raise `ModelAccessError` when
    the model refuses to serve the run at all (a refused key, no credit): the run then
    halts and writes its report from what was found.
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

        Args:
            topic: what the user asked to research.
            probe: the first results of searching the topic itself, to plan from.
            feedback: what a human asked to change in a rejected plan, if any.

        Returns:
            The plan: theme, investigation points and search queries.
        """
        ...

    async def refine_queries(
        self,
        plan: ResearchPlan,
        sources: Sequence[SearchResult],
        done: Sequence[str],
        review: Review | None,
    ) -> list[str]:
        """New queries that would close the known gaps.

        Args:
            plan: the run's plan.
            sources: what was collected so far.
            done: queries run already; none of them is returned.
            review: the last review, whose issues say what is missing, if any.

        Returns:
            The queries, possibly none (nothing left to search).
        """
        ...

    async def decide(self, progress: Progress) -> RoutingDecision:
        """Choose research, write or end when the fixed rules (`core.budget`) do not decide.

        Returns:
            The next action and the reason for it.
        """
        ...

    async def summarize(self, query: str, sources: Sequence[SearchResult]) -> str:
        """Summarise one query's results as Markdown for the research notes.

        Returns:
            The summary; empty when there is nothing to summarise.
        """
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

        Args:
            plan: the run's plan (its points are the report's sections).
            sources: the sources, numbered from 1 in this order for the footnotes.
            review: the last review of this run, whose issues the new draft addresses.
            feedback: what a human asked for, if anything.
            on_token: receives the text as it is generated, when the engine generates any.

        Returns:
            The report, Markdown with `[^n]` footnotes and a references list.
        """
        ...

    async def review(
        self, draft: str, plan: ResearchPlan, sources: Sequence[SearchResult]
    ) -> Review:
        """Score a draft on the review criteria (fact check, completeness, logic, format).

        Returns:
            The review: scores, issues, verdict and what to do next.
        """
        ...


@runtime_checkable
class Investigator(Protocol):
    """An engine that drives research itself (a ReAct loop of tool calls) after the plan's queries.

    The researcher runs the loop one turn at a time, so each turn is checkpointed: the
    engine opens the conversation and answers each turn; the researcher runs the tools.
    Engines without it get `refine_queries` instead.
    """

    max_cycles: int

    def react_messages(
        self, plan: ResearchPlan, done: Sequence[str], sources: Sequence[SearchResult]
    ) -> list[BaseMessage]:
        """The loop's first messages: its instructions, the points and what is known already."""
        ...

    def calls_tools(self) -> bool:
        """False once the model answered a first turn without a tool call (it is asked for queries)."""
        ...

    async def react_turn(
        self, messages: Sequence[BaseMessage], tools: Sequence[str]
    ) -> AIMessage | None:
        """One Thought -> Action turn: the model's answer, whose tool calls are the Actions.

        `tools` names the tools offered (`search`, `scrape`). None: the model failed
        (recorded as a fallback), and the loop ends with what was found.
        """
        ...

    async def queries_instead(
        self, plan: ResearchPlan, done: Sequence[str], sources: Sequence[SearchResult]
    ) -> list[str]:
        """Queries that would close the gaps, for a model that does not call tools."""
        ...


@runtime_checkable
class LinkFollower(Protocol):
    """An engine that follows up its plan's first results within the same research step.

    Having found the subject's own article, a researcher reads what it names (its
    magma and lava, its Buddha) before drafting; `follow_up` names those queries. It is
    cheap (no model call), so the researcher asks it once, after the plan's queries.
    """

    def follow_up(
        self, plan: ResearchPlan, sources: Sequence[SearchResult], done: Sequence[str]
    ) -> list[str]:
        """Queries for what the sources found so far point to; none already in `done`."""
        ...
