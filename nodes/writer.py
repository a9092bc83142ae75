"""Writer: a new draft from every source collected so far, streamed as it is written."""

import functools
from collections.abc import Callable
from typing import Any

from langchain_core.messages import AIMessage
from langgraph.runtime import Runtime
from langgraph.types import StreamWriter

from core.models import Draft
from core.state import ResearchState
from core.steps import WRITER
from nodes.accounting import accounted, unless_refused
from nodes.context import Deps
from nodes.progress import tell

# Tokens are forwarded in pieces of about this many characters: one event per token would
# cost more to store and send than the text it carries.
TOKEN_BATCH_CHARS = 48


def token_batcher(
    write: StreamWriter, version: int
) -> tuple[Callable[[str], None], Callable[[], None]]:
    """Return (on_token, flush): `token` events of about `TOKEN_BATCH_CHARS` characters."""
    pending: list[str] = []

    def flush() -> None:
        if pending:
            write({"event": "token", "version": version, "text": "".join(pending)})
            pending.clear()

    def on_token(text: str) -> None:
        pending.append(text)
        if sum(map(len, pending)) >= TOKEN_BATCH_CHARS:
            flush()

    return on_token, flush


@accounted(WRITER)
async def writer(state: ResearchState, runtime: Runtime[Deps]) -> dict[str, Any]:
    """Write the report; the last review and any human feedback steer a rewrite.

    When the model refuses to serve the run, the fallback engine writes a partial report
    from the sources collected; with none the run fails.
    """
    plan = state.get("task_plan")
    if plan is None:
        raise ValueError("the writer needs a plan")
    deps = runtime.context
    sources = state.get("research_data", [])
    version = len(state.get("drafts", [])) + 1
    on_token, flush = token_batcher(functools.partial(tell, runtime), version)
    review, feedback = state.get("review"), state.get("feedback")
    writing = deps.engine.write(plan, sources, review, feedback, on_token)
    if sources:
        markdown, halted = await unless_refused(
            "write", writing, lambda: deps.fallback.write(plan, sources, review, feedback)
        )
    else:  # nothing to write a partial report from: a refusal fails the run
        markdown, halted = await writing, None
    flush()
    tell(runtime, {"event": "draft", "version": version, "chars": len(markdown)})
    said = f"Draft {version} written ({len(markdown)} characters)."
    update: dict[str, Any] = {
        "drafts": [Draft(version=version, markdown=markdown, source_count=len(sources))],
        "iteration_count": state.get("iteration_count", 0) + 1,
        "messages": [AIMessage(content=said, name=WRITER)],
    }
    if halted:
        update["halted"] = halted
    return update
