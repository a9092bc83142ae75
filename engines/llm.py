"""The LLM engine: any LangChain chat model plans, summarises, writes and reviews.

Every step is guarded: a model that answers garbage gets one repair round, then the
step is done by the extractive engine (recorded as a fallback); a model that stays
unreachable after the retries falls back the same way; a model that refuses the
request (bad key, unknown model) raises `ModelAccessError`, which names the setting.
"""

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, TypeVar
from urllib.parse import urlsplit

from langchain.chat_models import init_chat_model
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
)
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool, StructuredTool
from openai import APIStatusError, ContentFilterFinishReasonError, LengthFinishReasonError
from pydantic import BaseModel, ValidationError

from core.models import (
    ResearchPlan,
    Review,
    ReviewIssue,
    ReviewScores,
    RoutingDecision,
    SearchResult,
    explain,
)
from engines.base import Engine, LinkFollower, Progress, ReadTool, SearchTool
from engines.checks import check_draft, cites_anything, strip_unknown_footnotes
from engines.llm_config import ROLES, ModelConfig, ModelPrice, Role
from engines.model_errors import access_error, classify_model_error
from engines.recording import (
    ModelCall,
    record_call,
    record_fallback,
    record_repair,
    record_structured,
    time_left,
)
from engines.structured import (
    AUTO_ORDER,
    OTHER_PROVIDERS_ORDER,
    Capabilities,
    Method,
    MethodRefused,
    UnusableAnswer,
    bind,
    read,
    refuses,
    with_instructions,
)
from engines.substance import plan_problem
from prompts import planner, researcher, reviewer, writer
from prompts.repair import repair_message
from tools.api_client import RetryPolicy, call_with_retries
from tools.errors import ProviderError

T = TypeVar("T")
S = TypeVar("S", bound=BaseModel)
# Local OpenAI-compatible servers (vLLM, Ollama, llama.cpp) ignore the key but the client wants one.
PLACEHOLDER_KEY = "not-needed"
# Characters per token, for estimating the usage of a reply whose server sent none.
CHARS_PER_TOKEN = 4


class BudgetSpent(ProviderError):
    """The run's time budget ended before this call could start: the step falls back."""

    @property
    def is_retryable(self) -> bool:
        """Never: the budget does not come back."""
        return False


def speaks_openai(base_url: str | None) -> bool:
    """Whether the server is OpenAI's own (None: the client's default, which is OpenAI's)."""
    return base_url is None or (urlsplit(base_url).hostname or "").endswith("openai.com")


def token_cap(max_tokens: int, provider: str, base_url: str | None) -> dict[str, Any]:
    """The call arguments that cap an answer at `max_tokens` on this provider and server.

    The OpenAI client sends the cap as `max_completion_tokens`, which OpenAI wants and
    some compatible servers ignore (llama-cpp-python generated 7,708 tokens over 455 s
    past a cap of 1,024): to any other server the cap goes as `max_tokens` as well.
    """
    cap: dict[str, Any] = {"max_tokens": max_tokens}
    if provider == "openai" and not speaks_openai(base_url):
        cap["extra_body"] = {"max_tokens": max_tokens}
    return cap


def chat_model(config: ModelConfig, base_url: str | None, api_key: str | None) -> BaseChatModel:
    """Build one role's chat model; the client's own retries are off (ours honour Retry-After).

    Raises ValueError (unknown provider) or ImportError (its integration is not installed).
    """
    kwargs: dict[str, Any] = {"timeout": config.timeout_seconds, "max_retries": 0}
    optional = {
        "temperature": config.temperature,
        "stop": config.stop_sequences,
        "top_p": config.top_p,
        "seed": config.seed,
        "base_url": base_url,
        "api_key": api_key or (PLACEHOLDER_KEY if base_url else None),
    }
    kwargs.update({k: v for k, v in optional.items() if v is not None})
    if config.max_tokens is not None:
        kwargs.update(token_cap(config.max_tokens, config.provider, base_url))
    if config.provider == "openai":
        kwargs["stream_usage"] = True  # the last streamed chunk carries the token counts
    model = init_chat_model(config.model_name, model_provider=config.provider, **kwargs)
    if not isinstance(model, BaseChatModel):  # only when configurable fields are asked for
        raise TypeError(f"{config.model} did not give a chat model")
    return model


def _text(message: BaseMessage) -> str:
    return message.text if isinstance(message.text, str) else str(message.content)


class LLMEngine:
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
        self._configs = dict(configs)
        self._models = dict(models)
        self._fallback = fallback
        self._base_url = base_url
        self._prices = dict(prices or {})
        self._retry = retry or RetryPolicy(base_delay_s=1.0, max_delay_s=20.0, jitter=0.5)
        self._summarizer = self._models["researcher"].bind(
            **token_cap(summary_tokens, self._configs["researcher"].provider, base_url)
        )
        self.max_cycles = max_cycles
        self._bound: dict[tuple[Role, type[BaseModel], Method], Runnable[Any, Any]] = {}
        self._capabilities = {
            provider: Capabilities(AUTO_ORDER if provider == "openai" else OTHER_PROVIDERS_ORDER)
            for provider in {c.provider for c in self._configs.values()}
        }
        # Models seen answering a ReAct turn without a tool call: they are asked for queries.
        self._no_tool_calls: set[str] = set()
        distinct = dict.fromkeys(c.model for c in self._configs.values())
        self.description = f"llm ({', '.join(distinct)})"

    @property
    def models(self) -> dict[str, str]:
        """Which model each role uses (for the report's front matter)."""
        return {role: self._configs[role].model for role in ROLES}

    # -- calls -----------------------------------------------------------------------

    def _system(self, role: Role, default: str) -> SystemMessage:
        return SystemMessage(content=self._configs[role].system_prompt or default)

    def _price(self, config: ModelConfig) -> ModelPrice | None:
        return self._prices.get(config.model) or self._prices.get(config.model_name)

    def _record(
        self,
        role: Role,
        message: AIMessage | None,
        seconds: float,
        error: str | None,
        *,
        first: bool,
        prompt: Sequence[BaseMessage] = (),
    ) -> None:
        config = self._configs[role]
        usage = message.usage_metadata if message is not None else None
        estimated = message is not None and not usage
        if usage:
            tokens_in, tokens_out = usage["input_tokens"], usage["output_tokens"]
        elif message is not None:  # the server sent no usage (llama-cpp-python when streaming)
            tokens_in = -(-sum(len(_text(m)) for m in prompt) // CHARS_PER_TOKEN)
            tokens_out = -(-len(_text(message)) // CHARS_PER_TOKEN)
        else:
            tokens_in = tokens_out = 0
        price = self._price(config)
        record_call(
            ModelCall(
                role=role,
                model=config.model,
                input_tokens=tokens_in,
                output_tokens=tokens_out,
                seconds=seconds,
                cost_usd=price.cost(tokens_in, tokens_out) if price else 0.0,
                error=error,
                first=first,
                estimated=estimated,
            )
        )

    async def _ask(
        self,
        role: Role,
        op: Callable[[], Awaitable[tuple[T, AIMessage]]],
        prompt: Sequence[BaseMessage] = (),
    ) -> T:
        """One model request with retries and accounting; see the module docstring for failures.

        Each attempt is bounded as a whole by the role's timeout and by what is left of the
        run's time budget (the client's own timeout bounds each read, which a server
        streaming a long answer never trips); once the budget is spent, no attempt starts.
        """
        config = self._configs[role]
        attempts = 0

        async def attempt() -> T:
            nonlocal attempts
            left = time_left()
            if left is not None and left <= 0:
                raise BudgetSpent("the run's time budget is spent", "TIMEOUT_ERROR")
            attempts += 1
            started = time.perf_counter()
            limit = config.timeout_seconds if left is None else min(config.timeout_seconds, left)
            try:
                async with asyncio.timeout(limit):
                    result, message = await op()
            except Exception as exc:
                self._record(
                    role,
                    None,
                    time.perf_counter() - started,
                    type(exc).__name__,
                    first=attempts == 1,
                    prompt=prompt,
                )
                raise
            self._record(
                role,
                message,
                time.perf_counter() - started,
                None,
                first=attempts == 1,
                prompt=prompt,
            )
            return result

        policy = replace(self._retry, max_retries=config.max_retries)
        try:
            return await call_with_retries(
                attempt, policy, config.timeout_seconds, classify_model_error
            )
        except ProviderError as exc:
            if exc.is_retryable or isinstance(exc, BudgetSpent):
                raise
            raise access_error(exc, role, config.model, self._base_url) from exc

    async def _complete(self, role: Role, messages: list[BaseMessage], model: Any = None) -> str:
        chat = model if model is not None else self._models[role]

        async def op() -> tuple[str, AIMessage]:
            message = await chat.ainvoke(messages)
            return _text(message), message

        return await self._ask(role, op, messages)

    async def _stream(
        self, role: Role, messages: list[BaseMessage], on_token: Callable[[str], None] | None
    ) -> str:
        async def op() -> tuple[str, AIMessage]:
            chunks: list[AIMessageChunk] = []
            async for chunk in self._models[role].astream(messages):
                if on_token is not None and chunk.text:
                    on_token(chunk.text)
                chunks.append(chunk)
            # One merge at the end: adding chunk by chunk is quadratic (4 ms for 265 chunks).
            whole = chunks[0] + chunks[1:] if chunks else AIMessageChunk(content="")
            message = AIMessage(content=whole.content, usage_metadata=whole.usage_metadata)
            return _text(message), message

        return await self._ask(role, op, messages)

    def _runnable(self, role: Role, schema: type[BaseModel], method: Method) -> Runnable[Any, Any]:
        """The role's model asking for `schema` by `method`, built once (1.4 ms a time)."""
        key = (role, schema, method)
        if key not in self._bound:
            self._bound[key] = bind(self._models[role], schema, method)
        return self._bound[key]

    async def _structured(
        self,
        role: Role,
        schema: type[S],
        messages: list[BaseMessage],
        step: str,
        check: Callable[[S], str | None] | None = None,
    ) -> S | None:
        """The schema filled by the model, after one repair round; None means fall back.

        `check` names what makes a well-formed answer unusable (junk that fits the
        schema); such an answer is repaired like one that does not parse.
        """
        config = self._configs[role]
        capabilities = self._capabilities[config.provider]
        tried: set[Method] = set()
        while remaining := [
            m
            for m in capabilities.candidates(config.model, config.structured_output)
            if m not in tried
        ]:
            method = remaining[0]
            tried.add(method)
            try:
                return await self._structured_by(method, role, schema, messages, step, check)
            except MethodRefused as refusal:
                if config.structured_output != "auto":
                    record_fallback(
                        step,
                        f"the {role} model's server refused {refusal}; set "
                        f"models.{role}.structured_output to auto (or another method)",
                    )
                    return None
                capabilities.refuse(config.model, refusal)
        record_fallback(step, f"the {role} model's server refused every way of asking for JSON")
        return None

    async def _structured_by(
        self,
        method: Method,
        role: Role,
        schema: type[S],
        messages: list[BaseMessage],
        step: str,
        check: Callable[[S], str | None] | None,
    ) -> S | None:
        """`_structured` by one method; raises MethodRefused when the server will not do it."""
        config = self._configs[role]
        capabilities = self._capabilities[config.provider]
        detecting = config.structured_output == "auto" and config.model not in capabilities.chosen
        runnable = self._runnable(role, schema, method)
        asked = with_instructions(messages, schema, method)

        async def op() -> tuple[AIMessage, AIMessage]:
            try:
                message = await runnable.ainvoke(asked)
            except (LengthFinishReasonError, ContentFilterFinishReasonError) as exc:
                message = _unfinished(exc)  # read() names why, and the repair round follows
            except APIStatusError as exc:
                refusal = refuses(method, exc)
                if refusal is None:
                    raise
                raise refusal from exc
            assert isinstance(message, AIMessage)
            return message, message

        error: Exception | None = None
        for attempt in ("first", "repair"):
            try:
                message = await self._ask(role, op, asked)
            except ProviderError as exc:  # retries exhausted: the step falls back
                record_fallback(step, f"the {role} model failed: {exc}")
                return None
            if detecting and method == "function_calling" and not message.tool_calls:
                raise MethodRefused(method, "the model answered without calling the forced tool")
            capabilities.confirm(config.model, method)
            detecting = False
            record_structured(config.model, method, capabilities.refused.get(config.model, {}))
            try:
                parsed = read(message, schema, method)
                problem = check(parsed) if check is not None else None
                if problem is not None:
                    raise UnusableAnswer(problem)
                return parsed
            except (UnusableAnswer, ValidationError) as exc:
                error = exc
            if attempt == "repair":
                break
            record_repair(step, _brief(error))
            asked = [
                *asked,
                AIMessage(content=_shown(message)),
                HumanMessage(repair_message(error)),
            ]
        record_fallback(
            step, f"the {role} model's answer did not fit {schema.__name__} twice: {error}"
        )
        return None

    async def _or_fallback(
        self, step: str, role: Role, call: Awaitable[T], fallback: Callable[[], Awaitable[T]]
    ) -> T:
        try:
            return await call
        except ProviderError as exc:  # retries exhausted; refusals (ModelAccessError) propagate
            record_fallback(step, f"the {role} model failed: {exc}")
            return await fallback()

    # -- the Engine protocol ---------------------------------------------------------

    async def plan(
        self, topic: str, probe: Sequence[SearchResult], feedback: str | None
    ) -> ResearchPlan:
        """Points and 1 to 3 queries; a plan without substance is repaired, then falls back."""
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
        """The extractive engine's link follow-ups: what the subject's own article names.

        No model call. The model's ReAct loop comes on top, in the next research step, so a
        model too small to search well still reads what the extractive engine would have.
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
        """Judge the knowledge gaps against the plan's points; queries that would close them."""
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

    async def investigate(
        self,
        plan: ResearchPlan,
        done: Sequence[str],
        sources: Sequence[SearchResult],
        search: SearchTool,
        read: ReadTool | None,
    ) -> list[str]:
        """Seed 002's ReAct loop: the model searches and reads until no gap is left.

        Each cycle is one model turn (the Thought, and tool calls as Actions, run
        concurrently) and the tools' answers (Observations). A failed turn ends the loop
        with what was found; the caller's time budget bounds it from outside.
        """
        tools: list[BaseTool] = [
            StructuredTool.from_function(
                coroutine=search,
                name="search",
                description="Search the web (or the corpus) with a few keywords; returns a "
                "summary of the results with their numbers, titles and URLs.",
                args_schema=researcher.SearchArgs,
            )
        ]
        if read is not None:
            tools.append(
                StructuredTool.from_function(
                    coroutine=read,
                    name="scrape",
                    description="Read the page at an http(s) URL from the results in full.",
                    args_schema=researcher.ScrapeArgs,
                )
            )
        by_name = {t.name: t for t in tools}
        model = self._models["researcher"].bind_tools(tools)
        messages: list[BaseMessage] = [
            self._system("researcher", researcher.REACT_SYSTEM),
            HumanMessage(
                researcher.react_message(plan.theme, plan.investigation_points, done, sources)
            ),
        ]
        thoughts: list[str] = []
        model_name = self._configs["researcher"].model
        if model_name in self._no_tool_calls:
            return await self._queries_instead(plan, done, sources, search, thoughts)
        for turn_number in range(self.max_cycles):

            async def op() -> tuple[AIMessage, AIMessage]:
                answer = await model.ainvoke(messages)
                assert isinstance(answer, AIMessage)
                return answer, answer

            try:
                turn = await self._ask("researcher", op)
            except ProviderError as exc:
                record_fallback("investigate", f"the researcher model failed: {exc}")
                break
            messages.append(turn)
            if _text(turn).strip():
                thoughts.append(_text(turn).strip())
            if not turn.tool_calls:
                if turn_number == 0:  # it never searched: its gaps are still open
                    self._no_tool_calls.add(model_name)
                    return await self._queries_instead(plan, done, sources, search, thoughts)
                break
            observations = await asyncio.gather(
                *(self._observe(by_name, call) for call in turn.tool_calls)
            )
            messages.extend(observations)
        return thoughts

    async def _queries_instead(
        self,
        plan: ResearchPlan,
        done: Sequence[str],
        sources: Sequence[SearchResult],
        search: SearchTool,
        thoughts: list[str],
    ) -> list[str]:
        """Close the gaps by asking for queries, for a model that does not call tools."""
        queries = await self.refine_queries(plan, sources, done, None)
        await asyncio.gather(*(search(query) for query in queries))
        thoughts.append(
            "The model does not call tools here, so it was asked for queries instead: "
            + ("; ".join(queries) or "it had none")
            + "."
        )
        return thoughts

    @staticmethod
    async def _observe(tools: Mapping[str, BaseTool], call: ToolCall) -> ToolMessage:
        tool = tools.get(call["name"])
        call_id = call.get("id") or call["name"]
        if tool is None:
            return ToolMessage(f"There is no tool {call['name']!r}.", tool_call_id=call_id)
        try:
            content = await tool.ainvoke(call["args"])
        except ValidationError as exc:  # the model's arguments did not fit: let it retry
            content = f"Invalid arguments: {exc.errors()[0]['msg']}"
        return ToolMessage(str(content), tool_call_id=call_id)

    async def decide(self, progress: Progress) -> RoutingDecision:
        """Research, write or end, by the model's reading of the progress."""
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
        """About 512 tokens of cited bullets per query."""
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
        """The report, streamed token by token to `on_token`.

        A draft that cites none of the sources it was given (a small model's usual answer)
        is no report: the extractive writer drafts from the same sources instead.
        """
        messages: list[BaseMessage] = [
            self._system("writer", writer.SYSTEM),
            HumanMessage(
                writer.message(plan, sources, review.feedback if review else None, feedback)
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

    async def review(
        self, draft: str, plan: ResearchPlan, sources: Sequence[SearchResult]
    ) -> Review:
        """The model's F005 scores, with the fact check shared with the citation checks."""
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


def _unfinished(exc: LengthFinishReasonError | ContentFilterFinishReasonError) -> AIMessage:
    """The answer the client refused to hand back (cut off, or filtered), with its usage."""
    completion = exc.completion
    choice = completion.choices[0] if completion is not None and completion.choices else None
    usage = completion.usage if completion is not None else None
    reason = "length" if isinstance(exc, LengthFinishReasonError) else "content_filter"
    return AIMessage(
        content=(choice.message.content or "") if choice else "",
        response_metadata={"finish_reason": reason},
        usage_metadata=(
            {
                "input_tokens": usage.prompt_tokens,
                "output_tokens": usage.completion_tokens,
                "total_tokens": usage.total_tokens,
            }
            if usage is not None
            else None
        ),
    )


def _brief(error: Exception) -> str:
    """What was wrong with an answer, in a line (pydantic's errors, with their fields)."""
    return (explain(error) if isinstance(error, ValidationError) else str(error))[:300]


def _shown(message: AIMessage) -> str:
    """The model's unusable answer as the repair round shows it back."""
    text = _text(message).strip()
    if text:
        return text
    if message.tool_calls:
        return str([c.get("args") for c in message.tool_calls])
    return "(an empty answer)"
