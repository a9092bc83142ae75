"""Follow-up questions on a finished thread, over real HTTP on both stores and with a model."""

import asyncio
import re
from pathlib import Path
from typing import Any

import httpx

from app.api import create_app
from app.settings import Settings
from core.models import SearchResult
from engines.checks import supports
from engines.extractive_candidates import quotable
from engines.questions import MATCH_THRESHOLD, retrieve, unseen_idf
from engines.relevance import Relevance

from .fake_llm import Call, FakeLLM, Reply
from .llm_script import ResearchModel
from .servers import serve_port
from .sse import frames
from .support import TOPIC
from .test_api import TERMINAL, Service, service, wait_for_status

__all__ = ["service"]  # the fixture, shared with test_api

ANSWERABLE = "Why did Martin Luther's writings spread so quickly across Germany?"
UNANSWERABLE = "What is the boiling point of mercury at sea level?"


async def finished(client: httpx.AsyncClient, headers: dict[str, str] | None = None) -> str:
    started = await client.post("/v1/research", json={"topic": TOPIC}, headers=headers)
    assert started.status_code == 202, started.text
    thread_id: str = started.json()["thread_id"]
    client.headers.update(headers or {})
    detail = await wait_for_status(client, thread_id, TERMINAL)
    assert detail["status"] == "completed", detail
    return thread_id


async def ask(client: httpx.AsyncClient, thread_id: str, question: str) -> dict[str, Any]:
    answer = await client.post(f"/v1/research/{thread_id}/questions", json={"question": question})
    assert answer.status_code == 201, answer.text
    found: dict[str, Any] = answer.json()
    return found


async def assert_passages_resolve(
    client: httpx.AsyncClient, thread_id: str, answer: dict[str, Any]
) -> None:
    """Every sentence cites a source whose stored text holds its passage at the offsets."""
    assert answer["sentences"]
    for sentence in answer["sentences"]:
        assert sentence["citations"], sentence
        for cited in sentence["citations"]:
            view = (await client.get(f"/v1/research/{thread_id}/sources/{cited['n']}")).json()
            assert 0 <= cited["start"] < cited["end"] <= len(view["text"])
            passage = view["text"][cited["start"] : cited["end"]]
            source = SearchResult(title=view["title"], url=view["url"], content=passage)
            assert supports(sentence["text"], source), (sentence["text"], passage)
            assert f"[^{cited['n']}]" in answer["answer"]


async def test_an_answer_cites_passages_and_is_kept_on_the_thread(
    service: Service, stores: dict[str, Any]
) -> None:
    async with service(**stores) as client:
        thread_id = await finished(client)
        answered = await ask(client, thread_id, ANSWERABLE)
        assert answered["status"] == "answered" and answered["id"] == 1
        assert "Luther" in answered["answer"]
        await assert_passages_resolve(client, thread_id, answered)
        assert {s["n"] for s in answered["sources"]} == {
            c["n"] for s in answered["sentences"] for c in s["citations"]
        }

        unknown = await ask(client, thread_id, UNANSWERABLE)
        assert unknown["status"] == "not_in_evidence" and unknown["sentences"] == []
        link = f"/v1/research/{thread_id}/questions/2/research"
        assert unknown["research"] == link and link in unknown["answer"]
        assert unknown["match"] < answered["match"]

        kept = (await client.get(f"/v1/research/{thread_id}/questions")).json()
        assert [q["question"] for q in kept] == [ANSWERABLE, UNANSWERABLE]
        assert (await client.get(f"/v1/research/{thread_id}/questions/1")).json() == answered
        assert (await client.get(f"/v1/research/{thread_id}/questions/3")).status_code == 404
        # the thread is still the finished thread it was
        detail = (await client.get(f"/v1/research/{thread_id}")).json()
        assert detail["status"] == "completed"
        exported = (await client.get(f"/v1/research/{thread_id}/export")).json()
        assert [q["id"] for q in exported["state"]["questions"]] == [1, 2]


async def test_a_source_the_report_does_not_cite_is_numbered_after_its_footnotes(
    service: Service,
) -> None:
    async with service() as client:
        thread_id = await finished(client)
        cited = (
            await client.get(
                f"/v1/research/{thread_id}/report", headers={"Accept": "application/json"}
            )
        ).json()["sources"]
        after = max(c["n"] for c in cited) + 1
        extra = await client.get(f"/v1/research/{thread_id}/sources/{after}")
        assert extra.status_code == 200, extra.text
        view = extra.json()
        assert view["n"] == after and view["quotes"] == []
        assert view["url"] not in {c["url"] for c in cited}


async def test_an_answer_streams_as_a_run_does(service: Service) -> None:
    async with service() as client:
        thread_id = await finished(client)
        url = f"/v1/research/{thread_id}/questions?stream=true"
        async with client.stream("POST", url, json={"question": ANSWERABLE}) as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            seen = [frame async for frame in frames(response)]
        names = [f.event for f in seen]
        assert names[0] == "token" and names[-2:] == ["answer", "done"]
        assert [f.id for f in seen] == list(range(1, len(seen) + 1))
        answer = seen[-2].data
        assert (
            "".join(f.data["text"] for f in seen if f.event == "token").strip() == answer["answer"]
        )
        kept = (await client.get(f"/v1/research/{thread_id}/questions")).json()
        assert kept == [answer]


async def test_not_in_the_evidence_starts_a_run_seeded_with_the_thread_s_sources(
    service: Service,
) -> None:
    async with service() as client:
        thread_id = await finished(client)
        asked = await ask(client, thread_id, UNANSWERABLE)
        started = await client.post(asked["research"])
        assert started.status_code == 202, started.text
        new_id = started.json()["thread_id"]
        assert new_id != thread_id
        detail = await wait_for_status(client, new_id, TERMINAL)
        assert detail["topic"] == UNANSWERABLE
        before = (await client.get(f"/v1/research/{thread_id}/export")).json()["state"]
        after = (await client.get(f"/v1/research/{new_id}/export")).json()["state"]
        urls = {s["url"] for s in after["research_data"]}
        assert {s["url"] for s in before["research_data"]} <= urls
        kept = (await client.get(f"/v1/research/{thread_id}/questions/1")).json()
        assert kept["research_thread"] == new_id
        again = await client.post(asked["research"])
        assert again.status_code == 409


async def test_questions_are_the_callers_own_bounded_and_only_on_finished_threads(
    service: Service,
) -> None:
    async with service(api_keys=["key-a", "key-b"]) as client:
        thread_id = await finished(client, {"Authorization": "Bearer key-a"})
        other = {"Authorization": "Bearer key-b"}
        url = f"/v1/research/{thread_id}/questions"
        theirs = await client.post(url, json={"question": ANSWERABLE}, headers=other)
        assert theirs.status_code == 404 and theirs.json()["error"]["code"] == "not_found"
        assert (await client.get(url, headers=other)).status_code == 404
        assert (await client.post(f"{url}/1/research", headers=other)).status_code == 404

        for body in (
            {"question": "why " * 200},
            {"question": "   "},
            {"question": "???"},
            {"question": ANSWERABLE, "stream": True},
            {},
        ):
            bad = await client.post(url, json=body)
            assert bad.status_code == 422, (body, bad.text)
            assert bad.json()["error"]["code"] == "validation_error"
        assert (await client.get(url)).json() == []

        waiting = await client.post(
            "/v1/research", json={"topic": TOPIC, "options": {"approval": "plan"}}
        )
        waiting_id = waiting.json()["thread_id"]
        await wait_for_status(client, waiting_id, {"waiting_for_approval"})
        busy = await client.post(
            f"/v1/research/{waiting_id}/questions", json={"question": ANSWERABLE}
        )
        assert busy.status_code == 409 and busy.json()["error"]["code"] == "invalid_state"
        streamed = await client.post(
            f"/v1/research/{waiting_id}/questions?stream=true", json={"question": ANSWERABLE}
        )
        assert streamed.status_code == 409


class AnsweringModel(ResearchModel):
    """The research model, and for a follow-up question an answer with three kinds of sentence."""

    def __call__(self, call: Call) -> Reply:
        if "follow-up question" not in call.system:
            return super().__call__(call)
        n, title, text = re.search(r"^\[(\d+)\] ([^:]+): (.+)$", call.user, re.M).groups()  # type: ignore[union-attr]
        return Reply(
            content=f"{text}[^{n}] The printing press was invented by dolphins on Mars "
            f"in 3021.[^{n}] Nothing more is known about the matter at all."
        )


async def test_with_a_model_only_cited_supported_sentences_are_kept(
    tmp_path: Path, corpus_index: Path, llm: FakeLLM, settings_env: Path
) -> None:
    llm.responder = AnsweringModel()
    settings = Settings(
        data_dir=tmp_path / "data",
        corpus_index=corpus_index,
        search_provider="local",
        llm_base_url=llm.base_url,
        llm_api_key="sk-test",
        retry_base_delay_s=0,
    )
    with serve_port(create_app(settings), lifespan="on") as port:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            thread_id = await finished(client)
            answered = await ask(client, thread_id, ANSWERABLE)
            asked = [c for c in llm.calls if "follow-up question" in c.system]
            assert len(asked) == 1 and "Question: " + ANSWERABLE in asked[0].user
            assert answered["status"] == "answered"
            assert answered["engine"] == "openai:gpt-4o-mini"
            assert answered["dropped"] == 2
            assert len(answered["sentences"]) == 1 and "dolphins" not in answered["answer"]
            await assert_passages_resolve(client, thread_id, answered)


async def test_with_a_model_the_answer_s_call_joins_the_thread_s_usage_and_evidence(
    tmp_path: Path, corpus_index: Path, llm: FakeLLM, settings_env: Path
) -> None:
    llm.responder = AnsweringModel()
    settings = Settings(
        data_dir=tmp_path / "data",
        corpus_index=corpus_index,
        search_provider="local",
        llm_base_url=llm.base_url,
        llm_api_key="sk-test",
        retry_base_delay_s=0,
    )
    with serve_port(create_app(settings), lifespan="on") as port:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            thread_id = await finished(client)
            before = (await client.get(f"/v1/research/{thread_id}")).json()
            assert before["tokens"] == llm.reported_total_tokens
            run_prompt, run_completion = llm.reported_prompt_tokens, llm.reported_completion_tokens
            run_requests = llm.reported_requests

            answered = await ask(client, thread_id, ANSWERABLE)
            assert answered["engine"] == "openai:gpt-4o-mini"
            assert llm.reported_requests == run_requests + 1
            prompt = llm.reported_prompt_tokens - run_prompt
            completion = llm.reported_completion_tokens - run_completion
            assert prompt > 0 and completion > 0

            # The thread's usage: its tokens and cost count the question's call, as an `ask` step.
            detail = (await client.get(f"/v1/research/{thread_id}")).json()
            assert detail["status"] == "completed"
            assert detail["tokens"] == llm.reported_total_tokens
            assert detail["cost_usd"] > before["cost_usd"]
            ask_step = detail["usage"]["nodes"]["ask"]
            assert ask_step["calls"] == 1 and ask_step["requests"] == 1
            assert (ask_step["prompt_tokens"], ask_step["completion_tokens"]) == (
                prompt,
                completion,
            )
            model = detail["usage"]["models"]["openai:gpt-4o-mini"]
            assert model["requests"] == llm.reported_requests

            # The thread's evidence: the call, as the run's own model calls are kept.
            for _ in range(50):  # the store writes its queue a moment later
                exported = (await client.get(f"/v1/research/{thread_id}/export")).json()
                records = exported["evidence"]["records"]
                asked = [r for r in records if r["kind"] == "model" and r["node"] == "ask"]
                if asked:
                    break
                await asyncio.sleep(0.1)
            assert len(asked) == 1, [r.get("node") for r in records]
            assert asked[0]["role"] == "writer" and asked[0]["model"] == "openai:gpt-4o-mini"
            assert (asked[0]["input_tokens"], asked[0]["output_tokens"]) == (prompt, completion)
            run_calls = [r for r in records if r["kind"] == "model" and r["node"] != "ask"]
            assert len(run_calls) == run_requests


# A run's sources on "how does the human heart work" (Wikipedia summaries), none naming a chamber.
HEART_TOPIC = "how does the human heart work"
HEART_SOURCES = [
    SearchResult(
        title=title, url=f"https://en.wikipedia.org/wiki/{title.replace(' ', '_')}", content=text
    )
    for title, text in [
        (
            "Heart",
            "The heart is a muscular organ found in humans and other animals. This organ pumps "
            "blood through the blood vessels. The heart and blood vessels together make up the "
            "circulatory system. The pumped blood carries oxygen and nutrients to the tissue, while "
            "carrying metabolic waste such as carbon dioxide to the lungs.",
        ),
        (
            "Vein",
            "A vein is a blood vessel in the circulatory system of humans and most other animals "
            "that carries blood towards the heart. Most veins carry deoxygenated blood from the "
            "tissues back to the heart; exceptions are those of the pulmonary and fetal "
            "circulations which carry oxygenated blood to the heart.",
        ),
        (
            "Lung",
            "The lungs are the primary organs of the respiratory system in many animals, including "
            "humans. In mammals and most other tetrapods, two lungs are located near the backbone "
            "on either side of the heart. Their function in the respiratory system is to extract "
            "oxygen from the atmosphere and transfer it into the bloodstream.",
        ),
        (
            "Circulatory system",
            "In vertebrates, the circulatory system is a system of organs that includes the heart, "
            "blood vessels, and blood which is circulated throughout the body. The circulatory "
            "system has two divisions, a systemic circulation or circuit, and a pulmonary "
            "circulation or circuit.",
        ),
        (
            "Artery",
            "An artery is a blood vessel in humans and most other animals that takes oxygenated "
            "blood away from the heart in the systemic circulation to one or more parts of the "
            "body.",
        ),
        (
            "Blood",
            "Blood is a body fluid in the circulatory system of humans and other vertebrates that "
            "delivers necessary substances such as nutrients and oxygen to the cells of the body.",
        ),
    ]
]


def test_a_question_word_no_source_holds_weighs_more_than_one_a_single_source_holds() -> None:
    """ "Many" is in one source (the lungs "in many animals"), "chamber" in none: no answer."""
    found = retrieve("How many chambers does the heart have?", HEART_TOPIC, HEART_SOURCES)
    assert not found.answers, found
    assert found.match < MATCH_THRESHOLD
    assert found.answering == []


def test_a_question_whose_main_words_no_source_holds_is_not_in_the_evidence() -> None:
    for question in (
        "How is a heart transplant performed?",
        "How many heart transplants are performed in Brazil?",
    ):
        found = retrieve(question, HEART_TOPIC, HEART_SOURCES)
        assert not found.answers, (question, found)


def test_a_question_the_sources_hold_is_answered_from_them() -> None:
    found = retrieve("What do veins carry?", HEART_TOPIC, HEART_SOURCES)
    assert found.answers and found.match == 1.0
    assert "carr" in found.answering[0].text


def test_an_unseen_word_weighs_more_than_any_word_a_source_holds() -> None:
    _, idf = quotable(HEART_SOURCES, Relevance.of_topic(HEART_TOPIC, HEART_SOURCES))
    assert unseen_idf(len(HEART_SOURCES)) > max(idf.values())
