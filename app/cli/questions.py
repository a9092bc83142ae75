"""`research-agent ask`: a follow-up question answered from a finished thread's evidence."""

import asyncio
import sys

from pydantic import ValidationError
from rich.markup import escape

from app.cli.console import err, explain, fail, load_settings, out
from app.cli.threads import _require_data, _runtime, _unknown_thread
from app.settings import Settings
from core.questions import QuestionAnswer, QuestionRequest
from service.errors import InvalidState, NotFound
from service.questions import Questions
from service.thread_ids import LOCAL_OWNER


async def _ask(settings: Settings, thread_id: str, question: str) -> QuestionAnswer:
    _require_data(settings, thread_id)
    async with _runtime(settings) as runtime:
        try:
            stored = await runtime.manager.resolve(LOCAL_OWNER, thread_id)
            return await Questions(runtime.manager).ask(LOCAL_OWNER, stored, question)
        except NotFound:
            _unknown_thread(thread_id)
        except InvalidState as exc:
            fail(f"thread {thread_id!r}: {exc.message}")


def ask(thread_id: str, question: str, as_json: bool) -> None:
    """Answer QUESTION from THREAD_ID's evidence; print the answer and the sources it cites."""
    try:
        question = QuestionRequest(question=question).question
    except ValidationError as exc:
        fail(explain(exc).replace("question:", "QUESTION:", 1))
    answer = asyncio.run(_ask(load_settings(), thread_id, question))
    if as_json:
        sys.stdout.write(answer.model_dump_json(indent=2) + "\n")
        return
    out.print(escape(answer.answer), soft_wrap=True)
    if answer.status == "not_in_evidence":
        err.print(
            f"\nnot in the evidence: research it with POST {escape(answer.research or '')} "
            f'or `research-agent run "{escape(question)}"`'
        )
        return
    out.print()
    for source in answer.sources:
        out.print(f"[^{source.n}]: [{escape(source.title)}]({escape(source.url)})", soft_wrap=True)
