from langchain_core.messages import AIMessage, ToolMessage
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode
from starlette.applications import Starlette
from starlette.responses import HTMLResponse
from starlette.routing import Route

from tools.agent_tools import brave_tools, local_tools, scraper_tools, tavily_tools
from tools.brave import BraveProvider
from tools.local_corpus import LocalCorpus
from tools.scraper import FetchPolicy, Scraper
from tools.tavily import TavilyProvider

from .fake_apis import FakeAPIs, Fault
from .servers import serve_port


def by_name(tools: list) -> dict:  # type: ignore[type-arg]
    return {t.name: t for t in tools}


async def test_tavily_tools_return_compact_text(tavily: TavilyProvider) -> None:
    tools = by_name(tavily_tools(tavily))
    text = await tools["tavily_search"].ainvoke({"query": "printing press", "max_results": 2})
    assert text.startswith("1. printing press result 0\n   https://news.example/printing-press/0\n")
    assert "2. printing press result 1" in text
    extracted = await tools["tavily_extract"].ainvoke({"urls": ["https://a.example/x"]})
    assert extracted == "## https://a.example/x\nContent of https://a.example/x"
    assert '"url"' in await tools["tavily_context"].ainvoke({"query": "gutenberg"})


async def test_web_search_has_query_and_count_and_the_same_result_shape(
    brave: BraveProvider,
) -> None:
    tool = by_name(brave_tools(brave))["web_search"]
    assert set(tool.args) == {"query", "count"}
    text = await tool.ainvoke({"query": "movable type", "count": 2})
    assert text == (
        "1. movable type page 0\n   https://web.example/movable-type/0\n   Description 0 of movable type.\n"
        "2. movable type page 1\n   https://web.example/movable-type/1\n   Description 1 of movable type."
    )


async def test_a_failing_tool_answers_with_a_message_instead_of_raising(
    tavily: TavilyProvider, brave: BraveProvider, apis: FakeAPIs
) -> None:
    apis.fail("/search", Fault(status=401))
    text = await by_name(tavily_tools(tavily))["tavily_search"].ainvoke({"query": "x"})
    assert text.startswith("Error: AUTH_ERROR (HTTP 401)")
    text = await by_name(brave_tools(brave))["web_search"].ainvoke({"query": "x", "count": 0})
    assert text.startswith("Error: VALIDATION_ERROR")


async def test_local_search_reads_the_corpus(corpus: LocalCorpus) -> None:
    text = await by_name(local_tools(corpus))["local_search"].ainvoke(
        {"query": "rotary printing press"}
    )
    assert text.startswith(
        "1. Rotary printing press\n   https://example.org/wiki/Rotary_printing_press"
    )


async def test_tool_node_runs_a_model_s_tool_call(corpus: LocalCorpus) -> None:
    builder = StateGraph(MessagesState)
    builder.add_node("tools", ToolNode(local_tools(corpus)))
    builder.add_edge(START, "tools")
    builder.add_edge("tools", END)
    call = {
        "name": "local_search",
        "args": {"query": "Gutenberg Bible"},
        "id": "c1",
        "type": "tool_call",
    }
    result = await builder.compile().ainvoke(
        {"messages": [AIMessage(content="", tool_calls=[call])]}
    )
    message = result["messages"][-1]
    assert isinstance(message, ToolMessage) and message.tool_call_id == "c1"
    assert "Johannes Gutenberg" in message.content


ARTICLE = """<html><head><title>Gutenberg's press</title></head><body>
<nav>Home | About</nav>
<article><h1>Gutenberg's press</h1>
<p>Johannes Gutenberg introduced movable-type printing to Europe around 1440, and his press
spread to more than two hundred cities within a few decades of its invention.</p>
<p>By 1500 the presses of Western Europe had produced more than twenty million volumes,
which changed how knowledge was shared across the continent.</p></article>
<footer>Copyright</footer></body></html>"""


async def test_web_scraper_reads_a_page_and_refuses_unsafe_urls() -> None:
    app = Starlette(routes=[Route("/press", lambda request: HTMLResponse(ARTICLE))])
    with serve_port(app) as port:
        policy = FetchPolicy(
            allow_private=True, allowed_ports=frozenset({port}), respect_robots=False
        )
        async with Scraper(policy) as scraper:
            tool = by_name(scraper_tools(scraper))["web_scraper"]
            text = await tool.ainvoke({"url": f"http://127.0.0.1:{port}/press"})
            assert text.startswith("# Gutenberg's press\n")
            assert "twenty million volumes" in text and "Home | About" not in text
        async with Scraper(FetchPolicy()) as strict:
            refused = await by_name(scraper_tools(strict))["web_scraper"].ainvoke(
                {"url": "http://127.0.0.1/press"}
            )
    assert refused == "Error: refused: loopback address"
