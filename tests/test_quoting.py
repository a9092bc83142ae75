"""Text from sources and topics stays text in the report, in Markdown and in HTML.

A source whose sentences carry Markdown (an image pointing at a tracking pixel, a link to
a phishing page) is researched end to end over real HTTP; the report quotes it, and
neither the Markdown (read by any CommonMark reader) nor the server's HTML turns it into
an image or a link. Every HTML answer carries the page's Content-Security-Policy.
"""

import asyncio
import json
import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest
from markdown_it import MarkdownIt

from app.api import create_app
from app.report_html import RenderedReports, report_html
from app.settings import Settings
from app.web import PAGE_POLICY
from core.markdown import markdown_text, plain_text
from core.models import REPORT_MAX_CHARS
from tools.corpus_files import iter_documents
from tools.local_corpus import build_index

from .servers import serve_port
from .sse import collect
from .support import TOPIC

PIXEL = "http://127.0.0.1:9/p.png"
PHISH = "https://phish.example/login"
HOSTILE = [
    {
        "title": f"Printing press handbook [guide]({PHISH})",
        "url": "https://example.org/wiki/Printing_press_handbook",
        "text": (
            f"The printing press handbook ![pixel]({PIXEL}) says Gutenberg's printing press "
            f"used movable metal type, as [the manual]({PHISH}) explains in detail. "
            "# The printing press spread to two hundred European cities within decades. "
            "<script>alert(1)</script> The printing press made books cheap [^9] and common."
        ),
    },
    {
        "title": "Printing press",
        "url": "https://example.org/wiki/Printing_press",
        "text": (
            "The printing press was invented by Johannes Gutenberg around 1440 in Mainz. "
            "The printing press spread within several decades to many European countries."
        ),
    },
]


@pytest.fixture
def hostile_index(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    lines = "\n".join(json.dumps(d) for d in HOSTILE)
    (folder / "hostile.jsonl").write_text(lines + "\n", encoding="utf-8")
    index = tmp_path / "index.sqlite"
    build_index(iter_documents(folder), index)
    return index


async def _report(client: httpx.AsyncClient, topic: str) -> tuple[str, httpx.Response]:
    """The report of a run on `topic`, as Markdown and as the server's HTML."""
    started = await client.post(
        "/v1/research", json={"topic": topic, "options": {"min_sources": 2}}
    )
    assert started.status_code == 202, started.text
    thread = started.json()["thread_id"]
    await collect(client, f"/v1/research/{thread}/events")
    markdown = (await client.get(f"/v1/research/{thread}/report")).text
    as_html = await client.get(f"/v1/research/{thread}/report", headers={"Accept": "text/html"})
    assert as_html.status_code == 200
    assert as_html.headers["content-security-policy"] == PAGE_POLICY
    return markdown.partition("\n---\n")[2], as_html


@asynccontextmanager
async def _served(tmp_path: Path, index: Path) -> AsyncIterator[httpx.AsyncClient]:
    """A client of a live server searching the corpus `index`."""
    settings = Settings(data_dir=tmp_path / "data", corpus_index=index, search_provider="local")
    with serve_port(create_app(settings), lifespan="on") as port:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
            yield client


def _commonmark(markdown: str) -> str:
    """What any CommonMark reader makes of the Markdown, raw HTML allowed."""
    return MarkdownIt("commonmark", {"html": True}).render(markdown)


async def test_markdown_in_sources_and_topic_stays_text(
    tmp_path: Path, hostile_index: Path
) -> None:
    async with _served(tmp_path, hostile_index) as client:
        quoted, quoted_html = await _report(client, "the printing press")
        titled, titled_html = await _report(
            client, f"the printing press ![pixel]({PIXEL}) [click]({PHISH})"
        )
        page = await client.get("/")
        static = await client.get("/static/index.html")
        docs = await client.get("/docs")

    assert "handbook" in quoted and "[^1]" in quoted, "the hostile source was quoted and cited"
    for markdown, as_html in ((quoted, quoted_html), (titled, titled_html)):
        for rendered in (_commonmark(markdown), as_html.text):
            assert "<img" not in rendered
            assert 'href="https://phish.example' not in rendered
            assert "<script" not in rendered
            assert "<h1>The printing press spread" not in rendered
    assert "[^9]" not in quoted, "a source's footnote mark is no citation"
    assert "![pixel]" in titled_html.text.split("</h1>")[0], "the topic's heading shows it as text"
    # The report's own references are still links.
    assert 'href="https://example.org/wiki/Printing_press' in quoted_html.text
    for answer in (page, static):
        assert answer.headers["content-security-policy"] == PAGE_POLICY, answer.url
        assert answer.headers["x-content-type-options"] == "nosniff"
    policy = docs.headers["content-security-policy"]
    assert "img-src 'self' data:" in policy and "'unsafe-inline'" not in policy


def test_the_renderer_makes_links_outside_the_references_and_images_text() -> None:
    drafted = (
        f"# Title ![x]({PIXEL})\n\nA claim from [the manual]({PHISH}).[^1]\n\n"
        "## References\n\n[^1]: [Source](https://example.org/a)\n"
    )
    rendered = report_html(drafted)
    assert "<img" not in rendered and "phish.example" not in rendered
    assert "the manual" in rendered and "Title x" in rendered
    assert 'href="https://example.org/a"' in rendered


@pytest.mark.parametrize(
    "text",
    [
        f"![pixel]({PIXEL}) and [a](b) and <b>bold</b> and `code` and *em* and _em_",
        "# not a heading",
        "1984. Not a list",
        "- not a list",
        "> not a quote",
        "a | b | c",
        "ends with a backslash \\",
        "a [^3] mark & &amp; entity",
    ],
)
def test_markdown_text_reads_as_exactly_the_text(text: str) -> None:
    written = markdown_text(text)
    rendered = MarkdownIt("commonmark", {"html": True}).render(written)
    expected = MarkdownIt("commonmark").renderInline(text.replace("&", "&amp;")).strip()
    assert rendered.startswith("<p>") and rendered.count("<p>") == 1, rendered
    inner = rendered.removeprefix("<p>").removesuffix("</p>\n")
    assert "<img" not in inner and "<a" not in inner and "<b>" not in inner
    assert "<em>" not in inner and "<code>" not in inner
    assert expected  # the text renders to something
    assert plain_text(written) == " ".join(text.split())


async def _until_approval(client: httpx.AsyncClient, thread: str, after: int) -> int:
    """Follow the events until the run asks for approval; the id of that event."""
    frames = await collect(
        client, f"/v1/research/{thread}/events?after={after}", until="approval_required"
    )
    assert frames[-1].event == "approval_required", [f.event for f in frames]
    return frames[-1].id


def _long_report(chars: int) -> str:
    """A report of about `chars` characters, with the markup a report has."""
    paragraph = (
        "The press made *books* cheap and **common**, and `type` was reused.[^1] "
        "- a list item\n- another with [a link](https://example.org/x)\n\n"
    )
    body = "# A long report\n\n" + paragraph * (chars // len(paragraph))
    return body + "\n## References\n\n[^1]: [Source](https://example.org/a)\n"


async def test_a_long_edited_report_renders_and_a_longer_one_is_refused(
    tmp_path: Path, corpus_index: Path
) -> None:
    async with _served(tmp_path, corpus_index) as client:
        started = await client.post(
            "/v1/research", json={"topic": TOPIC, "options": {"approval": "plan_and_report"}}
        )
        thread = started.json()["thread_id"]
        seen = await _until_approval(client, thread, 0)
        await client.post(f"/v1/research/{thread}/resume", json={"decision": "approve"})
        seen = await _until_approval(client, thread, seen)
        too_long = _long_report(REPORT_MAX_CHARS + 1000)
        refused = await client.post(
            f"/v1/research/{thread}/resume", json={"decision": "edit", "report": too_long}
        )
        assert refused.status_code == 422, refused.text
        edited = _long_report(REPORT_MAX_CHARS - 1000)
        answered = await client.post(
            f"/v1/research/{thread}/resume", json={"decision": "edit", "report": edited}
        )
        assert answered.status_code == 200, answered.text
        await collect(client, f"/v1/research/{thread}/events?after={seen}")

        html = {"Accept": "text/html"}
        answers = await asyncio.gather(
            *(client.get(f"/v1/research/{thread}/report", headers=html) for _ in range(4))
        )
    for answer in answers:
        assert answer.status_code == 200 and answer.text.count("<em>books</em>") > 100


def stamped(markdown: str) -> str:
    """The report's HTML after which process rendered it, and when (one stamp per render)."""
    return f"{os.getpid()} {time.monotonic_ns()} {report_html(markdown)}"


async def test_reports_render_once_each_in_a_process_of_their_own() -> None:
    reports = RenderedReports(kept=2, render=stamped)
    try:
        first, second = _long_report(20_000), _long_report(30_000)
        rendered = await asyncio.gather(*(reports.html(first) for _ in range(5)))
        assert len(set(rendered)) == 1, "five requests, one render"
        assert "<em>books</em>" in rendered[0]
        assert rendered[0].split()[0] != str(os.getpid()), "rendered in another process"
        second_html = await reports.html(second)
        assert await reports.html(first) == rendered[0], "kept"
        await reports.html(_long_report(10_000))  # a third: the oldest (second) goes
        assert await reports.html(second) != second_html, "rendered again"
    finally:
        reports.close()
