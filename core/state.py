"""The graph's shared state and the reducers that merge node updates."""

import operator
from collections.abc import Callable
from functools import cache
from typing import Annotated, Any, Literal, TypedDict, TypeVar, get_type_hints

from langchain_core.messages import AnyMessage
from langgraph.graph.message import add_messages
from pydantic import TypeAdapter, ValidationError

from core.models import (
    Action,
    ApprovalDecision,
    Draft,
    DraftReview,
    Rerun,
    ResearchNote,
    ResearchPlan,
    Review,
    SearchResult,
    explain,
)
from core.options import RunOptions
from core.questions import QuestionAnswer
from core.urls import normalize_url
from core.usage import RoundRecord, Usage

_T = TypeVar("_T")

# A config key: the thread's id as its client knows it, where the service stores the
# thread under another (a key's scope, `service.thread_ids`); records the graph writes use it.
CLIENT_THREAD_ID = "client_thread_id"


def _append_new(
    left: list[_T] | None, right: list[_T] | None, key: Callable[[_T], str]
) -> list[_T]:
    """Return `left` and the items of `right` whose key it does not hold yet, each once."""
    merged = list(left or [])
    seen = {key(item) for item in merged}
    for item in right or []:
        if (k := key(item)) not in seen:
            seen.add(k)
            merged.append(item)
    return merged


def merge_sources(
    left: list[SearchResult] | None, right: list[SearchResult] | None
) -> list[SearchResult]:
    """Append new sources, keeping the first copy of each normalised URL."""
    return _append_new(left, right, lambda source: normalize_url(source.url))


def merge_drafts(left: list[Draft] | None, right: list[Draft | DraftReview] | None) -> list[Draft]:
    """Add drafts; a draft with a known version replaces it, a review joins its draft."""
    by_version = {d.version: d for d in left or []}
    for item in right or []:
        if isinstance(item, Draft):
            by_version[item.version] = item
            continue
        draft = by_version.get(item.version)
        if draft is None:
            raise ValueError(f"a review of draft {item.version}, which the state does not hold")
        update: dict[str, Any] = {"review": item.review}
        if item.markdown is not None:
            update["markdown"] = item.markdown
        by_version[item.version] = draft.model_copy(update=update)
    return [by_version[v] for v in sorted(by_version)]


def add_usage(left: Usage | None, right: Usage | None) -> Usage:
    """Sum usage per node."""
    return (left or Usage()) + (right or Usage())


def merge_rounds(
    left: list[RoundRecord] | None, right: list[RoundRecord] | None
) -> list[RoundRecord]:
    """Keep one record per round: a node call joins its round's record, in order of rounds.

    A round's members' record comes with its research step, once; a later one replaces it.
    """
    by_round = {r.round_number: r for r in left or []}
    for record in right or []:
        known = by_round.get(record.round_number)
        by_round[record.round_number] = (
            record
            if known is None
            else known.model_copy(
                update={
                    "submissions": known.submissions + record.submissions,
                    "members": record.members or known.members,
                }
            )
        )
    return [by_round[n] for n in sorted(by_round)]


def merge_questions(
    left: list[QuestionAnswer] | None, right: list[QuestionAnswer] | None
) -> list[QuestionAnswer]:
    """Keep one answer per question number, in order; a later copy (a run started) replaces it."""
    by_id = {q.id: q for q in left or []}
    by_id.update((q.id, q) for q in right or [])
    return [by_id[n] for n in sorted(by_id)]


def union_queries(left: list[str] | None, right: list[str] | None) -> list[str]:
    """Remember every query run, in order, once (compared case-blind)."""
    return _append_new(left, right, str.casefold)


# final: a draft passed review; partial: the budget ended first (the best draft is kept);
# insufficient: the report cites nothing, or its sources leave half of the subject's words
# unsaid (they do not cover the subject).
ReportStatus = Literal["final", "partial", "insufficient"]


class ResearchState(TypedDict, total=False):
    """Everything a research thread knows; checkpointed after every step."""

    messages: Annotated[list[AnyMessage], add_messages]
    topic: str
    options: RunOptions
    task_plan: ResearchPlan | None
    plan_approved: bool
    research_data: Annotated[list[SearchResult], merge_sources]
    queries_done: Annotated[list[str], union_queries]
    notes: Annotated[list[ResearchNote], operator.add]
    # Every draft; the last is the current one.
    drafts: Annotated[list[Draft], merge_drafts]
    feedback: str | None
    review: Review | None
    iteration_count: int
    next_action: Action
    human_input: dict[str, Any] | None
    usage: Annotated[Usage, add_usage]
    rounds: Annotated[list[RoundRecord], merge_rounds]
    halted: str | None
    final_report: str | None
    report_status: ReportStatus | None
    stop_reason: str | None  # why the report is partial, as its front matter says
    rerun: Rerun | None  # what this run re-runs, and how it gets its evidence
    # Follow-up questions asked of the finished thread, and their answers (`core.questions`).
    questions: Annotated[list[QuestionAnswer], merge_questions]


# What a checkpoint may hold of ours: the state, an approval answer, a draft's review. The
# checkpointers revive the pydantic models reachable from these and nothing else.
CHECKPOINT_ROOTS: tuple[Any, ...] = (ResearchState, ApprovalDecision, DraftReview)


def initial_state(topic: str, options: RunOptions) -> ResearchState:
    """Build the input of a new research thread."""
    return ResearchState(
        topic=topic,
        options=options,
        task_plan=None,
        plan_approved=options.approval == "none",
        feedback=None,
        review=None,
        iteration_count=0,
        next_action="research",
        human_input=None,
        halted=None,
        final_report=None,
        report_status=None,
    )


@cache
def _field_adapters() -> dict[str, TypeAdapter[Any]]:
    return {name: TypeAdapter(hint) for name, hint in get_type_hints(ResearchState).items()}


def coerce_update(values: dict[str, Any]) -> dict[str, Any]:
    """Return a state update from JSON as the graph's own types; raise ValueError naming a bad field."""
    adapters = _field_adapters()
    unknown = sorted(set(values) - set(adapters))
    if unknown:
        raise ValueError(f"unknown state fields {unknown}; the state has {sorted(adapters)}")
    coerced = {}
    for name, value in values.items():
        try:
            coerced[name] = adapters[name].validate_python(value)
        except ValidationError as exc:
            raise ValueError(explain(exc, (name,))) from None
    return coerced
