"""Researcher prompts: summaries of one query's results, the knowledge-gap check, the ReAct loop."""

from collections.abc import Sequence
from typing import Annotated

from pydantic import BaseModel, Field

from core.models import SearchResult
from prompts.sources import bullet_list, format_sources
from prompts.strict import Line

SUMMARY_TOKENS = 512

SUMMARY_SYSTEM = """You summarise web search results for a research team.
Write at most 200 words of Markdown bullets with the facts that answer the query, each
ending with the number of the source it comes from in brackets, like [2]. Use only the
sources given; if they do not answer the query, say so in one line. Write in the language
of the query."""

GAPS_SYSTEM = """You are the Researcher of a research agent. Compare what has been collected with
the investigation points of the plan. Decide which points are not yet answered by the
sources (the knowledge gaps) and propose at most 3 new short web search queries that would
close them. Do not repeat a query already run. If no gap remains, return no queries.
Answer with the JSON object the schema describes and nothing else."""

REACT_SYSTEM = """You are the Researcher of a research agent, working in cycles of
Thought -> Action -> Observation. In each cycle, think about which investigation point is
still unanswered by what you have observed, then call one tool: `search` for new results,
`extract` or `scrape` to read a promising page in full. When every point is answered, or
nothing more can be found, reply with a short plain-text conclusion instead of a tool call."""

Query = Annotated[str, Line(200)]


class GapsOutput(BaseModel):
    """The knowledge-gap check: what is missing and the queries that would find it."""

    gaps: list[str] = Field(description="Investigation points the sources do not answer yet.")
    queries: list[Query] = Field(max_length=3, description="New search queries; empty if none.")


class SearchArgs(BaseModel):
    """Arguments of the ReAct loop's `search` tool."""

    query: Query = Field(description="A few keywords, not a sentence.")


class ScrapeArgs(BaseModel):
    """Arguments of the ReAct loop's `scrape` tool."""

    url: str = Field(description="An http(s) URL taken from the search results.")


def summary_message(query: str, sources: Sequence[SearchResult]) -> str:
    """The user message for one query's summary."""
    return f"Query: {query}\n\n{format_sources(sources, 1_200)}"


def gaps_message(
    theme: str,
    points: Sequence[str],
    sources: Sequence[SearchResult],
    done: Sequence[str],
    review_feedback: str | None,
) -> str:
    """The user message for the knowledge-gap check (titles only: the point is coverage)."""
    titles = [f"{s.title} ({s.url})" for s in sources]
    parts = [
        f"Theme: {theme}",
        "Investigation points:",
        bullet_list(points),
        "Queries already run:",
        bullet_list(done),
        f"Sources collected ({len(sources)}):",
        bullet_list(titles[-40:]),
    ]
    if review_feedback:
        parts += [f"The reviewer of the latest draft said: {review_feedback}"]
    return "\n".join(parts)


def react_message(
    theme: str, points: Sequence[str], queries: Sequence[str], sources: Sequence[SearchResult]
) -> str:
    """The first user message of a ReAct loop: the points, and what is known already."""
    titles = [f"{s.title} ({s.url})" for s in sources]
    return "\n".join(
        [
            f"Theme: {theme}",
            "Investigation points:",
            bullet_list(points),
            "Queries run so far:",
            bullet_list(queries),
            f"Sources collected ({len(sources)}):",
            bullet_list(titles[-40:]),
            "Judge which points these do not answer yet, and find what is missing.",
        ]
    )


# The tools a turn may call: their arguments and what the model is told they do.
REACT_TOOLS: dict[str, tuple[type[BaseModel], str]] = {
    "search": (
        SearchArgs,
        "Search the web (or the corpus) with a few keywords; returns a "
        "summary of the results with their numbers, titles and URLs.",
    ),
    "scrape": (
        ScrapeArgs,
        "Read the page at an http(s) URL from the results in full.",
    ),
}
