"""Asking a role's model: retries, time bounds and the record of every request."""

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, TypeVar

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, SystemMessage

from core.tasks import stop
from engines.base import Engine
from engines.chat_models import estimated_tokens, text_of
from engines.llm_config import ModelConfig, ModelPrice, Role
from engines.model_errors import access_error, classify_model_error
from engines.recording import ModelCall, record_call, record_fallback, time_left
from prompts import template_of
from tools.api_client import RetryPolicy, call_with_retries
from tools.errors import ProviderError

T = TypeVar("T")

# The settings of a role's model that shape its answers, kept with each call's evidence.
_PARAMS = {"temperature", "max_tokens", "top_p", "seed", "stop_sequences"}


def reported_model(message: AIMessage | None) -> str | None:
    """Return the model id the server answered with (OpenAI's `model`), when it said one."""
    if message is None:
        return None
    meta = message.response_metadata or {}
    name = meta.get("model_name") or meta.get("model")
    return str(name) if name else None


async def _bounded(op: Callable[[], Awaitable[T]], seconds: float) -> T:
    """Return what `op()` gives within `seconds`; else raise TimeoutError, the op stopped.

    The op runs in a task of its own and is awaited through a shield, so the timeout's
    cancellation lands on this await, which passes it on, rather than somewhere inside the
    op, which may swallow it: on Python 3.11 `asyncio.wait_for` returns its future's result
    when it is cancelled just as that future is done, and langchain_openai bounds each
    streamed chunk with it (`_astream_with_chunk_timeout`). Swallowed there, the cancellation
    left `asyncio.timeout` nothing to turn into a TimeoutError and the call streamed on.
    """
    task = asyncio.ensure_future(op())
    try:
        async with asyncio.timeout(seconds) as bound:
            result = await asyncio.shield(task)
        if bound.expired():  # a cancellation lost on the way still ends the call here
            raise TimeoutError
    except BaseException:
        await stop(task)
        raise
    return result


class BudgetSpent(ProviderError):
    """The run's time budget ended before this call could start: the step falls back."""

    @property
    def is_retryable(self) -> bool:
        """Never: the budget does not come back."""
        return False


class ModelAsker:
    """One chat model per role, asked with retries; every request is recorded for the node."""

    def __init__(
        self,
        configs: Mapping[Role, ModelConfig],
        models: Mapping[Role, BaseChatModel],
        fallback: Engine,
        *,
        base_url: str | None = None,
        prices: Mapping[str, ModelPrice] | None = None,
        retry: RetryPolicy | None = None,
    ) -> None:
        self._configs = dict(configs)
        self._models = dict(models)
        self._fallback = fallback
        self._base_url = base_url
        self._prices = dict(prices or {})
        self._retry = retry or RetryPolicy(base_delay_s=1.0, max_delay_s=20.0, jitter=0.5)

    def _system(self, role: Role, default: str) -> SystemMessage:
        return SystemMessage(content=self._configs[role].system_prompt or default)

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
            tokens_in, tokens_out = estimated_tokens(prompt, text_of(message))
        else:
            tokens_in = tokens_out = 0
        price = self._prices.get(config.model) or self._prices.get(config.model_name)
        template, version = (
            template_of(prompt[0].text, role)
            if prompt and isinstance(prompt[0], SystemMessage)
            else (None, None)
        )
        record_call(
            ModelCall(
                role=role,
                model=config.model,
                reported_model=reported_model(message),
                template=template,
                template_version=version,
                params=config.model_dump(include=_PARAMS, exclude_none=True),
                input_tokens=tokens_in,
                output_tokens=tokens_out,
                seconds=seconds,
                cost_usd=price.cost(tokens_in, tokens_out) if price else 0.0,
                error=error,
                first=first,
                estimated=estimated,
            )
        )

    async def _attempt(
        self,
        role: Role,
        op: Callable[[], Awaitable[tuple[T, AIMessage]]],
        prompt: Sequence[BaseMessage],
        first: bool,
    ) -> T:
        """One attempt, bounded by the role's timeout and what is left of the run's budget.

        The client's own timeout bounds each read, which a server streaming a long answer
        never trips; once the budget is spent, no attempt starts.
        """
        timeout = self._configs[role].timeout_seconds
        left = time_left()
        if left is not None and left <= 0:
            raise BudgetSpent("the run's time budget is spent", "TIMEOUT_ERROR")
        started = time.perf_counter()
        try:
            result, message = await _bounded(op, timeout if left is None else min(timeout, left))
        except Exception as exc:
            seconds = time.perf_counter() - started
            self._record(role, None, seconds, type(exc).__name__, first=first, prompt=prompt)
            raise
        seconds = time.perf_counter() - started
        self._record(role, message, seconds, None, first=first, prompt=prompt)
        return result

    async def _ask(
        self,
        role: Role,
        op: Callable[[], Awaitable[tuple[T, AIMessage]]],
        prompt: Sequence[BaseMessage] = (),
    ) -> T:
        """Make one model request with retries and accounting.

        Raises `ProviderError` once retries are exhausted (the caller falls back),
        `BudgetSpent` when the run's time is up, and `ModelAccessError`, naming the
        setting, when the model refuses the request (bad key, unknown model).
        """
        config = self._configs[role]
        attempts = 0

        async def attempt() -> T:
            nonlocal attempts
            attempts += 1
            return await self._attempt(role, op, prompt, attempts == 1)

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
            return text_of(message), message

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
            # One merge at the end: adding chunk by chunk is quadratic.
            whole = chunks[0] + chunks[1:] if chunks else AIMessageChunk(content="")
            message = AIMessage(
                content=whole.content,
                usage_metadata=whole.usage_metadata,
                response_metadata=whole.response_metadata,
            )
            return text_of(message), message

        return await self._ask(role, op, messages)

    async def _or_fallback(
        self, step: str, role: Role, call: Awaitable[T], fallback: Callable[[], Awaitable[T]]
    ) -> T:
        try:
            return await call
        except ProviderError as exc:  # retries exhausted; refusals (ModelAccessError) propagate
            record_fallback(step, f"the {role} model failed: {exc}")
            return await fallback()
