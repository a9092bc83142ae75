"""The LLM engine against a local OpenAI-compatible server, through the real ChatOpenAI client."""

import re
import socket
from pathlib import Path
from typing import Any

import pytest
from langchain_openai import ChatOpenAI

from app.composition import EngineSetupError, check_model_server, llm_engine, make_engine
from app.settings import Settings
from core.models import ResearchPlan, SearchResult
from core.urls import normalize_url
from engines.base import ModelAccessError
from engines.extractive import ExtractiveEngine
from engines.llm import LLMEngine
from engines.llm_config import ROLES, ModelConfig
from engines.recording import recording
from engines.report_markdown import footnote_urls, split_front_matter
from graph.builder import ResearchGraph
from nodes.context import Deps
from tools.api_client import RetryPolicy
from tools.extraction import Page
from tools.local_corpus import LocalCorpus

from .fake_llm import FakeLLM, Reply, ToolCall
from .llm_script import ResearchModel
from .servers import free_port
from .support import Sleeps, start

KEY = "sk-test-secret-0123456789"


def settings_for(llm: FakeLLM, **overrides: Any) -> Settings:
    return Settings(llm_base_url=llm.base_url, llm_api_key=KEY, **overrides)


def engine_for(llm: FakeLLM, sleeps: Sleeps | None = None, **overrides: Any) -> LLMEngine:
    engine = llm_engine(settings_for(llm, **overrides))
    if sleeps is not None:  # record retry delays instead of waiting them
        engine._retry = RetryPolicy(base_delay_s=1.0, max_delay_s=20.0, jitter=0.5, sleep=sleeps)
    return engine


async def run(
    graph: ResearchGraph, deps: Deps, thread: str, payload: Any
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Run to the end; return the final values and every custom event."""
    config = {"configurable": {"thread_id": thread}}
    events: list[dict[str, Any]] = []
    async for mode, chunk in graph.astream(
        payload, config, context=deps, stream_mode=["custom", "updates"]
    ):
        if mode == "custom":
            events.append(chunk)
    return (await graph.aget_state(config)).values, events


PLAN = ResearchPlan(theme="printing press", investigation_points=["Origins"], search_queries=[])
SOURCE = SearchResult(
    title="Gutenberg",
    url="https://example.org/gutenberg",
    content="Johannes Gutenberg introduced movable type printing to Europe around 1440.",
)


# -- full runs -----------------------------------------------------------------------------


async def test_a_run_with_the_llm_engine_ends_in_a_report_whose_every_footnote_resolves(
    llm: FakeLLM, settings_env: Path, graph: ResearchGraph, corpus: LocalCorpus
) -> None:
    llm.responder = ResearchModel()
    deps = Deps(engine=engine_for(llm), search=corpus)
    values, events = await run(graph, deps, "llm-e2e", start(min_sources=2))

    report = values["final_report"]
    front, body = split_front_matter(report)
    assert 'engine: "llm (openai:gpt-4o-mini)"' in front
    assert '"writer": "openai:gpt-4o-mini"' in front
    assert values["report_status"] == "final"
    collected = {normalize_url(s.url) for s in values["research_data"]}
    definitions = footnote_urls(body)
    cited = {int(n) for n in re.findall(r"\[\^(\d+)\](?!:)", body)}
    assert cited and cited == set(definitions)
    assert all(normalize_url(url) in collected for url in definitions.values())
    assert values["review"].citations.share == 1.0

    # The writer's tokens streamed, in batches, and add up to the draft.
    tokens = [e["text"] for e in events if e["event"] == "token"]
    assert len(tokens) > 3
    assert "".join(tokens) == values["drafts"][0].markdown
    # Every prompt reached the model with the key, and no request went unanswered.
    assert all(c.headers["authorization"] == f"Bearer {KEY}" for c in llm.calls)
    assert KEY not in report and KEY not in repr(events)


async def test_usage_totals_equal_what_the_server_reported(
    llm: FakeLLM, settings_env: Path, graph: ResearchGraph, corpus: LocalCorpus
) -> None:
    llm.responder = ResearchModel()
    deps = Deps(
        engine=engine_for(llm, prices={"gpt-4o-mini": {"input": 1.0, "output": 2.0}}),
        search=corpus,
    )
    values, events = await run(graph, deps, "llm-usage", start(min_sources=2))

    usage = values["usage"]
    model = usage.models["openai:gpt-4o-mini"]
    assert model.requests == llm.reported_requests == len(llm.calls)
    assert sum(node.requests for node in usage.nodes.values()) == model.requests
    assert 0 < model.calls <= model.requests
    assert model.prompt_tokens == llm.reported_prompt_tokens
    assert model.completion_tokens == llm.reported_completion_tokens
    assert usage.total_tokens == llm.reported_prompt_tokens + llm.reported_completion_tokens
    expected_cost = (llm.reported_prompt_tokens * 1.0 + llm.reported_completion_tokens * 2.0) / 1e6
    assert usage.cost_usd == pytest.approx(expected_cost)
    # The last usage event carries the run's totals.
    last = [e for e in events if e["event"] == "usage"][-1]
    assert last["total"]["tokens"] == usage.total_tokens

    # One round record per iteration, each node call shaped like a MemberSubmission.
    rounds = values["rounds"]
    assert [r.round_number for r in rounds] == list(range(1, len(rounds) + 1))
    assert all(r.thread_id == "llm-usage" for r in rounds)
    submissions = [s for r in rounds for s in r.submissions]
    assert {s.name for s in submissions} >= {"supervisor", "researcher", "writer", "reviewer"}
    assert all(s.type == "llm" and s.status == "SUCCESS" for s in submissions)
    assert sum(r.total_usage.input_tokens for r in rounds) == llm.reported_prompt_tokens


async def test_a_token_budget_ends_the_run_with_a_partial_report_that_says_why(
    llm: FakeLLM, settings_env: Path, graph: ResearchGraph, corpus: LocalCorpus
) -> None:
    llm.responder = ResearchModel(review_scores=0.5)  # never satisfied: only a budget ends it
    deps = Deps(engine=engine_for(llm), search=corpus)
    values, _ = await run(
        graph, deps, "llm-budget", start(min_sources=2, max_iterations=20, max_tokens=6000)
    )
    assert values["report_status"] == "partial"
    assert "token budget" in values["final_report"]
    assert (
        values["usage"].total_tokens <= 6000 + 3000
    )  # stopped before the cap, give or take a step
    assert values["iteration_count"] < 20


# -- citations -----------------------------------------------------------------------------


async def test_an_invented_footnote_is_removed_and_an_unsupported_claim_is_an_issue(
    llm: FakeLLM, settings_env: Path, graph: ResearchGraph, corpus: LocalCorpus
) -> None:
    llm.responder = ResearchModel(
        invent_footnote=True,
        unsupported_claim="Bananas were the main export of medieval Mainz.",
        review_scores=1.0,
    )
    deps = Deps(engine=engine_for(llm), search=corpus)
    values, events = await run(graph, deps, "llm-cite", start(min_sources=2, max_iterations=3))

    review = values["drafts"][0].review
    assert "[^99]" not in values["drafts"][0].markdown and "Moon" in values["drafts"][0].markdown
    assert review.citations.unknown_removed == 1
    assert any("[^99]" in i.description and "removed" in i.description for i in review.issues)
    assert any(
        "does not support" in i.description and "Bananas" in i.description for i in review.issues
    )
    assert review.citations.supported < review.citations.cited_claims
    assert review.scores.fact_check < 1.0  # the model said 1.0; the checks disagree
    assert "[^99]" not in values["final_report"]
    assert any(e["event"] == "review" and e["citations"]["share"] < 1 for e in events)


async def test_a_drifting_draft_fails_review_however_the_model_scores_it(
    llm: FakeLLM, settings_env: Path
) -> None:
    llm.responder = ResearchModel(review_scores=1.0)
    press = SearchResult(
        title="Printing press",
        url="https://example.org/press",
        content="A printing press is a mechanical device for applying pressure to an inked "
        "surface resting upon a print medium.",
    )
    waltz = SearchResult(
        title="The Blue Danube",
        url="https://example.org/waltz",
        content="The Blue Danube is a waltz by Johann Strauss II, composed in 1866. It is "
        "one of the most consistently popular pieces of music in the classical repertoire.",
    )
    plan = ResearchPlan(
        theme="History of the printing press",
        investigation_points=["Origins"],
        search_queries=["printing press"],
    )
    draft = (
        "# History of the printing press\n\n## Executive Summary\n\n"
        "The Blue Danube is a waltz by Johann Strauss II, composed in 1866.[^2]\n\n"
        "## Key Findings\n\n- **Origins:** It is one of the most consistently popular pieces "
        "of music in the classical repertoire.[^2]\n\n## Detailed Analysis\n\n### Origins\n\n"
        "A printing press is a mechanical device for applying pressure to an inked surface "
        "resting upon a print medium.[^1]\n\n## References\n\n"
        f"[^1]: [Printing press]({press.url})\n[^2]: [The Blue Danube]({waltz.url})\n"
    )
    review = await engine_for(llm).review(draft, plan, [press, waltz])
    assert not review.approved  # the model gave 1.0 on every criterion
    assert any("not about the subject" in i.description for i in review.issues)
    assert review.scores.logic < 1.0


# -- structured output: repair, then fallback ----------------------------------------------


@pytest.mark.parametrize("finish", ["length", "content_filter"])
async def test_a_structured_answer_cut_off_is_repaired_then_falls_back_without_killing_the_run(
    llm: FakeLLM,
    settings_env: Path,
    graph: ResearchGraph,
    corpus: LocalCorpus,
    finish: str,
) -> None:
    script = ResearchModel()
    cut = {"n": 0}

    def responder(call: Any) -> Reply:
        if call.schema_name == "ReviewOutput":
            cut["n"] += 1
            return Reply(content='{"scores": {"fact_check": 0.9', finish=finish)
        return script(call)

    llm.responder = responder
    config = ModelConfig(structured_output="json_schema")
    deps = Deps(engine=engine_for(llm, models={"default": config.model_dump()}), search=corpus)
    values, events = await run(graph, deps, "llm-cut", start(min_sources=2, max_iterations=3))

    assert values["final_report"], "the run ends with a report, not a traceback"
    assert cut["n"] >= 2  # the cut-off answer got its repair round
    repairs = [c for c in llm.calls if c.schema_name == "ReviewOutput" and len(c.messages) > 2]
    wanted = "token limit" if finish == "length" else "content filter"
    assert any(wanted in str(c.messages[-1]) for c in repairs)
    assert any(e["event"] == "fallback" and "ReviewOutput" in e.get("reason", "") for e in events)


# -- structured output: repair, then fallback (answers that do not fit) ---------------------


async def test_a_bad_plan_gets_one_repair_round_that_shows_the_error(
    llm: FakeLLM, settings_env: Path
) -> None:
    engine = engine_for(llm)
    llm.script(
        Reply(content='{"investigation_points": "not a list"}'),
        Reply.json(
            {
                "investigation_points": ["Origins"],
                "search_queries": ["gutenberg printing press"],
                "plan_text": "ok",
            }
        ),
    )
    with recording() as recorder:
        plan = await engine.plan("printing press", [], None)
    assert plan.search_queries == ["gutenberg printing press"]
    assert recorder.fallbacks == []
    repair = llm.calls[1].user
    assert "could not be used" in repair and "investigation_points" in repair


async def test_garbage_twice_falls_back_to_the_extractive_plan_and_is_recorded(
    llm: FakeLLM, settings_env: Path
) -> None:
    engine = engine_for(llm)
    llm.script(Reply(content="Sure! Here is a plan: search stuff."), Reply(content="{oops"))
    with recording() as recorder:
        plan = await engine.plan("printing press", [SOURCE], None)
    expected = await ExtractiveEngine().plan("printing press", [SOURCE], None)
    assert plan.search_queries == expected.search_queries
    assert len(llm.calls) == 2
    assert [f.step for f in recorder.fallbacks] == ["plan"]
    assert "PlanOutput" in recorder.fallbacks[0].reason


async def test_a_garbage_review_falls_back_in_a_run_with_an_event_and_a_message(
    llm: FakeLLM, settings_env: Path, graph: ResearchGraph, corpus: LocalCorpus
) -> None:
    script = ResearchModel()

    def responder(call: Any) -> Reply:
        return Reply(content="I liked it!") if call.schema_name == "ReviewOutput" else script(call)

    llm.responder = responder
    deps = Deps(engine=engine_for(llm), search=corpus)
    values, events = await run(graph, deps, "llm-fallback", start(min_sources=2, max_iterations=3))
    assert values["final_report"]
    assert any(e["event"] == "fallback" and e["step"] == "review" for e in events)
    assert any(
        "Fell back to the extractive engine for review" in m.content for m in values["messages"]
    )
    reviewer_calls = [s for r in values["rounds"] for s in r.submissions if s.name == "reviewer"]
    assert reviewer_calls and all(s.status == "ERROR" for s in reviewer_calls)


# -- retries and refusals --------------------------------------------------------------------


async def test_429_and_500_are_retried_with_backoff_that_honours_retry_after(
    llm: FakeLLM, settings_env: Path
) -> None:
    sleeps = Sleeps()
    engine = engine_for(llm, sleeps)
    llm.script(
        Reply(status=429, headers={"Retry-After": "7"}),
        Reply(status=500),
        Reply(content="- Gutenberg printed [1]."),
    )
    summary = await engine.summarize("gutenberg", [SOURCE])
    assert summary == "- Gutenberg printed [1]."
    assert len(llm.calls) == 3
    assert len(sleeps.delays) == 2
    assert sleeps.delays[0] >= 7  # the server's Retry-After beats the 1 s backoff
    assert 1.0 <= sleeps.delays[1] <= 2.0  # second backoff: 2 s less up to 50 % jitter


async def test_retries_are_bounded_then_the_step_falls_back(
    llm: FakeLLM, settings_env: Path
) -> None:
    sleeps = Sleeps()
    engine = engine_for(llm, sleeps)
    llm.responder = lambda call: Reply(status=503)
    with recording() as recorder:
        summary = await engine.summarize("gutenberg", [SOURCE])
    assert len(llm.calls) == 4  # the first try and max_retries = 3
    assert summary == await ExtractiveEngine().summarize("gutenberg", [SOURCE])
    assert [f.step for f in recorder.fallbacks] == ["summarize"]
    assert sum(c.error is not None for c in recorder.calls) == 4


async def test_a_slow_model_times_out_and_is_retried(llm: FakeLLM, settings_env: Path) -> None:
    # The settings floor a timeout at 10 s; the client itself takes any, which keeps this fast.
    config = ModelConfig()
    fast = ChatOpenAI(
        model="gpt-4o-mini", base_url=llm.base_url, api_key=KEY, timeout=0.2, max_retries=0
    )
    engine = LLMEngine(
        dict.fromkeys(ROLES, config),
        dict.fromkeys(ROLES, fast),
        ExtractiveEngine(),
        retry=RetryPolicy(sleep=Sleeps()),
    )
    llm.script(Reply(content="late", delay_s=2), Reply(content="- on time [1]."))
    assert await engine.summarize("gutenberg", [SOURCE]) == "- on time [1]."
    assert len(llm.calls) == 2


async def test_401_is_not_retried_and_names_the_setting_without_the_key(
    llm: FakeLLM, settings_env: Path, graph: ResearchGraph, corpus: LocalCorpus
) -> None:
    llm.responder = lambda call: Reply(
        status=401,
        error_body={
            "error": {"message": f"Incorrect API key provided: {KEY}", "code": "invalid_api_key"}
        },
    )
    deps = Deps(engine=engine_for(llm, Sleeps()), search=corpus)
    with pytest.raises(ModelAccessError) as failure:
        await run(graph, deps, "llm-401", start())
    message = str(failure.value)
    assert "OPENAI_API_KEY" in message or "RESEARCH_LLM_API_KEY" in message
    assert KEY not in message
    assert len(llm.calls) == 1


async def test_a_refusal_after_sources_were_collected_ends_with_a_partial_report(
    llm: FakeLLM, settings_env: Path, graph: ResearchGraph, corpus: LocalCorpus
) -> None:
    script = ResearchModel()

    def responder(call: Any) -> Reply:
        if "Writer of professional" in call.system:
            return Reply(status=403, error_body={"error": {"message": "model not allowed"}})
        return script(call)

    llm.responder = responder
    deps = Deps(engine=engine_for(llm), search=corpus)
    values, _ = await run(graph, deps, "llm-403", start(min_sources=2))
    assert values["report_status"] == "partial"
    assert values["halted"] and "writer model" in values["halted"]
    assert "stopped:" in values["final_report"] and "refused" in values["final_report"]
    assert values["drafts"], "the extractive engine wrote the partial report"


# -- settings ----------------------------------------------------------------------------------


def test_bad_model_settings_name_the_table_field_and_bound(settings_env: Path) -> None:
    settings_env.write_text(
        '[models.writer]\ntemperature = 2.5\n[models.default]\nsystem_prompt = " "\n'
    )
    with pytest.raises(ValueError) as failure:
        Settings()
    text = str(failure.value)
    assert "models.writer.temperature" in text and "less than or equal to 2" in text
    assert "models.default.system_prompt" in text and "empty string" in text


def test_a_role_inherits_the_default_and_overrides_what_it_names(settings_env: Path) -> None:
    settings_env.write_text(
        '[models.default]\nmodel = "openai:gpt-4.1-mini"\ntemperature = 0.2\n'
        '[models.writer]\nmodel = "openai:gpt-4o"\n'
    )
    settings = Settings()
    writer = settings.models.for_role("writer")
    assert (writer.model, writer.temperature) == ("openai:gpt-4o", 0.2)
    assert settings.models.for_role("reviewer").model == "openai:gpt-4.1-mini"


def test_the_engine_is_chosen_by_what_is_configured(
    settings_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert Settings().engine_in_effect == "extractive"
    assert isinstance(make_engine(Settings()), ExtractiveEngine)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    assert Settings().engine_in_effect == "llm"
    assert Settings(engine="extractive").engine_in_effect == "extractive"
    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(ValueError, match="OPENAI_API_KEY"):
        Settings(engine="llm")


def test_an_unknown_provider_prefix_is_a_startup_error(settings_env: Path) -> None:
    settings_env.write_text('[models.reviewer]\nmodel = "nosuch:model-1"\n')
    with pytest.raises(
        EngineSetupError, match=r"models\.reviewer\.model = 'nosuch:model-1'.*provider"
    ):
        llm_engine(Settings(llm_api_key=KEY))


async def test_an_unreachable_base_url_is_a_startup_error(settings_env: Path) -> None:
    settings = Settings(llm_base_url=f"http://127.0.0.1:{free_port()}/v1")
    with pytest.raises(EngineSetupError, match="RESEARCH_LLM_BASE_URL .* is unreachable"):
        await check_model_server(settings)


async def test_a_server_busy_with_another_request_passes_the_startup_check(
    settings_env: Path,
) -> None:
    # It takes the connection (the kernel's backlog) and answers nothing: busy, not absent.
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        settings = Settings(llm_base_url=f"http://127.0.0.1:{port}/v1")
        await check_model_server(settings, timeout_s=0.2)


async def test_a_reachable_base_url_passes_the_startup_check(
    llm: FakeLLM, settings_env: Path
) -> None:
    await check_model_server(settings_for(llm))


# -- the ReAct loop ------------------------------------------------------------------------------


class PagesReader:
    """Reads any URL as a page of known text (the scraper's part, without the network)."""

    def __init__(self) -> None:
        self.read: list[str] = []

    async def fetch(self, url: str) -> Page:
        self.read.append(url)
        text = f"The full page at {url} explains how printing spread across Europe after 1450."
        return Page(url=url, final_url=url, title=f"Page {len(self.read)}", text=text)


async def test_after_the_plan_the_model_searches_its_knowledge_gaps_in_a_react_loop(
    llm: FakeLLM, settings_env: Path, graph: ResearchGraph, corpus: LocalCorpus
) -> None:
    script = ResearchModel()
    llm.responder = script
    deps = Deps(engine=engine_for(llm), search=corpus)
    values, events = await run(graph, deps, "llm-react", start(min_sources=50))

    # The topic's own keyword query first; the model's plan adds to it.
    assert values["queries_done"][:3] == [
        "history printing press",
        "printing press",
        "movable type",
    ]
    assert "Gutenberg Bible" in values["queries_done"]
    note = next(n for n in values["notes"] if n.query == "Gutenberg Bible")
    assert note.summary_md and note.status in ("ok", "empty")
    thoughts = [m.content for m in values["messages"] if m.content.startswith("Thought:")]
    assert "Thought: point 1 still needs sources." in thoughts
    react_calls = [c for c in llm.calls if c.tools]
    assert react_calls and all(c.tools == ["search"] for c in react_calls)  # no reader: no scrape
    observed = [m for c in react_calls for m in c.messages if m.get("role") == "tool"]
    assert any("Results:" in str(m["content"]) for m in observed)
    # The second loop finds the query already run, concludes, and the run writes its report.
    assert any("searched already" in str(m["content"]) for m in observed)
    assert values["final_report"]
    # Its last research step had nothing left to search.
    assert any(str(m.content).startswith("Searched 0 queries") for m in values["messages"])
    assert any(e["event"] == "note" and e["query"] == "Gutenberg Bible" for e in events)


async def test_the_react_loop_can_read_a_page_in_full_and_keeps_it_as_a_source(
    llm: FakeLLM, settings_env: Path, graph: ResearchGraph, corpus: LocalCorpus
) -> None:
    page_url = "https://example.org/printing-in-europe"
    llm.responder = ResearchModel(actions=[ToolCall("scrape", {"url": page_url})])
    reader = PagesReader()
    deps = Deps(engine=engine_for(llm), search=corpus, reader=reader, pages_per_query=0)
    values, _ = await run(graph, deps, "llm-scrape", start(min_sources=50, max_iterations=4))

    assert reader.read and set(reader.read) == {page_url}  # each research step's loop reads it
    source = next(s for s in values["research_data"] if s.url == page_url)
    assert "spread across Europe after 1450" in source.content
    assert any(c.tools == ["search", "scrape"] for c in llm.calls)


async def test_a_research_step_that_runs_out_of_time_ends_with_a_report_from_what_was_found(
    llm: FakeLLM, settings_env: Path, graph: ResearchGraph, corpus: LocalCorpus
) -> None:
    llm.responder = ResearchModel(react_delay_s=5, review_scores=0.5)
    deps = Deps(engine=engine_for(llm), search=corpus)
    values, _ = await run(graph, deps, "llm-late", start(min_sources=50, time_budget_s=1.5))

    assert any("ran out of time" in m.content for m in values["messages"])
    assert values["drafts"], "a report was written from the plan's results"
    # With the budget spent no model call starts: the writer and the reviewer fell back
    # (the model, which would have scored 0.5, never reviewed), and said why.
    fell_back = [m.content for m in values["messages"] if "Fell back" in str(m.content)]
    assert any("for write:" in f and "time budget is spent" in f for f in fell_back)
    assert any("for review:" in f and "time budget is spent" in f for f in fell_back)
    assert values["report_status"] == ("final" if values["review"].approved else "partial")


async def test_the_model_writes_from_the_sources_about_the_topic_the_most_relevant_first(
    llm: FakeLLM, settings_env: Path
) -> None:
    llm.responder = ResearchModel()
    engine = engine_for(llm)
    press = SearchResult(
        title="Printing press",
        url="https://example.org/press",
        content="A printing press applies pressure to an inked surface. The printing press "
        "was introduced to Europe by Johannes Gutenberg.",
    )
    turnip = SearchResult(
        title="Turnip",
        url="https://example.org/turnip",
        content="The turnip is a root vegetable grown in temperate climates.",
    )
    plan = ResearchPlan(theme="printing press", investigation_points=["Origins"], search_queries=[])
    await engine.write(plan, [turnip, SOURCE, press], None, None)
    prompt = next(c.user for c in llm.calls if "Writer of professional" in c.system)
    assert "Turnip" not in prompt  # about something else: the model is not given it
    assert prompt.index("Title: Printing press") < prompt.index("Title: Gutenberg")
