"""A role's timeout ends its call even when an await inside the call swallows the cancellation.

`asyncio.timeout` cuts a block by cancelling its task; an await inside that catches the
CancelledError and goes on leaves the timeout nothing to turn into a TimeoutError. On Python
3.11 `asyncio.wait_for` does so when its future is done at the moment of the cancellation,
and langchain_openai waits for each streamed chunk with it: under load a writer's stream ran
to its end, ten times past its bound (test_llm_servers, the trickling stream).
"""

import asyncio
import time
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage

from engines.llm import LLMEngine
from engines.recording import recording
from tools.errors import ProviderError

from .fake_llm import FakeLLM
from .test_llm_engine import engine_for

BOUND_S = 0.1  # the writer's timeout here: the calls below never answer within it


def engine_bounded(llm: FakeLLM) -> LLMEngine:
    engine = engine_for(llm, models={"default": {"max_retries": 0}})
    config = engine._configs["writer"].model_copy(update={"timeout_seconds": BOUND_S})
    engine._configs["writer"] = config
    return engine


async def test_a_call_that_swallows_the_cancellation_still_ends_at_the_timeout(
    llm: FakeLLM, settings_env: Path
) -> None:
    engine = engine_bounded(llm)
    ran_on = False

    async def op() -> tuple[str, AIMessage]:
        nonlocal ran_on
        try:
            await asyncio.Event().wait()  # no answer comes
        except asyncio.CancelledError:
            pass  # swallowed, once
        await asyncio.sleep(0.5)  # the rest of the stream, say
        ran_on = True
        return "late", AIMessage(content="late")

    with recording() as recorder, pytest.raises(ProviderError) as raised:
        await engine._ask("writer", op)
    assert raised.value.error_type == "TIMEOUT_ERROR"
    assert f"no answer within {BOUND_S:g} s" in str(raised.value)
    assert [call.error for call in recorder.calls] == ["TimeoutError"]
    assert not ran_on  # cancelled again, the call was stopped rather than left to run on


async def test_the_timeout_is_kept_when_wait_for_swallows_it(
    llm: FakeLLM, settings_env: Path
) -> None:
    """Python 3.11's wait_for, cancelled as its future completes, returns the result instead."""
    engine = engine_bounded(llm)

    async def op() -> tuple[str, AIMessage]:
        loop = asyncio.get_running_loop()
        chunk: asyncio.Future[str] = loop.create_future()
        loop.call_soon(chunk.set_result, "late")
        # Hold the loop past the bound: the chunk arrives, and the timeout fires, in one pass.
        time.sleep(BOUND_S * 1.5)
        text = await asyncio.wait_for(chunk, timeout=120)  # as langchain_openai awaits chunks
        return text, AIMessage(content=text)

    with recording() as recorder, pytest.raises(ProviderError) as raised:
        await engine._ask("writer", op)
    assert raised.value.error_type == "TIMEOUT_ERROR"
    assert f"no answer within {BOUND_S:g} s" in str(raised.value)
    assert [call.error for call in recorder.calls] == ["TimeoutError"]
