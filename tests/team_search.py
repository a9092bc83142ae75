"""A loopback search API for the member-researcher tests: Tavily's /search over the fixture corpus.

The service's real Tavily client searches it through `tavily_base_url`, and its real
scraper reads the result pages it serves (each result's text as an article, with a line of
its own after it, so the page says more than the snippet). It counts the
searches each query reaches and holds the queries a test names until the test releases
them, so a test decides which members have finished when it acts (kills a worker, pauses,
cancels) and in which order they finish, by conditions, never by timing.
"""

import asyncio
import hashlib
import html
import threading
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from tools.local_corpus import LocalCorpus

from .servers import serve
from .sse import Frame

TAVILY_KEY = "tvly-team-test-key"
POLL_S = 0.005  # how often a held search looks whether it is released (not a timing)
SEARCH_TIMEOUT_S = 300.0  # the longest the settings allow: longer than any test holds a search


class Holds:
    """Queries held until released, shared across threads: the server's waits, the test's hand.

    `waiting` counts the held searches waiting now; `abandoned` lists those whose client went
    away while held (a cancelled or killed member).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: set[str] = set()
        self.waiting: Counter[str] = Counter()
        self.abandoned: list[str] = []

    def hold(self, queries: Iterable[str]) -> None:
        """Hold the next searches for these queries until released."""
        with self._lock:
            self._held |= set(queries)

    def release(self, queries: Iterable[str]) -> None:
        """Let the searches for these queries through, those waiting and any later."""
        with self._lock:
            self._held -= set(queries)

    def release_all(self) -> None:
        """Let every held search through."""
        with self._lock:
            self._held.clear()

    def held(self, query: str) -> bool:
        """Return whether searches for `query` are held now."""
        with self._lock:
            return query in self._held

    async def passage(self, query: str, gone: Callable[[], Awaitable[bool]] | None = None) -> bool:
        """Wait while `query` is held; return False if `gone` says the asker left meanwhile."""
        if not self.held(query):
            return True
        with self._lock:
            self.waiting[query] += 1
        try:
            while self.held(query):
                if gone is not None and await gone():
                    with self._lock:
                        self.abandoned.append(query)
                    return False
                await asyncio.sleep(POLL_S)
            return True
        finally:
            with self._lock:
                self.waiting[query] -= 1


class TeamSearch:
    """Tavily's /search answered from a local corpus, and its results' pages.

    Every search is counted; the queries `holds` names wait until released.
    """

    def __init__(self, corpus: LocalCorpus) -> None:
        self.corpus = corpus
        self.holds = Holds()
        self.base = ""  # where it is served: its pages' addresses start with it
        self._lock = threading.Lock()
        self._log: list[tuple[str, str]] = []  # ("search", query) or ("page", name), as they came
        self._pages: dict[str, tuple[str, str]] = {}  # title and text, by page name
        self.app = Starlette(
            routes=[
                Route("/search", self.search, methods=["POST"]),
                Route("/pages/{name}", self.page),
                Route("/robots.txt", lambda _: PlainTextResponse("", status_code=404)),
            ]
        )

    def counts(self) -> Counter[str]:
        """Return how many searches each query has reached so far."""
        return Counter(self.since(0))

    def mark(self) -> int:
        """Return how many requests arrived so far (`since` reads the later ones)."""
        with self._lock:
            return len(self._log)

    def since(self, mark: int, kind: str = "search") -> list[str]:
        """Return the queries searched (or, `kind` "page", the pages read) after `mark`."""
        with self._lock:
            return [what for sort, what in self._log[mark:] if sort == kind]

    async def search(self, request: Request) -> Response:
        """Answer one search as Tavily does, once the query is not held."""
        body: dict[str, Any] = await request.json()
        query = str(body["query"])
        with self._lock:
            self._log.append(("search", query))
        if not await self.holds.passage(query, request.is_disconnected):
            return Response(status_code=499)  # nobody reads it
        hits = self.corpus.search_sync(query, int(body.get("max_results", 5)))
        results = [
            {
                "title": hit.title,
                "url": self._published(hit.url, hit.title, hit.content),
                "content": hit.content,
                "score": min(hit.score, 1.0),  # Tavily's scores are in 0..1
            }
            for hit in hits
        ]
        return JSONResponse({"query": query, "results": results, "response_time": 0.01})

    def _published(self, url: str, title: str, text: str) -> str:
        """Return the address of this server's page of a result (one per corpus address)."""
        name = hashlib.sha256(url.encode()).hexdigest()[:16]
        with self._lock:
            self._pages.setdefault(name, (title, text))
        return f"{self.base}/pages/{name}"

    async def page(self, request: Request) -> Response:
        """Serve a result's text as an article, one more line at its end."""
        name = request.path_params["name"]
        with self._lock:
            self._log.append(("page", name))
            title, text = self._pages[name]
        paragraphs = "".join(f"<p>{html.escape(p)}</p>" for p in text.split("\n") if p.strip())
        more = f"<p>{html.escape(title)} is one of the pages of the test corpus.</p>"
        return HTMLResponse(
            f"<html><head><title>{html.escape(title)}</title></head><body><article>"
            f"<h1>{html.escape(title)}</h1>{paragraphs}{more}</article></body></html>"
        )


@contextmanager
def team_search(corpus_index: Path) -> Iterator[tuple[TeamSearch, str]]:
    """Serve a `TeamSearch` over the corpus at `corpus_index`; yield it and its base URL."""
    corpus = LocalCorpus(corpus_index)
    api = TeamSearch(corpus)
    try:
        with serve(api.app) as url:
            api.base = url
            try:
                yield api, url
            finally:
                api.holds.release_all()  # no search waits for ever on a server stopping
    finally:
        corpus.close()


def search_settings(url: str) -> dict[str, Any]:
    """Settings that search `url` as Tavily and read its pages, retrying no search.

    A search waits as long as a test may hold it: only the service giving it up ends it.
    """
    return {
        "search_provider": "tavily",
        "tavily_api_key": TAVILY_KEY,
        "tavily_base_url": url,
        "search_max_retries": 0,
        "search_timeout_s": SEARCH_TIMEOUT_S,
        "page_allow_private": True,
        "page_allowed_ports": [int(url.rsplit(":", 1)[1])],
        "page_respect_robots": False,
    }


def search_env(url: str) -> dict[str, str]:
    """`search_settings` as a process's environment."""
    return {
        "RESEARCH_SEARCH_PROVIDER": "tavily",
        "TAVILY_API_KEY": TAVILY_KEY,
        "RESEARCH_TAVILY_BASE_URL": url,
        "RESEARCH_SEARCH_MAX_RETRIES": "0",
        "RESEARCH_SEARCH_TIMEOUT_S": str(SEARCH_TIMEOUT_S),
        "RESEARCH_PAGE_ALLOW_PRIVATE": "true",
        "RESEARCH_PAGE_ALLOWED_PORTS": f"[{url.rsplit(':', 1)[1]}]",
        "RESEARCH_PAGE_RESPECT_ROBOTS": "false",
    }


def shares(frames: list[Frame]) -> dict[int, list[str]]:
    """Each member's queries, by its index, as its `member_started` events said."""
    return {f.data["index"]: f.data["queries"] for f in frames if f.event == "member_started"}


def finish_order(frames: list[Frame]) -> list[int]:
    """The members' indexes in the order their `member_finished` events came."""
    return [f.data["index"] for f in frames if f.event == "member_finished"]
