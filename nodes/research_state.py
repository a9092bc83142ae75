"""The researcher subgraph's state: what one research step keeps between its ReAct turns.

Checkpointed after every node, so a step a worker died in resumes from its last turn, and
a step whose member researchers were under way keeps the answers of those that finished.
"""

import operator
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AnyMessage
from pydantic import BaseModel, Field

from core.models import ResearchPlan, Review, SearchResult
from core.options import RunOptions
from core.usage import MemberSubmission
from engines.recording import Recorded
from nodes.reading import ReadPage

# The subgraph's nodes.
MEMBER = "member"
QUERIES = "queries"
MODEL = "model"
TOOLS = "tools"
COLLECT = "collect"


class QueryOutcome(BaseModel):
    """What one query gave: its results and their summary, or the error that stopped it."""

    query: str
    results: list[SearchResult]
    summary: str
    error: str | None = None
    pages_read: int = 0
    page_errors: list[str] = Field(default_factory=list)
    refused: str | None = None  # the model refused to serve (ModelAccessError): the run halts


class MemberAssignment(BaseModel):
    """A member researcher's share of the step's plan queries (`nodes.members.member_shares`)."""

    index: int = Field(ge=0, description="Its place in the plan's order: merges follow it.")
    name: str
    kind: str = ""  # its kind's name (`Deps.kinds`); "": the first kind
    of: int = Field(1, ge=1, description="The members of its step: its share of the run's tokens.")
    point: str | None = None  # the investigation point its queries research, if one
    queries: list[str]
    positions: list[int]  # each query's place among the plan's pending queries


class MemberReport(BaseModel):
    """What one member researcher found: an outcome per query of its share, and its record."""

    share: MemberAssignment
    outcomes: list[QueryOutcome]  # one per query of its share, in the share's order
    pages: dict[str, ReadPage] = Field(default_factory=dict)  # read, by normalised URL
    submission: MemberSubmission


class NodeSpending(BaseModel):
    """What one finished node of the step spent, kept so a resumed step still counts it."""

    node: str
    attempt: str  # the attempt at the step it ran in (`Recorder.attempt`)
    seconds: float
    recorded: Recorded


class ResearcherState(TypedDict, total=False):
    """One research step: the parent's inputs, the work so far, and the parent's update."""

    # From the parent graph, read only.
    topic: str
    options: RunOptions
    task_plan: ResearchPlan | None
    queries_done: list[str]
    research_data: list[SearchResult]
    review: Review | None
    iteration_count: int
    first_step: int  # the step number of the step's first note
    kinds: list[str]  # the kinds of member (`Deps.kinds`), each researching every point
    tokens_left: int | None  # of the run's token budget, when the step began (None: no cap)
    member: MemberAssignment  # a member researcher's input (`Send`), its share of the queries
    # The step's work, added to by each node.
    members: Annotated[list[MemberReport], operator.add]  # in any order: merges sort them
    outcomes: Annotated[list[QueryOutcome], operator.add]
    scraped: Annotated[list[SearchResult], operator.add]  # pages the model read in full
    thoughts: Annotated[list[str], operator.add]
    conversation: Annotated[list[AnyMessage], operator.add]  # the ReAct loop's messages
    pages: Annotated[dict[str, ReadPage], operator.or_]  # read in the step, by normalised URL
    spending: Annotated[list[NodeSpending], operator.add]  # model calls and time, per node
    turns: int  # model turns answered
    max_cycles: int  # the most turns the loop may take
    out_of_time: bool
    halted: str | None
    # What the parent sees: its state update and the events to stream.
    update: dict[str, Any]
    events: list[dict[str, Any]]
