"""The ReAct loop's tool calls, run with the project's own tools: search and scrape.

A call the model got wrong (an unknown tool, arguments that do not fit) is answered with
what was wrong, so the model can try again.
"""

from collections.abc import Awaitable, Iterable, Sequence
from dataclasses import dataclass

from langchain_core.messages import ToolCall, ToolMessage
from pydantic import ValidationError

from core.models import SearchResult
from nodes.context import PageReader
from nodes.reading import PageReads
from nodes.research_state import QueryOutcome
from nodes.searching import Searcher, observation
from prompts.researcher import REACT_TOOLS, ScrapeArgs, SearchArgs

# How much of a page the model is shown.
PAGE_CHARS = 6_000


@dataclass(frozen=True, slots=True)
class ToolResult:
    """One call's Observation, and what it found for the step."""

    message: ToolMessage
    outcome: QueryOutcome | None = None
    page: SearchResult | None = None


def tool_names(reader: PageReader | None) -> list[str]:
    """Return the tools a turn is offered: `scrape` only with a page reader."""
    return ["search", "scrape"] if reader is not None else ["search"]


def run_tool_calls(
    calls: Sequence[ToolCall], ran: Iterable[str], search: Searcher, reader: PageReader | None
) -> list[Awaitable[ToolResult]]:
    """Return one awaitable per call, in order; a query in `ran` (or asked twice) is not rerun."""
    seen = {q.casefold() for q in ran}
    offered = tool_names(reader)
    runs: list[Awaitable[ToolResult]] = []
    for call in calls:
        call_id = call.get("id") or call["name"]
        if call["name"] not in offered:
            runs.append(_answer(f"There is no tool {call['name']!r}.", call_id))
            continue
        try:
            args = REACT_TOOLS[call["name"]][0].model_validate(call["args"])
        except ValidationError as exc:  # the model's arguments did not fit: let it retry
            runs.append(_answer(f"Invalid arguments: {exc.errors()[0]['msg']}", call_id))
            continue
        if isinstance(args, SearchArgs):
            if args.query.casefold() in seen:
                answer = f"'{args.query}' was searched already: try other words."
                runs.append(_answer(answer, call_id))
                continue
            seen.add(args.query.casefold())
            runs.append(_search(search, args.query, call_id))
        elif isinstance(args, ScrapeArgs) and reader is not None:
            runs.append(_scrape(search.pages, args.url, call_id))
    return runs


async def _answer(text: str, call_id: str) -> ToolResult:
    return ToolResult(ToolMessage(text, tool_call_id=call_id))


async def _search(search: Searcher, query: str, call_id: str) -> ToolResult:
    outcome = await search.run(query)
    return ToolResult(ToolMessage(observation(outcome), tool_call_id=call_id), outcome=outcome)


async def _scrape(pages: PageReads, url: str, call_id: str) -> ToolResult:
    page = await pages.read(url)
    if page.error is not None:  # the model is told, and may read another page
        text = f"The page could not be read: {page.error}"
        return ToolResult(ToolMessage(text, tool_call_id=call_id))
    source = SearchResult(
        title=page.title or url, url=page.final_url or url, content=page.text, source="scraper"
    )
    return ToolResult(ToolMessage(page.text[:PAGE_CHARS], tool_call_id=call_id), page=source)
