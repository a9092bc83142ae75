"""Asking a role's model for a schema: the way its server accepts, and one repair round.

A model that answers garbage gets one repair round, then the step falls back (recorded);
junk that fits the schema is repaired like an answer that does not parse.
"""

from collections.abc import Callable
from typing import Any, TypeVar

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables import Runnable
from openai import APIStatusError, ContentFilterFinishReasonError, LengthFinishReasonError
from pydantic import BaseModel, ValidationError

from core.models import explain
from engines.asking import ModelAsker
from engines.chat_models import text_of
from engines.llm_config import Role
from engines.recording import record_fallback, record_repair, record_structured
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
from prompts.repair import repair_message
from tools.errors import ProviderError

S = TypeVar("S", bound=BaseModel)


class StructuredAsker(ModelAsker):
    """`ModelAsker` that also fills schemas, learning which way each server accepts."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._bound: dict[tuple[Role, type[BaseModel], Method], Runnable[Any, Any]] = {}
        self._capabilities = {
            provider: Capabilities(AUTO_ORDER if provider == "openai" else OTHER_PROVIDERS_ORDER)
            for provider in {c.provider for c in self._configs.values()}
        }

    def _runnable(self, role: Role, schema: type[BaseModel], method: Method) -> Runnable[Any, Any]:
        """Return the role's model asking for `schema` by `method`, bound once and kept."""
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
        """Return the schema filled by the model, after one repair round; None means fall back.

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

    async def _answer_by(
        self, method: Method, role: Role, schema: type[BaseModel], asked: list[BaseMessage]
    ) -> AIMessage:
        """One request for `schema` by `method`; raises MethodRefused when the server will not."""
        runnable = self._runnable(role, schema, method)

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

        return await self._ask(role, op, asked)

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
        asked = with_instructions(messages, schema, method)
        error: Exception | None = None
        for attempt in ("first", "repair"):
            try:
                message = await self._answer_by(method, role, schema, asked)
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
                if check is not None and (problem := check(parsed)) is not None:
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


def _unfinished(exc: LengthFinishReasonError | ContentFilterFinishReasonError) -> AIMessage:
    """Rebuild the answer the client refused to hand back (cut off, or filtered), with its usage."""
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
    """Say in a line what was wrong with an answer (pydantic's errors, with their fields)."""
    return (explain(error) if isinstance(error, ValidationError) else str(error))[:300]


def _shown(message: AIMessage) -> str:
    """Return the model's unusable answer as the repair round shows it back."""
    text = text_of(message).strip()
    if text:
        return text
    if message.tool_calls:
        return str([c.get("args") for c in message.tool_calls])
    return "(an empty answer)"
