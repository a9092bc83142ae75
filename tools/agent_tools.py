"""The tools as LangChain tools, for a model that chooses what to call.

Thin wrappers over the providers; each returns compact text, and an expected failure as a
one-line message the model can recover from. Bind them with `langgraph.prebuilt.ToolNode`.
"""

from collections.abc import Awaitable, Callable, Sequence
from typing import Annotated

from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel, Field

from tools.brave import BraveProvider
from tools.errors import ToolError
from tools.scraper import Scraper
from tools.search import Depth, SearchHit, SearchProvider
from tools.tavily import TavilyProvider

SNIPPET_CHARS = 400
PAGE_CHARS = 8000

Query = Annotated[str, Field(description="What to search for: a few keywords, not a sentence.")]


class TavilySearchArgs(BaseModel):
    """Arguments of `tavily_search` (`tools.tavily.SearchParams` checks them)."""

    query: Query
    search_depth: Depth = Field("basic", description="'advanced' digs deeper and costs more.")
    max_results: int = Field(5, ge=1, le=20, description="How many results, 1 to 20.")


class TavilyExtractArgs(BaseModel):
    """Arguments of `tavily_extract` (`tools.tavily.ExtractParams` checks them)."""

    urls: list[str] = Field(description="http or https URLs whose content to read, 1 to 20.")


class TavilyContextArgs(BaseModel):
    """Arguments of `tavily_context` (`tools.tavily.ContextParams` checks them)."""

    query: Query
    max_tokens: int | None = Field(None, ge=1, description="Upper bound on the context size.")


class WebSearchArgs(BaseModel):
    """Arguments of `web_search`: `query` and `count`."""

    query: Query
    count: int = Field(10, description="How many results, 1 to 10 (more is clamped to 10).")


class WebScraperArgs(BaseModel):
    """Arguments of `web_scraper`: the URL of one page."""

    url: str = Field(description="The http or https URL of the page to read.")


class LocalSearchArgs(BaseModel):
    """Arguments of `local_search`."""

    query: Query
    max_results: int = Field(5, ge=1, le=20, description="How many results, 1 to 20.")


def format_hits(hits: Sequence[SearchHit]) -> str:
    """Format hits as numbered title, URL and snippet: the one shape every search tool returns."""
    if not hits:
        return "No results."
    rows = []
    for i, hit in enumerate(hits, start=1):
        text = " ".join(hit.content.split())
        snippet = (
            text if len(text) <= SNIPPET_CHARS else text[:SNIPPET_CHARS].rsplit(" ", 1)[0] + "…"
        )
        rows.append(f"{i}. {hit.title}\n   {hit.url}\n   {snippet}")
    return "\n".join(rows)


def _tool(
    coroutine: Callable[..., Awaitable[str]], name: str, description: str, schema: type[BaseModel]
) -> BaseTool:
    """Make a tool that answers an expected failure with a one-line message the model can use."""

    async def guarded(**kwargs: object) -> str:
        try:
            return await coroutine(**kwargs)
        except ToolError as exc:
            return f"Error: {exc}"

    return StructuredTool.from_function(
        coroutine=guarded, name=name, description=description, args_schema=schema
    )


def tavily_tools(tavily: TavilyProvider) -> list[BaseTool]:
    """Return `tavily_search`, `tavily_extract` and `tavily_context`."""

    async def search(query: str, search_depth: Depth = "basic", max_results: int = 5) -> str:
        return format_hits(await tavily.search(query, max_results, search_depth))

    async def extract(urls: list[str]) -> str:
        answer = await tavily.extract(urls)
        parts = [f"## {r.url}\n{r.raw_content.strip()}" for r in answer.results]
        parts += [f"## {f.url}\nError: {f.error}" for f in answer.failed_results]
        return "\n\n".join(parts) or "Nothing could be extracted."

    async def context(query: str, max_tokens: int | None = None) -> str:
        return await tavily.get_search_context(query, max_tokens=max_tokens)

    return [
        _tool(
            search,
            "tavily_search",
            "Search the web with Tavily. Returns numbered results with title, URL and content.",
            TavilySearchArgs,
        ),
        _tool(
            extract,
            "tavily_extract",
            "Read the full content of up to 20 web pages by URL with Tavily.",
            TavilyExtractArgs,
        ),
        _tool(
            context,
            "tavily_context",
            "Search the web and get the results' content as one JSON context for answering a question.",
            TavilyContextArgs,
        ),
    ]


def brave_tools(brave: BraveProvider) -> list[BaseTool]:
    """Return `web_search`: Brave with its `query` and `count` parameters."""

    async def web_search(query: str, count: int = 10) -> str:
        results = await brave.web_search(query, count)
        hits = [SearchHit(title=r.title, url=r.url, content=r.description) for r in results]
        return format_hits(hits)

    return [
        _tool(
            web_search,
            "web_search",
            "Search the web with Brave. Returns numbered results with title, URL and description.",
            WebSearchArgs,
        )
    ]


def local_tools(corpus: SearchProvider) -> list[BaseTool]:
    """Return `local_search` over the embedded corpus."""

    async def local_search(query: str, max_results: int = 5) -> str:
        return format_hits(await corpus.search(query, max_results))

    return [
        _tool(
            local_search,
            "local_search",
            "Search the local document corpus (offline). Returns numbered results with title, URL and text.",
            LocalSearchArgs,
        )
    ]


def scraper_tools(scraper: Scraper) -> list[BaseTool]:
    """Return `web_scraper`: one page's main text, read through the scraper's SSRF guard and caps."""

    async def web_scraper(url: str) -> str:
        page = await scraper.fetch(url)
        text = page.text if len(page.text) <= PAGE_CHARS else page.text[:PAGE_CHARS] + "…"
        return f"# {page.title}\n{page.final_url}\n\n{text}"

    return [
        _tool(
            web_scraper,
            "web_scraper",
            "Read the main text of one web page by URL (navigation and ads removed).",
            WebScraperArgs,
        )
    ]
