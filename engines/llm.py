"""The LLM engine: any LangChain chat model plans, summarises, writes and reviews.

A step whose model answers garbage twice or stays unreachable is done by the extractive
engine instead (recorded); a model that refuses the request raises `ModelAccessError`.
"""

from collections.abc import Callable, Mapping, Sequence

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from core.models import (
    ResearchPlan,
    Review,
    ReviewIssue,
    ReviewScores,
    RoutingDecision,
    SearchResult,
)
from engines.base import Engine, LinkFollower, Progress
from engines.chat_models import chat_model, token_cap
from engines.checks import check_draft
from engines.llm_config import ROLES, ModelConfig, ModelPrice, Role
from engines.react import ReActTurns
from engines.recording import record_fallback
from engines.relevance import about_topic
from engines.report_markdown import cites_anything, strip_unknown_footnotes
from engines.substance import plan_problem
from prompts import planner, questions, researcher, reviewer, writer
from tools.api_client import RetryPolicy

__all__ = ["LLMEngine", "chat_model"]


class LLMEngine(ReActTurns):
    """Implements `Engine` with chat models, one per role, and the extractive engine as fallback."""

    name = "llm"

    def __init__(
        self,
        configs: Mapping[Role, ModelConfig],
        models: Mapping[Role, BaseChatModel],
        fallback: Engine,
        *,
        base_url: str | None = None,
        prices: Mapping[str, ModelPrice] | None = None,
        retry: RetryPolicy | None = None,
        summary_tokens: int = researcher.SUMMARY_TOKENS,
        max_cycles: int = 3,
    ) -> None:
        super().__init__(configs, models, fallback, base_url=base_url, prices=prices, retry=retry)
        self._summarizer = self._models["researcher"].bind(
            **token_cap(summary_tokens, self._configs["researcher"].provider, base_url)
        )
        self._react_init(max_cycles)
        distinct = dict.fromkeys(c.model for c in self._configs.values())
        self.description = f"llm ({', '.join(distinct)})"

    @property
    def models(self) -> dict[str, str]:
        """Which model each role uses (for the report's front matter)."""
        return {role: self._configs[role].model for role in ROLES}

    # -- the Engine protocol ---------------------------------------------------------

    async def plan(
        self, topic: str, probe: Sequence[SearchResult], feedback: str | None
    ) -> ResearchPlan:
        """Plan points and 1 to 3 queries; a plan without substance is repaired, then falls back."""
        system = self._system("planner", planner.PLAN_SYSTEM)
        out = await self._structured(
            "planner",
            planner.PlanOutput,
            [system, HumanMessage(planner.plan_message(topic, probe, feedback))],
            "plan",
            check=lambda plan: plan_problem(
                plan, topic, [system.text], [f"{s.title}. {s.content}" for s in probe]
            ),
        )
        if out is None:
            return await self._fallback.plan(topic, probe, feedback)
        theme = " ".join(topic.split())[:300]
        return ResearchPlan(
            theme=theme[:1].upper() + theme[1:],
            investigation_points=list(dict.fromkeys(out.investigation_points)),
            search_queries=list(dict.fromkeys(out.search_queries)),
            plan_text=out.plan_text,
        )

    def follow_up(
        self, plan: ResearchPlan, sources: Sequence[SearchResult], done: Sequence[str]
    ) -> list[str]:
        """Return the extractive engine's link follow-ups: what the subject's own article names.

        No model call: a model too small to search well still reads what the extractive
        engine would have, and its ReAct loop comes on top in the next research step.
        """
        if isinstance(self._fallback, LinkFollower):
            return self._fallback.follow_up(plan, sources, done)
        return []

    async def refine_queries(
        self,
        plan: ResearchPlan,
        sources: Sequence[SearchResult],
        done: Sequence[str],
        review: Review | None,
    ) -> list[str]:
        """Judge the knowledge gaps against the plan's points; return queries to close them."""
        out = await self._structured(
            "researcher",
            researcher.GapsOutput,
            [
                self._system("researcher", researcher.GAPS_SYSTEM),
                HumanMessage(
                    researcher.gaps_message(
                        plan.theme,
                        plan.investigation_points,
                        sources,
                        done,
                        review.feedback if review else None,
                    )
                ),
            ],
            "refine_queries",
        )
        if out is None:
            return await self._fallback.refine_queries(plan, sources, done, review)
        seen = {q.casefold() for q in done}
        return [q for q in dict.fromkeys(out.queries) if q.casefold() not in seen]

    async def queries_instead(
        self, plan: ResearchPlan, done: Sequence[str], sources: Sequence[SearchResult]
    ) -> list[str]:
        """Close the gaps by asking for queries, for a model that does not call tools."""
        return await self.refine_queries(plan, sources, done, None)

    async def decide(self, progress: Progress) -> RoutingDecision:
        """Choose research, write or end by the model's reading of the progress."""
        review = progress.last_review
        summary = (
            f"score {review.overall_score:.2f}, {'approved' if review.approved else 'not approved'}"
            f"; {review.feedback or 'no feedback'}"
            if review
            else "none yet"
        )
        out = await self._structured(
            "planner",
            planner.RouteOutput,
            [
                self._system("planner", planner.ROUTE_SYSTEM),
                HumanMessage(
                    planner.route_message(
                        progress.topic,
                        progress.plan.investigation_points,
                        progress.source_count,
                        progress.source_count - progress.sources_at_last_draft,
                        summary,
                        progress.iteration_count,
                        progress.max_iterations,
                    )
                ),
            ],
            "decide",
        )
        if out is None:
            return await self._fallback.decide(progress)
        return RoutingDecision(action=out.action, reasoning=out.reasoning)

    async def summarize(self, query: str, sources: Sequence[SearchResult]) -> str:
        """Summarise a query's results in about 512 tokens of cited bullets."""
        messages: list[BaseMessage] = [
            self._system("researcher", researcher.SUMMARY_SYSTEM),
            HumanMessage(researcher.summary_message(query, sources)),
        ]
        return await self._or_fallback(
            "summarize",
            "researcher",
            self._complete("researcher", messages, self._summarizer),
            lambda: self._fallback.summarize(query, sources),
        )

    async def write(
        self,
        plan: ResearchPlan,
        sources: Sequence[SearchResult],
        review: Review | None,
        feedback: str | None,
        on_token: Callable[[str], None] | None = None,
    ) -> str:
        """Write the report, streamed token by token to `on_token`.

        A draft that cites none of the sources it was given (a small model's usual answer)
        is no report: the extractive writer drafts from the same sources instead.
        """
        # The sources about the topic, the most relevant first, as every writer judges them.
        given = about_topic(plan.theme, sources)
        messages: list[BaseMessage] = [
            self._system("writer", writer.SYSTEM),
            HumanMessage(
                writer.message(plan, given, review.feedback if review else None, feedback)
            ),
        ]

        async def extractive() -> str:
            return await self._fallback.write(plan, sources, review, feedback)

        draft = await self._or_fallback(
            "write", "writer", self._stream("writer", messages, on_token), extractive
        )
        if sources and not cites_anything(strip_unknown_footnotes(draft, sources)[0]):
            record_fallback("write", "the writer model's draft cites none of the sources")
            return await extractive()
        return draft

    async def answer_question(
        self,
        question: str,
        passages: Sequence[tuple[int, str, str]],
        on_token: Callable[[str], None] | None = None,
    ) -> str:
        """Answer a follow-up question from numbered passages only (`engines.questions`).

        The writer's model answers; the service holds the answer to the citation check.
        """
        messages: list[BaseMessage] = [
            # Not the writer's configured prompt: that one asks for a whole report.
            SystemMessage(content=questions.SYSTEM),
            HumanMessage(questions.message(question, passages)),
        ]

        async def unanswered() -> str:
            return ""  # the service answers from the passages themselves

        return await self._or_fallback(
            "answer", "writer", self._stream("writer", messages, on_token), unanswered
        )

    async def review(
        self, draft: str, plan: ResearchPlan, sources: Sequence[SearchResult]
    ) -> Review:
        """Review with the model's scores, the fact check shared with the citation checks."""
        out = await self._structured(
            "reviewer",
            reviewer.ReviewOutput,
            [
                self._system("reviewer", reviewer.SYSTEM),
                HumanMessage(reviewer.message(draft, plan, sources)),
            ],
            "review",
        )
        if out is None:
            return await self._fallback.review(draft, plan, sources)
        checks = check_draft(draft, plan, sources)
        scores = ReviewScores(
            # Half the model's judgement, half the share of citations the sources support.
            fact_check=round((out.scores.fact_check + checks.scores.fact_check) / 2, 4),
            completeness=out.scores.completeness,
            # Drift from the subject is measured as well as judged.
            logic=min(out.scores.logic, checks.scores.logic),
            # Sections and numbering are measured, not judged.
            format=min(out.scores.format, checks.scores.format),
        )
        issues = [i for i in checks.issues if i.type in ("fact_check", "format")]
        issues += [i for i in checks.issues if i.type == "logic" and i.severity == "high"]
        issues += [ReviewIssue.model_validate(i.model_dump()) for i in out.issues]
        return Review.from_scores(
            scores,
            issues,
            out.feedback,
            out.suggested_action,
            checks.citations,
            drifts=checks.drifts,
        )
