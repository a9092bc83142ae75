"""Member researchers: a research step's plan queries shared out to members working in parallel.

The research subgraph sends each member its share of the plan's pending queries (LangGraph
`Send`), and at most `Deps.max_parallel_members` of them work at once. A member runs its
queries with a searcher of its own and answers with an outcome per query and its record, a
`MemberSubmission`; a member that fails (every search down, the model refusing, the time
budget spent, or anything raised) is recorded as ERROR and the step goes on with the others.
The step then takes the answers in the plan's order, whatever order they finished in
(`merged`), so its notes, sources and events are those of one researcher running them all.
"""

import asyncio
import contextvars
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import replace
from itertools import chain, zip_longest
from typing import Any

from langgraph.runtime import Runtime
from langgraph.types import Send

from core.models import ResearchPlan, SearchResult
from core.urls import normalize_url
from core.usage import MemberSubmission, TokenUsage
from engines.recording import current_recorder
from nodes.context import Deps, MemberKind
from nodes.progress import tell
from nodes.reading import ReadPage, ReadPool, cancel_reads, describe
from nodes.research_collect import teller
from nodes.research_state import (
    MEMBER,
    MemberAssignment,
    MemberReport,
    QueryOutcome,
    ResearcherState,
)
from nodes.searching import Allowance, Searcher, step_deadline
from tools.text import keyword_query, stems


class PauseRequested(Exception):
    """A research step stopped for a pause once its members at work had finished."""


class Team:
    """What the members of one research step share: how many work at once, their page reads, a teller.

    The teller tells their findings in the plan's order, each query's as soon as every
    earlier query's is known, as one researcher running them all would (`Searcher`).
    """

    def __init__(
        self, limit: int, searches: int, kinds: int, told: Callable[[QueryOutcome], None]
    ) -> None:
        self.gate = asyncio.Semaphore(limit)
        # The searches they run at once between them: the step's `search_concurrency`.
        self.search_gate = asyncio.Semaphore(searches)
        self.pool: ReadPool = {}  # their page reads: a page is read once in the step
        self._kinds = kinds  # each query is run by one member of each kind
        self._parts: dict[int, dict[int, QueryOutcome]] = {}
        self._told = told
        self._waiting: dict[int, QueryOutcome] = {}
        self._next = 0
        self._working = 0  # members at work now
        self._idle = asyncio.Event()  # set while none is
        self._idle.set()
        self._pausing = False  # a pause was asked: no further member starts

    @asynccontextmanager
    async def turn(self, pause_asked: Callable[[], Awaitable[bool]] | None) -> AsyncIterator[None]:
        """Hold one of the step's places for a member's work; refuse it once a pause is asked.

        A member whose turn comes after the run was asked to pause does not start: once
        the members at work have finished (their answers kept with the step), it raises
        `PauseRequested`, and the execution that resumes the run starts it.
        """
        async with self.gate:
            self._pausing = self._pausing or (pause_asked is not None and await pause_asked())
            if not self._pausing:
                self._working += 1
                self._idle.clear()
                try:
                    yield
                finally:
                    self._working -= 1
                    if not self._working:
                        self._idle.set()
                return
        await self._idle.wait()
        raise PauseRequested("the run was asked to pause: this member starts when it resumes")

    def found(self, position: int, kind: int, outcome: QueryOutcome) -> None:
        """Take one kind's outcome of the plan's pending query at `position`.

        Once every kind's is in, the query's findings are theirs together (`combined`).
        """
        parts = self._parts.setdefault(position, {})
        parts[kind] = outcome
        if len(parts) == self._kinds:
            self._ready(position, combined([parts[k] for k in sorted(parts)]))

    def found_all(self, outcomes: Sequence[QueryOutcome]) -> None:
        """Take every query's findings, in the plan's order: tell those not told yet.

        A resumed step does not run again the members that had finished: their findings
        are told here.
        """
        for position, outcome in enumerate(outcomes):
            self._ready(position, outcome)

    def _ready(self, position: int, outcome: QueryOutcome) -> None:
        """Tell the findings of the query at `position` once every earlier query's are told."""
        if position < self._next:
            return
        self._waiting[position] = outcome
        while self._next in self._waiting:
            self._told(self._waiting.pop(self._next))
            self._next += 1


_team: contextvars.ContextVar[Team | None] = contextvars.ContextVar("member_team", default=None)


@contextmanager
def member_team(step: ResearcherState, runtime: Runtime[Deps]) -> Iterator[Team]:
    """Give the members of the step run inside the block their `Team`.

    Their findings are told as the research step's own (its task's events, in order),
    whichever member's task finds them.
    """
    here = contextvars.copy_context()
    told = teller(step, lambda event, lane: here.run(tell, runtime, event, lane))
    deps = runtime.context
    team = Team(deps.max_parallel_members, deps.search_concurrency, len(deps.kinds()), told)
    token = _team.set(team)
    try:
        yield team
    finally:
        _team.reset(token)
        cancel_reads(team.pool)  # reads nobody waits for any more


def current_team() -> Team:
    """Return the team of the research step running now."""
    team = _team.get()
    if team is None:
        raise RuntimeError("members run inside member_team() (the researcher step)")
    return team


def _by_point(points: Sequence[str], pending: Sequence[str]) -> list[list[int]] | None:
    """Return the positions of each point's queries; None if a query names no point.

    A query is a point's when it holds every word (stem) of the point. One that holds
    several points' goes to the one with the fewest queries so far (the first in the
    plan's order among equals), so that no member is left with most of the step.
    """
    words = [set(stems(point)) for point in points]
    groups: list[list[int]] = [[] for _ in points]
    for position, query in enumerate(pending):
        held = set(stems(query))
        owners = [i for i, point in enumerate(words) if point and point <= held]
        if not owners:
            return None
        groups[min(owners, key=lambda i: (len(groups[i]), i))].append(position)
    return groups


def _chunks(count: int, parts: int) -> list[list[int]]:
    """Return positions 0..count-1 in `parts` contiguous runs, the first ones longer by one."""
    size, extra = divmod(count, parts)
    runs: list[list[int]] = []
    start = 0
    for part in range(parts):
        end = start + size + (part < extra)
        runs.append(list(range(start, end)))
        start = end
    return runs


def member_shares(
    plan: ResearchPlan | None, pending: Sequence[str], kinds: Sequence[str] = ("member",)
) -> list[MemberAssignment]:
    """Return the members of a step and their shares of its pending plan queries.

    One member of each kind per investigation point: with the point's queries when every
    query can be given to a point, else with a contiguous run of the queries in the plan's
    order. Only the plan and the kinds decide, never `max_parallel_members` (how many work
    at once), so a run's members, and what each searches, are the same whatever the setting.
    """
    if plan is None or not pending:
        return []
    points = plan.investigation_points
    groups = _by_point(points, pending)
    shares: list[tuple[str | None, list[int]]] = (
        [(point, group) for point, group in zip(points, groups, strict=True) if group]
        if groups is not None
        else [(None, run) for run in _chunks(len(pending), min(len(points), len(pending)))]
    )
    members = [
        (number, kind, point, positions)
        for number, (point, positions) in enumerate(shares, start=1)
        for kind in kinds
    ]
    return [
        MemberAssignment(
            index=index,
            name=f"{kind}-{number}",
            kind=kind,
            of=len(members),
            point=point,
            queries=[pending[p] for p in positions],
            positions=positions,
        )
        for index, (number, kind, point, positions) in enumerate(members)
    ]


def member_sends(state: ResearcherState, shares: Sequence[MemberAssignment]) -> list[Send]:
    """Return the `Send` of each member: the step's inputs a member reads, and its share."""
    given = ("topic", "options", "research_data", "iteration_count", "tokens_left")
    inputs = {key: state[key] for key in given if key in state}  # type: ignore[literal-required]
    return [Send(MEMBER, {**inputs, "member": share}) for share in shares]


def _content(outcomes: Sequence[QueryOutcome]) -> str:
    """Return a member's answer as text: each query's summary (or what went wrong), in order."""
    return "\n\n".join(
        f"### {o.query}\n\n{o.summary or o.error or 'No results.'}" for o in outcomes
    )


def _problem(outcomes: Sequence[QueryOutcome], raised: str | None, spent: str | None) -> str | None:
    """Return why a member failed, None when it did not: why the step cannot use its work."""
    if raised is not None:
        return raised
    if spent is not None:
        return spent
    refused = next((o.refused for o in outcomes if o.refused), None)
    if refused is not None:
        return f"the model refused: {refused}"
    failed = [o for o in outcomes if o.error and not o.results]
    if outcomes and len(failed) == len(outcomes):
        return f"every search failed: {failed[0].error}"
    return None


async def member(state: ResearcherState, runtime: Runtime[Deps]) -> dict[str, Any]:
    """Research one member's share; its failure is its record's, never the step's."""
    team = current_team()
    async with team.turn(runtime.context.pause_asked):
        report = await _research(state, runtime, state["member"], team)
    return {"members": [report]}


def _kind(deps: Deps, share: MemberAssignment) -> tuple[int, MemberKind]:
    """Return the member's kind and its place among the kinds (the first for an unnamed one)."""
    kinds = deps.kinds()
    return next(((i, k) for i, k in enumerate(kinds) if k.name == share.kind), (0, kinds[0]))


def _token_share(kind: MemberKind, share: MemberAssignment, left: int | None) -> int | None:
    """Return the model tokens a member may spend: its kind's cap, and its part of the run's."""
    caps = [] if kind.token_budget is None else [kind.token_budget]
    if left is not None:
        caps.append(max(left, 0) // share.of)
    return min(caps, default=None)


def _tokens_used() -> int:
    """Return the model tokens the member has spent so far."""
    usage = _usage()
    return usage.input_tokens + usage.output_tokens


async def _research(
    state: ResearcherState, runtime: Runtime[Deps], share: MemberAssignment, team: Team
) -> MemberReport:
    """Run the share's queries within its budgets (reading pages until the run's deadline); tell its start and end."""
    place, kind = _kind(runtime.context, share)
    deps = replace(
        runtime.context, search=kind.search, engine=kind.engine or runtime.context.engine
    )
    told = {
        "member": share.name,
        "index": share.index,
        "round": state.get("iteration_count", 0) + 1,
    }
    tell(
        runtime,
        {
            "event": "member_started",
            **told,
            "kind": kind.name,
            "point": share.point,
            "queries": share.queries,
        },
    )
    started = time.perf_counter()
    position = dict(zip(share.queries, share.positions, strict=True))
    found: dict[str, QueryOutcome] = {}

    def finished(outcome: QueryOutcome) -> None:
        found[outcome.query] = outcome
        team.found(position[outcome.query], place, outcome)

    allowance = Allowance(
        kind.max_searches,
        _token_share(kind, share, state.get("tokens_left")),
        _tokens_used,
    )
    pages: dict[str, ReadPage] = {}
    raised: str | None = None
    spent: str | None = None  # which budget stopped it
    not_run = "not run: {spent}"  # what its queries' notes say when one did
    deadline = step_deadline()
    if time.monotonic() >= deadline:  # the others used up the run's time
        spent = "the time budget was spent before its turn came"
        not_run = "not run: the time budget was spent"
    own = None if kind.max_seconds is None else time.monotonic() + kind.max_seconds
    try:
        if spent is None:
            async with Searcher(
                deps,
                state["options"].max_results,
                state.get("research_data", []),
                min(deadline, own or deadline),
                {},
                finished,  # in its queries' order, as each finishes
                keyword_query(state.get("topic", "")),
                team.pool,
                team.search_gate,
                allowance,
            ) as search:
                runs = [asyncio.ensure_future(search.run(q)) for q in share.queries]
                remaining = None if own is None else own - time.monotonic()
                try:
                    _, late = await asyncio.wait(runs, timeout=remaining)
                finally:  # a member cancelled, or out of its own time, stops its queries
                    for run in runs:
                        run.cancel()
                if late:
                    await asyncio.wait(late)
                    spent = f"its time budget ({kind.max_seconds:g} s) was spent"
                for run in runs:
                    if not run.cancelled():
                        run.result()  # the first failure, once every query has ended
            pages = search.pages.fresh()
    except Exception as exc:  # the member fails, the step goes on with the others
        raised = describe(exc)
    spent = spent or allowance.spent
    unfinished = f"failed: {raised}" if raised else not_run.format(spent=spent)
    outcomes: list[QueryOutcome] = []
    for query in share.queries:
        outcome = found.get(query)
        if outcome is None:  # noted as failed, as a failed search is: the step goes on
            outcome = QueryOutcome(query=query, results=[], summary="", error=unfinished)
            team.found(position[query], place, outcome)
        outcomes.append(outcome)
    problem = _problem(outcomes, raised, spent)
    usage = _usage()
    submission = MemberSubmission(
        agent_name=share.name,
        agent_type=kind.agent_type,
        content=_content(outcomes),
        status="ERROR" if problem else "SUCCESS",
        error_message=problem,
        usage=usage,
        execution_time_ms=round((time.perf_counter() - started) * 1000, 3),
    )
    tell(
        runtime,
        {
            "event": "member_finished",
            **told,
            "status": submission.status,
            "error_message": problem,
            "usage": usage.model_dump(),
            "execution_time_ms": submission.execution_time_ms,
            "results": sum(len(o.results) for o in outcomes),
        },
    )
    return MemberReport(share=share, outcomes=outcomes, pages=pages, submission=submission)


def _usage() -> TokenUsage:
    """Return the model usage the member's own recording holds (`spending_kept` gives it one)."""
    recorder = current_recorder()
    calls = recorder.calls if recorder is not None else []
    return TokenUsage(
        requests=len(calls),
        input_tokens=sum(c.input_tokens for c in calls),
        output_tokens=sum(c.output_tokens for c in calls),
        cost_usd=sum(c.cost_usd for c in calls),
    )


def merged(state: ResearcherState) -> tuple[list[QueryOutcome], dict[str, ReadPage]]:
    """Return the findings of each query in the plan's order, and the pages the members read.

    Members finish in any order; their answers are taken by their place in the plan
    (each query's position, then a member's index), never by when they arrived, and the
    kinds' outcomes of one query are `combined`.
    """
    placed: dict[int, list[QueryOutcome]] = {}
    pages: dict[str, ReadPage] = {}
    for report in sorted(state.get("members", []), key=lambda r: r.share.index):
        for position, outcome in zip(report.share.positions, report.outcomes, strict=True):
            placed.setdefault(position, []).append(outcome)
        for key, page in report.pages.items():
            pages.setdefault(key, page)
    return [combined(placed[position]) for position in sorted(placed)], pages


def combined(parts: Sequence[QueryOutcome]) -> QueryOutcome:
    """Return one query's findings from each kind's outcome, in the kinds' order.

    Results interleave rank by rank, a URL kept once (as `CombinedProvider` merges
    providers); summaries and errors are joined.
    """
    if len(parts) == 1:
        return parts[0]
    results: dict[str, SearchResult] = {}
    for result in chain.from_iterable(zip_longest(*(p.results for p in parts))):
        if result is not None:
            results.setdefault(normalize_url(result.url), result)
    errors = [p.error for p in parts if p.error]
    return QueryOutcome(
        query=parts[0].query,
        results=list(results.values()),
        summary="\n\n".join(p.summary for p in parts if p.summary),
        error="; ".join(errors) if errors else None,
        pages_read=sum(p.pages_read for p in parts),
        page_errors=[e for p in parts for e in p.page_errors],
        refused=next((p.refused for p in parts if p.refused), None),
    )
