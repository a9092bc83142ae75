"""What the LLM engine adds to one model call, beyond the HTTP round trip.

A fake OpenAI-compatible server (tests/fake_llm.py, answering with the scripted research
model of tests/llm_script.py) replies at once from a background thread of this process.
For each call kind (summarize: plain; plan: structured output; write: streamed to an
on_token callback; review: structured output plus the citation checks on a realistic
draft, 10 sources of ~1,200 chars) four variants are timed, interleaved round by round
(order rotated each round), against the same server, after a warm-up:

- http: a bare `httpx.AsyncClient` POSTs the exact JSON body the engine sent (captured
  once) to /v1/chat/completions and reads the whole body (or SSE stream) as bytes, nothing
  parsed: the HTTP round trip plus the fake server's own time;
- sdk: the same request through `openai.AsyncOpenAI` as ChatOpenAI makes it (`create`,
  iterating the stream; `parse` with the pydantic schema for structured output): what the
  OpenAI SDK adds (request transform, strict schema, response and chunk models);
- langchain: the same ChatOpenAI models the engine uses, called directly on prebuilt
  messages (`ainvoke`, the engine's prebuilt structured-output binding, or `astream` feeding
  the callback): what LangChain adds on top of the SDK;
- engine: the `LLMEngine` method inside `recording()`, as a node calls it: what we add
  (prompt building, the retry wrapper, usage recording, the merging of streamed chunks, and for review the citation checks).

Overhead = engine p50 - http p50, split into the SDK's, LangChain's and our share by the
differences of the p50s. Client CPU is `time.thread_time()` of the client's thread (the
server thread's CPU is not in it). A last table times our own pieces without any I/O.
Target (the issue): < 5 ms per call beyond the HTTP round trip. Figures only.

    python bench/llm_overhead.py [--n 200] [--warm-up 20] [--quick] [--one-cpu]
                                  [--close-connections]
"""

import argparse
import asyncio
import json
import math
import os
import random
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import openai
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    SystemMessage,
)
from pydantic import BaseModel
from starlette.applications import Starlette
from starlette.routing import Route

from app.composition import llm_engine
from app.settings import CONFIG_ENV, Settings
from core.models import ResearchPlan, SearchResult
from engines import structured
from engines.checks import check_draft
from engines.llm import LLMEngine, chat_model
from engines.llm_config import Role
from engines.recording import recording
from prompts import planner, researcher, reviewer, writer

# `python bench/llm_overhead.py` puts bench/ first on sys.path, not the repository root, and
# `tests` is not an installed package (only app, engines, graph, ... are): put the root on the
# path to reuse the fake chat server and the scripted research model the tests use.
ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.stats import percentile  # noqa: E402
from tests.fake_llm import FakeLLM, fake_llm_app  # noqa: E402
from tests.llm_script import ResearchModel  # noqa: E402
from tests.servers import serve  # noqa: E402

KEY = "sk-bench-0123456789"
VARIANTS = ("http", "sdk", "langchain", "engine")
TARGET_MS = 5.0
QUICK_N, QUICK_WARM_UP = 20, 3
TOPIC = "The spread of the printing press in Europe"
POINTS = ["Origins", "Spread across Europe"]  # the headings the scripted writer uses
SOURCE_CHARS = 1_200

# -- realistic sources ------------------------------------------------------------------

PEOPLE = [
    "Johannes Gutenberg",
    "William Caxton",
    "Aldus Manutius",
    "Nicolas Jenson",
    "Anton Koberger",
    "Peter Schoeffer",
    "Johann Fust",
    "Erhard Ratdolt",
    "Wynkyn de Worde",
    "Christophe Plantin",
]
CITIES = [
    "Mainz",
    "Venice",
    "Strasbourg",
    "Cologne",
    "Basel",
    "Nuremberg",
    "Paris",
    "Bruges",
    "London",
    "Antwerp",
    "Lyon",
    "Rome",
]
THINGS = [
    "movable metal type",
    "the screw press",
    "oil-based ink",
    "the hand mould",
    "rag paper",
    "woodcut illustration",
    "italic type",
    "the octavo format",
    "printed indulgences",
    "vernacular bibles",
]
SENTENCES = [
    "{person} set up a workshop in {city} around {year}, where {thing} was first used at scale.",
    "By {year}, presses in {city} had printed more than {count} editions, most of them in Latin.",
    "Historians estimate that {thing} cut the cost of a book in {city} by about {pct} percent within a generation.",
    "The guild records of {city} mention {person} in {year} as a master of {thing}.",
    "Merchants carried books printed in {city} along the river trade to {city2}, which had no press before {year}.",
    "Scholars still debate whether {thing} reached {city} before or after {year}.",
    "In {year} the council of {city} granted {person} a privilege that protected {thing} for {small} years.",
    "Surviving inventories from {city} list {count} copies of works printed with {thing}.",
    "{person} trained apprentices who later opened their own shops in {city} and {city2}.",
    "The spread of {thing} changed how the university of {city} taught grammar and law.",
    "A fire in {year} destroyed much of the stock that {person} kept in {city}.",
    "Letters from {year} show that {person} bought paper from mills near {city2}.",
]


def sources(count: int, seed: int) -> list[SearchResult]:
    """Search results with ~1,200 chars of varied, citable prose each (deterministic)."""
    rng = random.Random(seed)
    results = []
    for i in range(count):
        thing, city = THINGS[i % len(THINGS)], CITIES[(i * 5 + seed) % len(CITIES)]
        text: list[str] = []
        while sum(len(s) + 1 for s in text) < SOURCE_CHARS:
            sentence = rng.choice(SENTENCES).format(
                person=rng.choice(PEOPLE),
                city=city if not text else rng.choice(CITIES),
                city2=rng.choice(CITIES),
                thing=thing if not text else rng.choice(THINGS),
                year=rng.randint(1440, 1560),
                count=rng.randint(20, 4000),
                pct=rng.randint(10, 80),
                small=rng.randint(2, 20),
            )
            text.append(sentence[0].upper() + sentence[1:])
        slug = f"{thing.replace(' ', '-')}-{city.lower()}"
        results.append(
            SearchResult(
                title=f"{thing[0].upper()}{thing[1:]} in {city}",
                url=f"https://history.example.org/{slug}/{seed}-{i}",
                content=" ".join(text),
                source="web",
                published_date=f"20{10 + i % 15}-0{1 + i % 9}-15",
                relevance_score=round(1 - i / (count + 1), 3),
                query=TOPIC,
            )
        )
    return results


# -- figures ------------------------------------------------------------------------------


@dataclass
class Samples:
    """One variant's timings for one kind, in seconds."""

    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)  # the client thread's CPU


Call = Callable[[], Awaitable[None]]


@dataclass
class Kind:
    """One engine method and the three baselines of the same exchange."""

    name: str
    calls: dict[str, Call]
    samples: dict[str, Samples] = field(default_factory=dict)
    errors: Counter[str] = field(default_factory=Counter)
    request_bytes: int = 0
    response_bytes: int = 0
    stream_events: int = 0


async def timed(call: Call) -> tuple[float, float]:
    """(wall, client-thread CPU) seconds of one call."""
    cpu, start = time.thread_time(), time.perf_counter()
    await call()
    return time.perf_counter() - start, time.thread_time() - cpu


# -- the four variants ----------------------------------------------------------------------


class Bench:
    """The engine, the bare models and the bare HTTP client, all against one fake server."""

    def __init__(self, fake: FakeLLM, model: ResearchModel, client: httpx.AsyncClient) -> None:
        self.fake = fake
        self.research_model = model
        self.client = client
        self.sdk = openai.AsyncOpenAI(base_url=fake.base_url, api_key=KEY, max_retries=0)
        settings = Settings(llm_base_url=fake.base_url, llm_api_key=KEY)
        self.engine: LLMEngine = llm_engine(settings)
        self.model: dict[Role, BaseChatModel] = {
            role: chat_model(settings.models.for_role(role), settings.llm_base_url, KEY)
            for role in ("planner", "researcher", "writer", "reviewer")
        }
        self.tokens: list[str] = []
        self.alternatives: dict[str, float] = {}  # cheaper ways to do a piece, for the notes
        self.plan = ResearchPlan(
            theme=TOPIC,
            investigation_points=POINTS,
            search_queries=["printing press origins", "printing spread Europe"],
            plan_text="Search the origins, then the spread.",
        )
        self.few = sources(5, seed=1)  # one query's results / the planner's probe
        self.many = sources(10, seed=2)  # what the writer and the reviewer see
        self.draft = ResearchModel().report(writer.message(self.plan, self.many, None, None))

    def on_token(self, text: str) -> None:
        """The writer's callback: keep the text, as the node's batcher does."""
        self.tokens.append(text)

    async def engine_call(self, call: Callable[[], Awaitable[object]]) -> None:
        """One engine call as a node makes it; a fallback or a retry counts as an error."""
        with recording() as recorder:  # as a node does around its engine calls
            await call()
        if recorder.fallbacks or len(recorder.calls) != 1:
            raise RuntimeError(f"fallbacks {recorder.fallbacks}, {len(recorder.calls)} calls")

    async def capture(self, call: Call) -> dict[str, Any]:
        """The JSON body the engine sent for one call (for the http baseline to replay)."""
        self.fake.calls.clear()
        await call()
        return self.fake.calls[-1].body

    def post(self, body: dict[str, Any], kind: Kind) -> Call:
        """The http variant of a plain or structured call."""

        async def call() -> None:
            response = await self.client.post("/chat/completions", json=body)
            if response.status_code != 200:
                raise RuntimeError(f"HTTP {response.status_code}")
            kind.response_bytes = len(response.content)

        return call

    def post_stream(self, body: dict[str, Any], kind: Kind) -> Call:
        """The http variant of a streamed call: the whole SSE stream, as bytes."""

        async def call() -> None:
            size = events = 0
            async with self.client.stream("POST", "/chat/completions", json=body) as response:
                if response.status_code != 200:
                    raise RuntimeError(f"HTTP {response.status_code}")
                async for data in response.aiter_raw():
                    size += len(data)
                    events += data.count(b"\n\n")  # JSON escapes its newlines: one per event
            kind.response_bytes, kind.stream_events = size, events

        return call

    def create(self, body: dict[str, Any], schema: type[BaseModel] | None) -> Call:
        """The sdk variant: the same request through the OpenAI SDK, as ChatOpenAI makes it.

        ChatOpenAI asks for a pydantic schema with `chat.completions.parse` (which builds the
        strict JSON schema and parses the answer into the model), the rest with `create`.
        """
        completions = self.sdk.chat.completions
        if schema is not None:
            # `parse` never streams and takes the schema itself; the rest of the body as is.
            params = {k: v for k, v in body.items() if k not in ("response_format", "stream")}

            async def parse() -> None:
                answer = await completions.parse(**params, response_format=schema)
                if answer.choices[0].message.parsed is None:
                    raise RuntimeError("the SDK parsed nothing")

            return parse

        async def call() -> None:
            answer = await completions.create(**body)
            if isinstance(answer, openai.AsyncStream):
                async for _ in answer:
                    pass

        return call

    def clear(self) -> None:
        """Drop what the fake, the scripted model and the callback keep of every call."""
        self.fake.calls.clear()
        self.research_model.seen.clear()
        self.tokens.clear()

    async def kinds(self) -> list[Kind]:
        """The four call kinds, with the body each engine call sends captured once."""
        e = self.engine
        plan, few, many, draft = self.plan, self.few, self.many, self.draft
        summarizer = self.model["researcher"].bind(max_tokens=researcher.SUMMARY_TOKENS)
        # As the engine asks (structured.bind: response_format json_schema) and reads.
        planner_out = structured.bind(self.model["planner"], planner.PlanOutput, "json_schema")
        reviewer_out = structured.bind(self.model["reviewer"], reviewer.ReviewOutput, "json_schema")
        summary_messages = messages(
            researcher.SUMMARY_SYSTEM, researcher.summary_message(TOPIC, few)
        )
        plan_messages = messages(planner.PLAN_SYSTEM, planner.plan_message(TOPIC, few, None))
        write_messages = messages(writer.SYSTEM, writer.message(plan, many, None, None))
        review_messages = messages(reviewer.SYSTEM, reviewer.message(draft, plan, many))
        writer_model = self.model["writer"]

        async def bare_summarize() -> None:
            await summarizer.ainvoke(summary_messages)

        async def bare_plan() -> None:
            answer = await planner_out.ainvoke(plan_messages)
            structured.read(answer, planner.PlanOutput, "json_schema")

        async def bare_write() -> None:
            async for chunk in writer_model.astream(write_messages):
                if chunk.text:
                    self.on_token(chunk.text)

        async def bare_review() -> None:
            answer = await reviewer_out.ainvoke(review_messages)
            structured.read(answer, reviewer.ReviewOutput, "json_schema")

        engine_calls: dict[str, Call] = {
            "summarize": lambda: self.engine_call(lambda: e.summarize(TOPIC, few)),
            "plan": lambda: self.engine_call(lambda: e.plan(TOPIC, few, None)),
            "write": lambda: self.engine_call(
                lambda: e.write(plan, many, None, None, self.on_token)
            ),
            "review": lambda: self.engine_call(lambda: e.review(draft, plan, many)),
        }
        bare: dict[str, Call] = {
            "summarize": bare_summarize,
            "plan": bare_plan,
            "write": bare_write,
            "review": bare_review,
        }
        schemas: dict[str, type[BaseModel]] = {
            "plan": planner.PlanOutput,
            "review": reviewer.ReviewOutput,
        }
        kinds = []
        for name, engine_call in engine_calls.items():
            body = await self.capture(engine_call)
            kind = Kind(name, {})
            kind.request_bytes = len(json.dumps(body).encode())
            http = self.post_stream(body, kind) if body.get("stream") else self.post(body, kind)
            sdk = self.create(body, schemas.get(name))
            kind.calls = {"http": http, "sdk": sdk, "langchain": bare[name], "engine": engine_call}
            kind.samples = {v: Samples() for v in VARIANTS}
            kinds.append(kind)
        return kinds


def messages(system: str, user: str) -> list[BaseMessage]:
    return [SystemMessage(content=system), HumanMessage(user)]


async def same_requests(kinds: list[Kind], bench: Bench) -> list[str]:
    """The variants whose request body differs from the engine's (none, if the bench is fair)."""
    differ = []
    for kind in kinds:
        bodies = {}
        for variant in VARIANTS:
            bench.fake.calls.clear()
            await kind.calls[variant]()
            bodies[variant] = bench.fake.calls[-1].body
        differ += [f"{kind.name}/{v}" for v in VARIANTS if bodies[v] != bodies["engine"]]
    bench.clear()
    return differ


async def measure(kinds: list[Kind], bench: Bench, n: int, warm_up: int) -> None:
    """Round after round, every kind and every variant once (rotated order); warm-up uncounted."""
    for round_no in range(warm_up + n):
        shift = round_no % len(VARIANTS)
        order = VARIANTS[shift:] + VARIANTS[:shift]
        for kind in kinds:
            for variant in order:
                try:
                    wall, cpu = await timed(kind.calls[variant])
                except Exception as exc:  # a bench counts failures, it never raises
                    kind.errors[f"{variant}: {type(exc).__name__}: {str(exc)[:80]}"] += 1
                    continue
                if round_no >= warm_up:
                    kind.samples[variant].wall.append(wall)
                    kind.samples[variant].cpu.append(cpu)
        bench.clear()  # the fake keeps every request; a long run would hold them all


# -- our own pieces, without I/O ---------------------------------------------------------------


def micro(repeat: int, fn: Callable[[], object]) -> float:
    """p50 seconds of `fn` over `repeat` calls (after one uncounted call)."""
    fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return percentile(times, 50)


async def amicro(repeat: int, fn: Callable[[], Awaitable[object]]) -> float:
    """p50 seconds of awaiting `fn()` over `repeat` calls (after one uncounted call)."""
    await fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        await fn()
        times.append(time.perf_counter() - start)
    return percentile(times, 50)


async def pieces(bench: Bench, repeat: int) -> dict[str, dict[str, float]]:
    """p50 seconds of each piece of our code a call kind runs (no network)."""
    plan, few, many, draft = bench.plan, bench.few, bench.many, bench.draft
    chunks: list[AIMessageChunk] = [
        c
        async for c in bench.model["writer"].astream(
            messages(writer.SYSTEM, writer.message(plan, many, None, None))
        )
    ]

    def merge() -> AIMessage:  # what LLMEngine._stream does with the chunks: one n-ary add
        whole = chunks[0] + chunks[1:]
        return AIMessage(content=whole.content, usage_metadata=whole.usage_metadata)

    async def instant() -> tuple[str, AIMessage]:
        return "", AIMessage(content="")

    async def retry_and_record() -> None:
        with recording():
            # The engine's private wrapper: tenacity's retry loop plus usage recording.
            await bench.engine._ask("writer", instant)

    wrap = await amicro(repeat, retry_and_record)
    return {
        "summarize": {
            "prompt": micro(
                repeat,
                lambda: messages(researcher.SUMMARY_SYSTEM, researcher.summary_message(TOPIC, few)),
            ),
            "retry+record": wrap,
        },
        "plan": {
            "prompt": micro(
                repeat,
                lambda: messages(planner.PLAN_SYSTEM, planner.plan_message(TOPIC, few, None)),
            ),
            "retry+record": wrap,
        },
        "write": {
            "prompt": micro(
                repeat, lambda: messages(writer.SYSTEM, writer.message(plan, many, None, None))
            ),
            "retry+record": wrap,
            f"merge {len(chunks)} chunks": micro(repeat, merge),
        },
        "review": {
            "prompt": micro(
                repeat, lambda: messages(reviewer.SYSTEM, reviewer.message(draft, plan, many))
            ),
            "retry+record": wrap,
            "check_draft": micro(repeat, lambda: check_draft(draft, plan, many)),
        },
    }


# -- report ------------------------------------------------------------------------------------


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f}" if not math.isnan(seconds) else "-"


def ms3(seconds: float) -> str:
    return f"{seconds * 1000:.3f}" if not math.isnan(seconds) else "-"


def report(kinds: list[Kind], bench: Bench, split: dict[str, dict[str, float]]) -> None:
    def p(kind: Kind, variant: str, q: float, cpu: bool = False) -> float:
        samples = kind.samples[variant]
        return percentile(samples.cpu if cpu else samples.wall, q)

    print()
    print("wall ms per call, p50 / p90")
    print(
        f"{'kind':<10} {'req KB':>6} {'resp KB':>7} "
        + " ".join(f"{v + ' p50':>14} {'p90':>6}" for v in VARIANTS)
    )
    for kind in kinds:
        cells = " ".join(f"{ms(p(kind, v, 50)):>14} {ms(p(kind, v, 90)):>6}" for v in VARIANTS)
        print(
            f"{kind.name:<10} {kind.request_bytes / 1024:>6.1f} "
            f"{kind.response_bytes / 1024:>7.1f} {cells}"
        )
    print()
    print(
        "overhead = engine p50 - http p50, split by p50 differences: "
        "sdk - http, langchain - sdk, engine - langchain (ours)"
    )
    print(
        f"{'kind':<10} {'overhead':>8} {'openai sdk':>10} {'langchain':>9} {'ours':>6}  "
        f"target < {TARGET_MS:.0f} ms"
    )
    for kind in kinds:
        http, sdk, lc, eng = (p(kind, v, 50) for v in VARIANTS)
        over = eng - http
        verdict = "met" if over * 1000 < TARGET_MS else "NOT MET"
        print(
            f"{kind.name:<10} {ms(over):>8} {ms(sdk - http):>10} {ms(lc - sdk):>9} "
            f"{ms(eng - lc):>6}  {verdict}"
        )
    for kind in kinds:
        if kind.stream_events:
            http, sdk, lc, eng = (p(kind, v, 50) / kind.stream_events for v in VARIANTS)
            print(
                f"{kind.name:<10} per SSE event ({kind.stream_events} events): overhead "
                f"{ms3(eng - http)}, openai sdk {ms3(sdk - http)}, langchain {ms3(lc - sdk)}, "
                f"ours {ms3(eng - lc)}"
            )
    print()
    print("client-thread CPU ms per call, p50 (the server thread's CPU is not counted)")
    print(f"{'kind':<10} " + " ".join(f"{v:>9}" for v in VARIANTS) + f" {'engine-http':>11}")
    for kind in kinds:
        cpu = [p(kind, v, 50, cpu=True) for v in VARIANTS]
        cells = " ".join(f"{ms(c):>9}" for c in cpu)
        print(f"{kind.name:<10} {cells} {ms(cpu[-1] - cpu[0]):>11}")
    print()
    print("our pieces without I/O, p50 ms")
    for name, parts in split.items():
        listed = ", ".join(f"{part} {ms(seconds)}" for part, seconds in parts.items())
        print(f"{name:<10} {listed}; sum {ms(sum(parts.values()))}")
    for what, seconds in bench.alternatives.items():
        print(f"{'':<10} ({what}: {ms(seconds)})")
    for kind in kinds:
        for error, count in kind.errors.items():
            print(f"errors {kind.name}: {count} x {error}")


def keep_alive_app(fake: FakeLLM) -> Starlette:
    """The fake's route without its `Connection: close` middleware (no loop is ever closed here)."""
    return Starlette(
        routes=[Route("/v1/chat/completions", fake.chat_completions, methods=["POST"])]
    )


async def main(n: int, warm_up: int, close_connections: bool) -> None:
    fake = FakeLLM()
    model = ResearchModel()
    fake.responder = model
    app = fake_llm_app(fake) if close_connections else keep_alive_app(fake)
    with serve(app) as url:
        fake.base_url = f"{url}/v1"
        async with httpx.AsyncClient(
            base_url=fake.base_url, headers={"Authorization": f"Bearer {KEY}"}, timeout=60.0
        ) as client:
            bench = Bench(fake, model, client)
            kinds = await bench.kinds()
            connections = "a new connection per call" if close_connections else "keep-alive"
            allowed = len(os.sched_getaffinity(0))
            cpus = f"{allowed} of {os.cpu_count()}" if allowed != os.cpu_count() else allowed
            print(
                f"fake OpenAI server: uvicorn (h11, asyncio) in a thread of this process "
                f"({connections}); it shares the CPUs ({cpus}) and the GIL with "
                "the client"
            )
            if allowed > 1:
                print(
                    "  (GIL hand-offs between the two threads on different CPUs make the "
                    "streamed figures vary from one process to the next; --one-cpu steadies them)"
                )
            print(
                f"N={n} per kind and variant after {warm_up} warm-up rounds, interleaved, order "
                "rotated per round; sources: 5 for summarize/plan, 10 x ~1,200 chars for write/review"
            )
            differ = await same_requests(kinds, bench)
            print(
                "request bodies (as JSON) of the 4 variants: "
                + (f"DIFFER for {', '.join(differ)}" if differ else "identical for every kind")
            )
            started = time.perf_counter()
            await measure(kinds, bench, n, warm_up)
            elapsed = time.perf_counter() - started
            split = await pieces(bench, max(n, 20))
            await bench.sdk.close()
    report(kinds, bench, split)
    print(f"\nmeasured in {elapsed:.1f} s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=200, help="timed calls per kind and variant")
    parser.add_argument("--warm-up", type=int, default=20, help="uncounted rounds first")
    parser.add_argument("--quick", action="store_true", help=f"a smoke run: N={QUICK_N}")
    parser.add_argument(
        "--close-connections",
        action="store_true",
        help="serve the fake as the tests do, closing every connection (default: keep-alive)",
    )
    parser.add_argument(
        "--one-cpu",
        action="store_true",
        help="pin the process (client and server threads) to one CPU: steadier figures",
    )
    args = parser.parse_args()
    if args.n < 1 or args.warm_up < 0:
        parser.error("--n must be at least 1 and --warm-up at least 0")
    n, warm_up = (QUICK_N, QUICK_WARM_UP) if args.quick else (args.n, args.warm_up)
    if args.one_cpu:  # before any thread starts: the server's and asyncio's threads inherit it
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    # Only the defaults and the arguments above: no user config file, no RESEARCH_* variables.
    for name in [k for k in os.environ if k.startswith("RESEARCH_")]:
        del os.environ[name]
    with tempfile.TemporaryDirectory(prefix="bench-llm-") as tmp:
        os.environ[CONFIG_ENV] = str(Path(tmp) / "none.toml")  # does not exist: defaults
        asyncio.run(main(n, warm_up, args.close_connections))
