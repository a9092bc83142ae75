"""Retrieval comes first: the topic's own keyword query leads every plan and is searched wide."""

import hashlib

import pytest

from core.models import ResearchPlan
from core.urls import normalize_url
from engines.extractive import ExtractiveEngine
from graph.builder import ResearchGraph
from nodes.context import Deps
from nodes.searching import WIDE_RESULTS
from nodes.supervisor import led_by_topic
from tools.local_corpus import LocalCorpus
from tools.text import keyword_query, topic_parts

from .support import run_graph, start

# One subject, worded as people ask: a bare phrase, questions, a comparison, keywords.
PHRASINGS = [
    "the printing press",
    "Who invented the printing press, and why did it matter?",
    "printing press versus woodblock printing",
    "tell me about gutenberg and movable type",
    "printing press history europe",
]


@pytest.mark.parametrize("topic", PHRASINGS)
async def test_the_pool_holds_what_the_topics_own_keyword_query_finds(
    graph: ResearchGraph, corpus: LocalCorpus, topic: str
) -> None:
    deps = Deps(engine=ExtractiveEngine(), search=corpus)
    thread = "t-" + hashlib.sha256(topic.encode()).hexdigest()[:12]
    values = await run_graph(graph, deps, thread, start(topic))
    assert values["task_plan"].search_queries[0] == keyword_query(topic)
    floor = {normalize_url(h.url) for h in await corpus.search(keyword_query(topic), WIDE_RESULTS)}
    pool = {normalize_url(s.url) for s in values["research_data"]}
    assert floor, "the keyword query finds something in the fixture corpus"
    assert floor <= pool, f"missing from the pool: {sorted(floor - pool)}"


def test_a_plan_is_led_by_the_topics_words_and_keeps_its_own_queries() -> None:
    plan = ResearchPlan(
        theme="Steam",
        investigation_points=["How it works"],
        search_queries=["steam engine history", "Steam engines matter", "James Watt"],
        plan_text="",
    )
    led = led_by_topic(plan, "Why did steam engines matter?")
    assert led.search_queries == ["steam engines matter", "steam engine history", "James Watt"]
    assert led_by_topic(plan.model_copy(update={"search_queries": []}), "x y").search_queries == []


@pytest.mark.parametrize(
    ("topic", "query"),
    [
        ("tell me everything about the Roman Colosseum", "Roman Colosseum"),
        ("I want to learn about volcanoes", "volcanoes"),
        ("can you explain how vaccines work?", "vaccines work"),
        ("explain photosynthesis to a child", "photosynthesis"),
        ("write a report on climate change", "climate change"),
        ("research methods in psychology", "research methods psychology"),  # a noun
        ("a beginner's guide to astronomy", "astronomy"),
        ("A short introduction to quantum mechanics", "quantum mechanics"),
        ("The Hitchhiker's Guide to the Galaxy", "Hitchhiker's Guide Galaxy"),  # a name
        # What a keyword topic calls the report it asks for.
        ("volcano facts for kids", "volcano"),
        ("jazz 101", "jazz"),
        ("the Renaissance explained", "Renaissance"),
        ("a list of Greek philosophers", "Greek philosophers"),
        ("timeline of the Cold War", "Cold War"),
    ],
)
def test_a_request_around_the_topic_is_not_searched(topic: str, query: str) -> None:
    assert keyword_query(topic) == query


@pytest.mark.parametrize(
    ("topic", "parts"),
    [
        ("the differences between capitalism and socialism", ["capitalism", "socialism"]),
        (
            "Where is Mount Everest, and who first reached its summit?",
            ["Mount Everest", "Mount Everest first reached summit"],  # "its": the mountain's
        ),
        ("what is DNA and who discovered its structure?", ["DNA", "DNA structure"]),
        ("chess versus go", ["chess", "go"]),
        ("the relationship between sleep and memory", ["sleep", "memory"]),  # not "relationship"
        ("pros and cons of nuclear power", []),  # one thing, asked two ways
        ("the great wall of china", []),
    ],
)
def test_each_thing_a_question_joins_is_searched_on_its_own_too(
    topic: str, parts: list[str]
) -> None:
    assert topic_parts(topic) == parts
    plan = ResearchPlan(theme=topic, investigation_points=["x"], search_queries=["x"], plan_text="")
    assert led_by_topic(plan, topic).search_queries == [keyword_query(topic), *parts, "x"]
