"""Follow-up questions on a finished thread, answered from the run's own evidence only.

The passages come from the sources the run collected (`engines.questions.retrieve`: the
extractive writer's ranking); offline the answer is those passages, with a model its
answer from them. Either way every sentence goes through the citation check of a run's
review (`engines.checks.supports`): a sentence that cites nothing, cites a source it was
not given, or says what its source does not hold is dropped. Each kept sentence carries
the offsets of its passage in the cited source's stored text, as `GET .../sources/{n}`
gives them (`service.citations.closest_passage`). Answers are kept on the thread's state,
so they are exported, imported and deleted with it.

Answering is a step of the thread's own, named `ask`: its time and model calls (the LLM
engine's) join the thread's usage as a node step's do, and each model call joins the
run's evidence (`ModelCallRecord`, node `ask`) while the thread still has evidence.
"""

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from core.models import SearchResult
from core.options import ResearchRequest, RunOptions
from core.questions import (
    MAX_QUESTIONS,
    AnswerSentence,
    AnswerSource,
    CitedPassage,
    QuestionAnswer,
)
from core.state import initial_state
from core.urls import normalize_url
from core.usage import Usage
from engines.base import ModelAccessError
from engines.checks import supports
from engines.questions import (
    ANSWER_PASSAGES,
    MODEL_PASSAGES,
    Answerer,
    Retrieval,
    extractive_answer,
    retrieve,
)
from engines.recording import ModelCall, recording
from engines.report_markdown import cited_sentences
from nodes.accounting import spent
from service.citations import closest_passage, numbered_sources
from service.errors import InvalidState, NotFound
from service.evidence import RunEvidence
from service.runner import thread_config
from service.runs import RunManager
from service.thread_ids import public_id
from stores.registry import TERMINAL, ThreadRecord

# A question is written to the thread's state as the graph's last node: the thread stays finished.
_AS_NODE = "finalize"
# The step answering a question, as the thread's usage and evidence name it.
ASK_NODE = "ask"


@dataclass(frozen=True, slots=True)
class _Thread:
    """A finished thread, as a question is answered from it."""

    thread_id: str
    values: dict[str, Any]
    numbered: dict[int, SearchResult]
    footnotes: set[int]


def _research_link(thread_id: str, question_id: int) -> str:
    return f"/v1/research/{public_id(thread_id)}/questions/{question_id}/research"


class Questions:
    """Asks, lists and follows up the questions of the manager's threads."""

    def __init__(self, manager: RunManager) -> None:
        self.manager = manager

    async def _finished(self, owner: str, thread_id: str) -> _Thread:
        """Return the thread to answer from; InvalidState unless its run finished with a report."""
        record = await self.manager.get(owner, thread_id)
        if record.status not in TERMINAL:
            raise InvalidState(
                f"the run is {record.status}: ask once it has finished (follow the events "
                "until 'done')"
            )
        values = dict((await self.manager.snapshot(thread_id)).values or {})
        if not values.get("final_report"):
            raise InvalidState("the run wrote no report: there is no evidence to answer from")
        if len(values.get("questions") or []) >= MAX_QUESTIONS:
            raise InvalidState(f"the thread holds {MAX_QUESTIONS} questions already")
        numbered, footnotes = numbered_sources(values)
        return _Thread(thread_id, values, numbered, footnotes)

    async def check(self, owner: str, thread_id: str) -> None:
        """Raise what asking would (NotFound, InvalidState) before an answer is streamed."""
        await self._finished(owner, thread_id)

    async def ask(
        self,
        owner: str,
        thread_id: str,
        question: str,
        on_token: Callable[[str], None] | None = None,
    ) -> QuestionAnswer:
        """Answer `question` from the thread's evidence and keep it on the thread."""
        thread = await self._finished(owner, thread_id)
        engine = self.manager.executor.deps.engine
        model = engine if isinstance(engine, Answerer) else None
        count = MODEL_PASSAGES if model is not None else ANSWER_PASSAGES
        sources = list(thread.numbered.values())
        topic = str(thread.values.get("topic", ""))
        started = time.perf_counter()
        with recording() as recorder:
            # The ranking is CPU work over every sentence of the sources: off the event loop.
            found = await asyncio.to_thread(retrieve, question, topic, sources, count)
            answer = await self._answer(thread, question, found, model, on_token)
        usage = spent(ASK_NODE, started, recorder)
        return await self._keep(thread_id, answer, usage, recorder.calls)

    async def _answer(
        self,
        thread: _Thread,
        question: str,
        found: Retrieval,
        model: Answerer | None,
        on_token: Callable[[str], None] | None,
    ) -> QuestionAnswer:
        """Return the answer (id 0 until kept): the passages' or the model's, checked."""
        if not found.answers:
            text = (
                "The run's evidence does not answer this question: its closest passage holds "
                f"{found.match:.0%} of what the question asks. Start a new run on it: "
                f"POST {_research_link(thread.thread_id, 0)}."
            )
            if on_token is not None:
                on_token(text)
            return QuestionAnswer(
                id=0,
                question=question,
                status="not_in_evidence",
                answer=text,
                match=found.match,
                engine="extractive" if model is None else _model_name(model),
            )
        number = {normalize_url(s.url): n for n, s in thread.numbered.items()}
        cited = [(p.text, number[normalize_url(p.source.url)]) for p in found.passages]
        offline = extractive_answer(
            [(p.text, number[normalize_url(p.source.url)]) for p in found.answering][
                :ANSWER_PASSAGES
            ]
        )
        written, engine = offline, "extractive"
        if model is not None:
            given = [(n, thread.numbered[n].title, text) for text, n in cited]
            try:
                written = await model.answer_question(question, given, on_token)
                engine = _model_name(model)
            except ModelAccessError:
                written = ""
        allowed = {n for _, n in cited}
        sentences, dropped = _checked(written, allowed, thread.numbered)
        if not sentences:  # nothing the model said holds: the passages themselves answer
            sentences, _ = _checked(offline, allowed, thread.numbered)
            engine = "extractive"
        if engine == "extractive" and on_token is not None:
            for sentence in sentences:
                on_token(_marked(sentence) + " ")
        used = sorted({c.n for s in sentences for c in s.citations})
        return QuestionAnswer(
            id=0,
            question=question,
            status="answered",
            answer=" ".join(_marked(s) for s in sentences),
            sentences=sentences,
            sources=[
                AnswerSource(
                    n=n,
                    title=thread.numbered[n].title,
                    url=thread.numbered[n].url,
                    in_report=n in thread.footnotes,
                )
                for n in used
            ],
            match=found.match,
            engine=engine,
            dropped=dropped if model is not None else 0,
        )

    async def _keep(
        self,
        thread_id: str,
        answer: QuestionAnswer,
        usage: Usage | None = None,
        calls: list[ModelCall] | None = None,
    ) -> QuestionAnswer:
        """Number the answer and write it to the thread's state, under the thread's lock.

        `usage` joins the thread's; `calls` join its evidence.
        """
        async with self.manager.signals.admission(thread_id):
            record = await self.manager.registry.get(thread_id)
            if record is None:
                raise NotFound(f"no research thread {public_id(thread_id)!r}: it was deleted")
            kept = await self._kept(thread_id)
            number = max((q.id for q in kept), default=0) + 1
            update: dict[str, Any] = {"id": number}
            if answer.status == "not_in_evidence":
                link = _research_link(thread_id, number)
                update |= {
                    "research": link,
                    "answer": answer.answer.replace(_research_link(thread_id, 0), link),
                }
            answer = answer.model_copy(update=update)
            await self._write(thread_id, answer, usage)
            await self._record(thread_id, calls or [])
        return answer

    async def _write(
        self, thread_id: str, answer: QuestionAnswer, usage: Usage | None = None
    ) -> None:
        values: dict[str, Any] = {"questions": [answer]}
        if usage is not None:
            values["usage"] = usage  # summed into the thread's by the state's reducer
        await self.manager.graph.aupdate_state(thread_config(thread_id), values, as_node=_AS_NODE)

    async def _record(self, thread_id: str, calls: list[ModelCall]) -> None:
        """Add the answer's model calls to the thread's evidence, when it still has some.

        A thread whose evidence was pruned (or never kept) gets none: a header made up
        now would not say how the run got its evidence.
        """
        store = self.manager.executor.evidence
        if store is None or not calls:
            return
        header = await store.header(thread_id)
        if header is not None:
            RunEvidence(store, thread_id, header).model_calls(ASK_NODE, calls)

    async def _kept(self, thread_id: str) -> list[QuestionAnswer]:
        values = (await self.manager.snapshot(thread_id)).values or {}
        return list(values.get("questions") or [])

    async def list(self, thread_id: str) -> list[QuestionAnswer]:
        """Return the thread's questions and answers, in the order asked."""
        return await self._kept(thread_id)

    async def get(self, thread_id: str, question_id: int) -> QuestionAnswer:
        """Return question `question_id` of the thread, or NotFound."""
        for kept in await self._kept(thread_id):
            if kept.id == question_id:
                return kept
        raise NotFound(
            f"no question {question_id} on thread {public_id(thread_id)!r}: list them with "
            "GET .../questions"
        )

    async def research(self, owner: str, thread_id: str, question_id: int) -> ThreadRecord:
        """Start a new run on the question, seeded with the thread's sources (a new thread).

        The new run's planner and searches start from the question; its writer draws on
        the sources it finds and on every source the asked thread collected.
        """
        await self.manager.get(owner, thread_id)
        asked = await self.get(thread_id, question_id)
        if asked.research_thread is not None:
            raise InvalidState(f"a run was started on this question: {asked.research_thread}")
        values = dict((await self.manager.snapshot(thread_id)).values or {})
        options = values.get("options") or RunOptions()
        sources: list[SearchResult] = list(values.get("research_data") or [])
        seeded = initial_state(asked.question, options) | {"research_data": sources}
        graph = self.manager.graph

        async def seed(new_id: str) -> None:
            await graph.aupdate_state(thread_config(new_id), seeded, as_node="__start__")

        request = ResearchRequest(topic=asked.question, options=options)
        started = await self.manager.start(owner, request, seed=seed)
        async with self.manager.signals.admission(thread_id):
            latest = await self.get(thread_id, question_id)
            if latest.research_thread is None:
                await self._write(
                    thread_id,
                    latest.model_copy(update={"research_thread": public_id(started.thread_id)}),
                )
        return started


def _model_name(model: Answerer) -> str:
    return model.models.get("writer", "llm")


def _marked(sentence: AnswerSentence) -> str:
    """Return the sentence with its footnote marks."""
    return sentence.text + "".join(f"[^{c.n}]" for c in sentence.citations)


def _checked(
    text: str, allowed: set[int], numbered: dict[int, SearchResult]
) -> tuple[list[AnswerSentence], int]:
    """Return the sentences of `text` that pass the citation check, and how many did not.

    A sentence passes when it cites only sources it was given, at least one, and one of
    them holds enough of its words (the review's fact check).
    """
    kept: list[AnswerSentence] = []
    dropped = 0
    for sentence, refs in cited_sentences(text):
        refs = list(dict.fromkeys(refs))
        if (
            not refs
            or not set(refs) <= allowed
            or not any(supports(sentence, numbered[n]) for n in refs)
        ):
            dropped += 1
            continue
        citations = []
        for n in refs:
            quote = closest_passage(sentence, numbered[n].content)
            citations.append(
                CitedPassage(n=n, start=quote.start, end=quote.end, support=quote.support)
            )
        kept.append(AnswerSentence(text=sentence, citations=citations))
    return kept, dropped
