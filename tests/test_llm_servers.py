"""The LLM engine against servers and models that depart from OpenAI's ways.

Each misbehaviour was met on a real server (llama.cpp's llama-server and llama-cpp-python
serving SmolLM2-135M); the fake server is taught it (`ServerQuirks`, scripted replies) and
the real ChatOpenAI client talks to it over loopback.
"""

import re
from pathlib import Path
from typing import Any

import pytest

from core.models import ResearchPlan, SearchResult
from engines.recording import recording
from engines.report_markdown import split_front_matter
from graph.builder import ResearchGraph
from nodes.context import Deps
from prompts.planner import PLAN_SYSTEM
from tools.local_corpus import LocalCorpus

from .fake_llm import Call, FakeLLM, Reply, ToolCall, error_body
from .llm_script import ResearchModel
from .support import start
from .test_llm_engine import engine_for, run

PLAN_FOR_WRITE = ResearchPlan(
    theme="printing press", investigation_points=["Origins"], search_queries=["printing press"]
)
GOOD_PLAN = {
    "investigation_points": ["Origins", "Spread across Europe"],
    "search_queries": ["printing press history"],
    "plan_text": "Search the origins, then the spread.",
}


def structured_kinds(llm: FakeLLM) -> list[str]:
    """How each request asked for structure: its response_format type, a forced tool, or none."""
    kinds = []
    for call in llm.calls:
        body = call.body
        if body.get("response_format"):
            kinds.append(body["response_format"]["type"])
        elif isinstance(body.get("tool_choice"), dict):
            kinds.append("tool")
        elif call.tools:
            kinds.append("tools offered")
        else:
            kinds.append("text")
    return kinds


# -- capabilities ------------------------------------------------------------------------


async def test_a_server_that_refuses_json_schema_is_asked_another_way_once_and_no_retries(
    llm: FakeLLM, settings_env: Path
) -> None:
    llm.quirks.refuses_json_schema = True  # llama-cpp-python answers 500
    llm.responder = ResearchModel()
    engine = engine_for(llm)
    with recording() as first:
        plan = await engine.plan("history of the printing press", [], None)
    assert plan.search_queries == ["printing press", "movable type"]
    assert first.fallbacks == []
    # One refused request, not four retries of a "server error"; then a forced tool call.
    assert llm.refused == 1
    assert structured_kinds(llm) == ["json_schema", "tool"]
    chosen = first.structured["openai:gpt-4o-mini"]
    assert chosen.method == "function_calling"
    assert "json_schema" in chosen.refused and "response_format" in chosen.refused["json_schema"]
    assert [c.error for c in first.calls] == ["MethodRefused", None]

    # Remembered: the next structured call goes straight to the method that works.
    with recording() as second:
        await engine.plan("history of the printing press", [], None)
    assert structured_kinds(llm)[2:] == ["tool"]
    assert len(second.calls) == 1


async def test_a_server_that_ignores_the_forced_tool_and_refuses_json_mode_is_asked_in_the_prompt(
    llm: FakeLLM, settings_env: Path
) -> None:
    llm.quirks.refuses_json_schema = True
    llm.quirks.ignores_tool_choice = True  # llama-server with SmolLM2's template
    llm.quirks.refuses_json_object = True
    script = ResearchModel()
    llm.responder = script
    engine = engine_for(llm)
    with recording() as recorder:
        plan = await engine.plan("history of the printing press", [], None)
    assert plan.search_queries == ["printing press", "movable type"]
    assert structured_kinds(llm) == ["json_schema", "tools offered", "json_object", "text"]
    # The schema travels in the prompt when the request cannot carry it.
    assert "PlanOutput" in llm.calls[-1].system and '"search_queries"' in llm.calls[-1].system
    chosen = recorder.structured["openai:gpt-4o-mini"]
    assert chosen.method == "prompt"
    assert set(chosen.refused) == {"json_schema", "function_calling", "json_mode"}
    # The ignored tool call still cost a request, and it is counted.
    assert len(recorder.calls) == 4 == len(llm.calls)


async def test_a_method_that_worked_and_is_refused_later_is_given_up_for_the_next(
    llm: FakeLLM, settings_env: Path
) -> None:
    llm.responder = ResearchModel()
    engine = engine_for(llm)
    await engine.plan("history of the printing press", [], None)  # json_schema works
    refusal = "response_format: the JSON schema could not be turned into a grammar"
    llm.script(Reply(status=500, error_body=error_body(500, refusal)))
    with recording() as recorder:
        plan = await engine.plan("history of the printing press", [], None)
    assert plan.search_queries == ["printing press", "movable type"]
    assert structured_kinds(llm) == ["json_schema", "json_schema", "tool"]
    assert recorder.structured["openai:gpt-4o-mini"].method == "function_calling"
    assert recorder.fallbacks == []


async def test_a_run_says_which_way_of_asking_is_used_and_needs_no_fallback(
    llm: FakeLLM, settings_env: Path, graph: ResearchGraph, corpus: LocalCorpus
) -> None:
    llm.quirks.refuses_json_schema = True
    llm.responder = ResearchModel()
    deps = Deps(engine=engine_for(llm), search=corpus)
    values, events = await run(graph, deps, "llm-caps", start(min_sources=2))

    said = [e for e in events if e["event"] == "structured_output"]
    assert said and {e["method"] for e in said} == {"function_calling"}
    assert "json_schema" in said[0]["refused"]
    assert not [e for e in events if e["event"] == "fallback"]
    assert llm.refused == 1
    assert values["report_status"] == "final"


async def test_a_method_set_by_hand_that_the_server_refuses_falls_back_and_names_the_setting(
    llm: FakeLLM, settings_env: Path
) -> None:
    llm.quirks.refuses_json_schema = True
    llm.responder = ResearchModel()
    engine = engine_for(llm, models={"default": {"structured_output": "json_schema"}})
    with recording() as recorder:
        plan = await engine.plan("history of the printing press", [], None)
    assert plan.search_queries  # the extractive plan
    assert len(llm.calls) == 1  # refused once, not retried
    assert "structured_output" in recorder.fallbacks[0].reason


@pytest.mark.parametrize(
    ("call", "told"),
    [
        (ToolCall("PlanOutput", {"investigation_points": "not a list"}), "investigation_points"),
        (ToolCall("PlanOutput", '{"investigation_points": ["Orig'), "did not call"),
    ],
    ids=["arguments that do not fit", "arguments that are not JSON"],
)
async def test_a_forced_tool_call_that_cannot_be_read_gets_its_repair_round(
    llm: FakeLLM, settings_env: Path, call: ToolCall, told: str
) -> None:
    llm.script(Reply(tool_calls=[call]), Reply.json(GOOD_PLAN))
    engine = engine_for(llm, models={"default": {"structured_output": "function_calling"}})
    with recording() as recorder:
        plan = await engine.plan("history of the printing press", [], None)
    assert plan.search_queries == ["printing press history"]
    assert structured_kinds(llm) == ["tool", "tool"]
    assert "could not be used" in llm.calls[1].user and told in llm.calls[1].user
    assert [r.step for r in recorder.repairs] == ["plan"] and recorder.fallbacks == []


async def test_a_model_that_never_calls_tools_still_closes_its_gaps_with_queries(
    llm: FakeLLM, settings_env: Path, graph: ResearchGraph, corpus: LocalCorpus
) -> None:
    script = ResearchModel(actions=[])  # concludes at once, as SmolLM2 does

    def responder(call: Call) -> Reply:
        if call.schema_name == "GapsOutput":
            return Reply.json({"gaps": ["the Bible"], "queries": ["Gutenberg Bible"]})
        return script(call)

    llm.responder = responder
    deps = Deps(engine=engine_for(llm), search=corpus)
    values, _ = await run(graph, deps, "llm-notools", start(min_sources=50, max_iterations=4))

    assert "Gutenberg Bible" in values["queries_done"]
    said = [m.content for m in values["messages"] if "does not call tools" in str(m.content)]
    assert said
    # After the first turn without a tool call, later steps ask for queries directly.
    assert script.seen.count("react") == 1


# -- token caps and time ---------------------------------------------------------------------


async def test_the_token_cap_reaches_a_server_that_reads_only_max_tokens(
    llm: FakeLLM, settings_env: Path
) -> None:
    llm.quirks.ignores_max_completion_tokens = True  # llama-cpp-python
    llm.responder = lambda call: Reply(content="word " * 400)
    engine = engine_for(llm, models={"default": {"max_tokens": 50}})
    text = await engine._complete("writer", [])
    assert len(text.split()) == 50
    body = llm.calls[0].body
    assert body["max_tokens"] == body["max_completion_tokens"] == 50
    # The summaries' own, smaller cap goes the same way.
    summary = await engine.summarize("printing press", [])
    assert llm.calls[1].body["max_tokens"] <= 512 and len(summary.split()) <= 512


async def test_a_stream_that_trickles_on_is_cut_at_the_role_timeout(
    llm: FakeLLM, settings_env: Path
) -> None:
    engine = engine_for(llm, models={"default": {"max_retries": 0}})
    # A long answer the client's per-read timeout never trips: each chunk comes in time.
    engine._configs["writer"] = engine._configs["writer"].model_copy(update={"timeout_seconds": 1})
    llm.responder = lambda call: Reply(content="slow " * 200, chunk_delay_s=0.05)
    with recording() as recorder:
        report = await engine.write(PLAN_FOR_WRITE, [], None, None)
    assert recorder.fallbacks and "no answer within 1 s" in recorder.fallbacks[0].reason
    assert report.startswith("#")  # the extractive writer's draft


# -- usage -----------------------------------------------------------------------------------


async def test_a_stream_without_usage_is_estimated_and_marked_so(
    llm: FakeLLM, settings_env: Path, graph: ResearchGraph, corpus: LocalCorpus
) -> None:
    llm.quirks.no_stream_usage = True
    llm.responder = ResearchModel()
    deps = Deps(engine=engine_for(llm), search=corpus)
    values, _ = await run(graph, deps, "llm-nousage", start(min_sources=2))

    writer = values["usage"].nodes["writer"]
    assert writer.completion_tokens > 0 and writer.estimated == writer.requests >= 1
    assert values["usage"].models["openai:gpt-4o-mini"].estimated == writer.estimated


async def test_a_cut_off_answer_counts_the_tokens_the_server_spent(
    llm: FakeLLM, settings_env: Path
) -> None:
    llm.script(
        Reply(content='{"investigation_points": ["Origins", "Spread', finish="length"),
        Reply.json(GOOD_PLAN),
    )
    engine = engine_for(llm)
    with recording() as recorder:
        plan = await engine.plan("history of the printing press", [], None)
    assert plan.search_queries == ["printing press history"]
    assert sum(c.input_tokens for c in recorder.calls) == llm.reported_prompt_tokens
    assert sum(c.output_tokens for c in recorder.calls) == llm.reported_completion_tokens
    assert "token limit" in llm.calls[1].user


async def test_node_and_model_request_counts_agree_after_a_repair_round(
    llm: FakeLLM, settings_env: Path, graph: ResearchGraph, corpus: LocalCorpus
) -> None:
    script = ResearchModel()
    llm.script(Reply(content="not json"))  # the plan needs its repair round
    llm.responder = script
    deps = Deps(engine=engine_for(llm), search=corpus)
    values, events = await run(graph, deps, "llm-counts", start(min_sources=2))
    repairs = [e for e in events if e["event"] == "repair"]
    assert [e["step"] for e in repairs] == ["plan"] and "no JSON" in repairs[0]["error"]

    usage = values["usage"]
    model = usage.models["openai:gpt-4o-mini"]
    assert sum(n.requests for n in usage.nodes.values()) == model.requests == len(llm.calls)
    assert usage.nodes["supervisor"].requests >= 2  # the plan and its repair round
    assert model.calls == model.requests  # nothing was retried
    assert model.calls > 0


# -- junk that fits the schema ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("junk", "told"),
    [
        ({**GOOD_PLAN, "search_queries": []}, "at least 1 item"),
        ({**GOOD_PLAN, "investigation_points": ["iin-plan_text"]}, "field name"),
        ({**GOOD_PLAN, "search_queries": [PLAN_SYSTEM.splitlines()[3][:80]]}, "copies"),
        ({**GOOD_PLAN, "search_queries": ["weather tomorrow"]}, "names the topic"),
    ],
    ids=["no queries", "placeholder point", "prompt echo", "off the topic"],
)
async def test_a_plan_without_substance_is_repaired_then_falls_back(
    llm: FakeLLM, settings_env: Path, junk: dict[str, Any], told: str
) -> None:
    llm.script(Reply.json(junk), Reply.json(junk))
    engine = engine_for(llm)
    with recording() as recorder:
        plan = await engine.plan("history of the printing press", [], None)
    assert told in llm.calls[1].user  # the repair round says what is wrong
    assert [f.step for f in recorder.fallbacks] == ["plan"]
    assert plan.search_queries and all(
        re.search(r"print|press", q, re.IGNORECASE) for q in plan.search_queries[:1]
    )


async def test_a_point_that_copies_a_shown_source_is_repaired(
    llm: FakeLLM, settings_env: Path
) -> None:
    probe = [
        SearchResult(
            title="Great Rift Valley",
            url="https://example.org/rift",
            content="The Great Rift Valley is a series of contiguous geographic depressions, "
            "approximately 6,500 kilometres in total length.",
        )
    ]
    copied = {**GOOD_PLAN, "investigation_points": [probe[0].content]}
    llm.script(Reply.json(copied), Reply.json(GOOD_PLAN))
    with recording() as recorder:
        plan = await engine_for(llm).plan("history of the printing press", probe, None)
    assert "copies a source's text" in llm.calls[1].user
    assert plan.investigation_points == GOOD_PLAN["investigation_points"]
    assert recorder.fallbacks == []


async def test_a_plan_the_repair_round_fixes_is_used(llm: FakeLLM, settings_env: Path) -> None:
    llm.script(Reply.json({**GOOD_PLAN, "search_queries": []}), Reply.json(GOOD_PLAN))
    with recording() as recorder:
        plan = await engine_for(llm).plan("history of the printing press", [], None)
    assert plan.search_queries == ["printing press history"] and recorder.fallbacks == []


async def test_scores_outside_zero_to_one_are_repaired(llm: FakeLLM, settings_env: Path) -> None:
    scores = {"fact_check": 54, "completeness": 2.0, "logic": 263, "format": 0.9}
    review = {"scores": scores, "feedback": "ok", "suggested_action": "write", "issues": []}
    fixed = {**review, "scores": dict.fromkeys(scores, 0.9)}
    llm.script(Reply.json(review), Reply.json(fixed))
    engine = engine_for(llm)
    with recording() as recorder:
        verdict = await engine.review("# Report\n\nText.", PLAN_FOR_WRITE, [])
    assert "less than or equal to 1" in llm.calls[1].user
    assert recorder.fallbacks == [] and verdict.scores.completeness == 0.9


async def test_a_run_whose_model_plans_nothing_still_researches_and_cites(
    llm: FakeLLM, settings_env: Path, graph: ResearchGraph, corpus: LocalCorpus
) -> None:
    llm.responder = ResearchModel(queries=[])
    deps = Deps(engine=engine_for(llm), search=corpus)
    values, _ = await run(graph, deps, "llm-none", start())

    assert values["research_data"] and values["queries_done"]
    front, body = split_front_matter(values["final_report"])
    assert "[^1]" in body
    fell_back = [m.content for m in values["messages"] if "Fell back" in str(m.content)]
    assert any("for plan:" in text for text in fell_back)


async def test_a_draft_that_cites_nothing_is_written_by_the_extractive_writer_instead(
    llm: FakeLLM, settings_env: Path, graph: ResearchGraph, corpus: LocalCorpus
) -> None:
    llm.responder = ResearchModel(cites=False)
    deps = Deps(engine=engine_for(llm), search=corpus)
    values, events = await run(graph, deps, "llm-uncited", start(min_sources=2))

    assert any(
        e["event"] == "fallback" and e["step"] == "write" and "cites none" in e["reason"]
        for e in events
    )
    _, body = split_front_matter(values["final_report"])
    assert "[^1]" in body and values["review"].citations.cited_claims > 0


async def test_a_model_call_ends_with_the_runs_time_budget_and_the_step_falls_back(
    llm: FakeLLM, settings_env: Path, graph: ResearchGraph, corpus: LocalCorpus
) -> None:
    script = ResearchModel()

    def responder(call: Call) -> Reply:
        reply = script(call)
        if "Writer of professional" in call.system:  # a 20 s trickle, each chunk in time
            return Reply(content=reply.content, chunk_delay_s=0.1)
        return reply

    llm.responder = responder
    deps = Deps(engine=engine_for(llm), search=corpus)
    values, events = await run(graph, deps, "llm-budget-s", start(min_sources=2, time_budget_s=5))

    # What the run did, for a failure's message: a draft written without sources is short
    # enough to stream inside the budget, which is not the case under test.
    steps = [(e["event"], e.get("step"), e.get("reason"), e.get("chars")) for e in events]
    assert len(values["research_data"]) >= 2, steps
    fell_back = [e for e in events if e["event"] == "fallback" and e["step"] == "write"]
    assert fell_back and "time budget is spent" in fell_back[0]["reason"], steps
    assert values["usage"].seconds < 15  # the stream alone would take 20 s
    # The extractive writer drafted instead, from the same sources.
    assert "[^1]" in split_front_matter(values["final_report"])[1]
