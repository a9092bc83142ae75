"""`/v1/research/{id}/questions`: follow-up questions answered from a finished run's evidence."""

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Header, Path, Query, Response
from sse_starlette import EventSourceResponse

from app.dependencies import Manager, Owner, StoredThread, Streams
from app.edge import StrictJSONRoute
from app.errors import ERROR_RESPONSES, error_code
from app.routes_research import StartAnswer, links
from app.sse import event_stream, sse_frame
from core.questions import QuestionAnswer, QuestionRequest
from service.errors import ResearchError
from service.questions import Questions
from service.thread_ids import public_id
from stores.events import TERMINAL_EVENT, Event

router = APIRouter(
    prefix="/v1/research",
    tags=["research questions"],
    responses=ERROR_RESPONSES,
    route_class=StrictJSONRoute,
)

QuestionId = Annotated[int, Path(ge=1, le=1_000_000, description="The question's number.")]


@router.post(
    "/{thread_id}/questions",
    status_code=201,
    response_model=QuestionAnswer,
    responses={200: {"content": {"text/event-stream": {}}, "description": "Streamed (SSE)."}},
)
async def ask(
    thread_id: StoredThread,
    owner: Owner,
    manager: Manager,
    streams: Streams,
    request: QuestionRequest,
    stream: Annotated[
        bool, Query(description="Stream the answer as SSE (token, answer, done).")
    ] = False,
    accept: Annotated[str | None, Header()] = None,
) -> Any:
    """Answer a question from the finished run's evidence only; every sentence cites a source.

    With `?stream=true` (or `Accept: text/event-stream`) the answer comes as Server-Sent
    Events as a run's do: `token` events with its text, then `answer` (the whole answer)
    and `done`.
    """
    questions = Questions(manager)
    if not stream and "text/event-stream" not in (accept or ""):
        return await questions.ask(owner, thread_id, request.question)
    await questions.check(owner, thread_id)  # a 404 or 409 before the stream starts
    return _streamed(streams, questions, owner, thread_id, request.question)


def _streamed(
    streams: Streams, questions: Questions, owner: str, thread_id: str, question: str
) -> EventSourceResponse:
    """Return the answer to `question` as SSE: `token`s, then `answer` (or `error`), then `done`."""
    queue: asyncio.Queue[tuple[str, dict[str, Any]] | None] = asyncio.Queue()

    async def answer() -> None:
        try:
            found = await questions.ask(
                owner, thread_id, question, lambda text: queue.put_nowait(("token", {"text": text}))
            )
            queue.put_nowait(("answer", found.model_dump(mode="json")))
            queue.put_nowait((TERMINAL_EVENT, {"status": found.status}))
        except ResearchError as exc:
            queue.put_nowait(("error", {"code": error_code(exc), "message": exc.message}))
            queue.put_nowait((TERMINAL_EVENT, {"status": "failed"}))
        finally:
            queue.put_nowait(None)

    async def frames() -> AsyncIterator[bytes]:
        task = asyncio.create_task(answer())
        try:
            count = 0
            while (item := await queue.get()) is not None:
                count += 1
                name, data = item
                yield sse_frame(Event(count, thread_id, name, json.dumps(data), datetime.now(UTC)))
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    return event_stream(streams, frames())


@router.get("/{thread_id}/questions", response_model=list[QuestionAnswer])
async def list_questions(
    thread_id: StoredThread, owner: Owner, manager: Manager
) -> list[QuestionAnswer]:
    """The questions asked of the thread and their answers, in the order asked."""
    return await Questions(manager).list(thread_id)


@router.get("/{thread_id}/questions/{question_id}", response_model=QuestionAnswer)
async def get_question(
    thread_id: StoredThread, owner: Owner, manager: Manager, question_id: QuestionId
) -> QuestionAnswer:
    """One question and its answer."""
    return await Questions(manager).get(thread_id, question_id)


@router.post(
    "/{thread_id}/questions/{question_id}/research", status_code=202, response_model=StartAnswer
)
async def research(
    thread_id: StoredThread,
    owner: Owner,
    manager: Manager,
    response: Response,
    question_id: QuestionId,
) -> StartAnswer:
    """Start a new run on the question, seeded with the thread's sources, as a new thread."""
    record = await Questions(manager).research(owner, thread_id, question_id)
    found = links(record.thread_id)
    response.headers["Location"] = found.self
    return StartAnswer(thread_id=public_id(record.thread_id), status=record.status, links=found)
