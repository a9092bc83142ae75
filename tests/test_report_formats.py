"""The report downloaded whole: an HTML document, Word and PDF files, over a live server."""

import base64
import hashlib
import io
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import docx
import httpx
import pypdf
import pytest
from bs4 import BeautifulSoup
from docx.oxml.ns import qn

from app.report_docx import report_docx
from app.report_formats import negotiate
from app.report_html import DOCUMENT_POLICY, report_document
from app.settings import Settings
from service.errors import NotAcceptable

from .servers import KEY_A, KEY_B, two_key_clients
from .sse import collect
from .support import TOPIC, needs_weasyprint

STANDALONE = {"Accept": "text/html; profile=standalone"}


@asynccontextmanager
async def _served(
    tmp_path: Path, corpus_index: Path
) -> AsyncIterator[tuple[httpx.AsyncClient, httpx.AsyncClient]]:
    """A live server searching the demo corpus, with a client for each of two keys."""
    settings = Settings(
        data_dir=tmp_path / "data",
        corpus_index=corpus_index,
        search_provider="local",
        api_keys=[KEY_A, KEY_B],
    )
    async with two_key_clients(settings) as clients:
        yield clients


async def _researched(client: httpx.AsyncClient, topic: str) -> str:
    """Run research on `topic` to its end; return the thread's id."""
    started = await client.post("/v1/research", json={"topic": topic})
    assert started.status_code == 202, started.text
    thread_id = str(started.json()["thread_id"])
    await collect(client, f"/v1/research/{thread_id}/events")
    return thread_id


async def _exported(
    tmp_path: Path, corpus_index: Path, media_type: str, suffix: str
) -> tuple[dict[str, Any], httpx.Response]:
    """Research a topic with a CJK title; its report as JSON, and as `media_type`, checked
    to come as an attachment named `report-{id}.{suffix}`."""
    async with _served(tmp_path, corpus_index) as (client, _):
        thread_id = await _researched(client, "印刷术 printing press")
        url = f"/v1/research/{thread_id}/report"
        as_json = (await client.get(url, headers={"Accept": "application/json"})).json()
        answer = await client.get(url, headers={"Accept": media_type})
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"] == media_type
    disposition = f'attachment; filename="report-{thread_id}.{suffix}"'
    assert answer.headers["content-disposition"] == disposition
    return as_json, answer


def _sources(client_json: dict[str, object]) -> list[str]:
    sources = client_json["sources"]
    assert isinstance(sources, list)
    return [str(s["url"]) for s in sources]


def _check_document(text: str, urls: list[str]) -> BeautifulSoup:
    """Check a standalone report: whole, titled, summarised, its footnotes linked; return it parsed."""
    assert text.startswith("<!DOCTYPE html>")
    soup = BeautifulSoup(text, "html.parser")
    assert soup.html is not None and soup.head is not None and soup.body is not None
    assert soup.title is not None and soup.h1 is not None
    assert soup.title.get_text() == soup.h1.get_text().strip()
    assert soup.select_one("p.report-summary") is not None
    assert soup.select("h2"), "the sections"
    marks = soup.select("sup.footnote-ref a")
    assert marks, "the report cites"
    for mark in marks:
        target = str(mark["href"]).removeprefix("#")
        assert soup.find(id=target) is not None, f"footnote {mark['href']} links nowhere"
    cited = {int(str(m["href"]).removeprefix("#fn")) for m in marks}
    for n in cited:
        item = soup.find(id=f"fn{n}")
        assert item is not None
        url = urls[n - 1]
        links = [str(a["href"]) for a in item.select("a[href]")]
        # A web page's URL is a link; a local file's (file://) shows as its path, not a link.
        assert url in links if url.startswith("http") else url in item.get_text(), (n, url)
    return soup


async def test_the_standalone_report_is_a_whole_document_whose_footnotes_link_the_references(
    tmp_path: Path, corpus_index: Path
) -> None:
    async with _served(tmp_path, corpus_index) as (client, _):
        thread_id = await _researched(client, TOPIC)
        url = f"/v1/research/{thread_id}/report"
        as_json = (await client.get(url, headers={"Accept": "application/json"})).json()
        by_profile = await client.get(url, headers=STANDALONE)
        by_query = await client.get(url, params={"standalone": "1"})
        fragment = await client.get(url, headers={"Accept": "text/html"})
        markdown = await client.get(url)
    assert by_profile.status_code == 200, by_profile.text
    assert by_profile.headers["content-type"] == "text/html; charset=utf-8"
    assert by_query.text == by_profile.text
    assert not fragment.text.startswith("<!DOCTYPE"), "text/html alone stays the fragment"
    assert markdown.headers["content-type"].startswith("text/markdown")
    soup = _check_document(by_profile.text, _sources(as_json))
    assert soup.title is not None and soup.title.get_text().lower() == TOPIC.lower()
    # Its own policy allows its style, by hash, and nothing else: a browser applies the style.
    policy = by_profile.headers["content-security-policy"]
    assert policy == DOCUMENT_POLICY and "script-src" not in policy
    assert soup.style is not None
    digest = hashlib.sha256(soup.style.get_text().encode()).digest()
    assert f"'sha256-{base64.b64encode(digest).decode()}'" in policy


@pytest.mark.parametrize(
    ("topic", "lang", "direction"),
    [("印刷术 printing press", "zh", "ltr"), ("تاريخ الطباعة printing press", "ar", "rtl")],
)
async def test_a_cjk_or_arabic_title_sets_the_documents_language_and_direction(
    tmp_path: Path, corpus_index: Path, topic: str, lang: str, direction: str
) -> None:
    async with _served(tmp_path, corpus_index) as (client, _):
        thread_id = await _researched(client, topic)
        url = f"/v1/research/{thread_id}/report"
        as_json = (await client.get(url, headers={"Accept": "application/json"})).json()
        document = await client.get(url, headers=STANDALONE)
    soup = _check_document(document.text, _sources(as_json))
    assert soup.html is not None and soup.title is not None
    assert (soup.html.get("lang"), soup.html.get("dir")) == (lang, direction)
    assert soup.title.get_text() == topic, "the script arrives whole (UTF-8)"
    assert soup.h1 is not None and soup.h1.get("dir") == direction
    # Each block takes its own first letter's direction: the English sections stay ltr.
    assert [h.get("dir") for h in soup.select("article h2")] == ["ltr"] * len(soup.select("h2"))


HOSTILE = """---
topic: "</title><script>alert(1)</script>"
status: final
---

# </title><script>alert('title')</script> <img src=x onerror=alert(2)>

A claim <script>alert(3)</script> with [a link](javascript:alert(4)) and
<a href="javascript:alert(5)" onclick="alert(6)">raw</a>.[^1]

<iframe src="https://evil.example"></iframe>

## References

[^1]: [Source](javascript:alert(7)) and [real](https://example.org/a?x=1&y=<b>)
"""


def test_a_reports_text_cannot_put_script_into_the_document() -> None:
    text = report_document(HOSTILE)
    soup = BeautifulSoup(text, "html.parser")
    assert soup.find_all(["script", "iframe", "img", "object", "embed"]) == []
    for tag in soup.find_all(True):
        for name, value in tag.attrs.items():
            assert not name.startswith("on"), (tag.name, name)
            assert "javascript:" not in str(value).lower(), (tag.name, name, value)
    assert soup.title is not None
    assert (
        soup.title.get_text()
        == "</title><script>alert('title')</script> <img src=x onerror=alert(2)>"
    )
    assert "<script>alert(3)</script>" in soup.get_text(), "shown as the text it is"
    assert soup.select_one("section.footnotes a[href^='https://example.org/a']") is not None


@pytest.mark.parametrize(
    ("accept", "standalone"),
    [
        ("image/png", False),
        ("text/markdown;q=0, application/json;q=0", False),
        ("application/json", True),
    ],
)
def test_a_format_not_offered_is_refused_naming_the_formats_offered(
    accept: str, standalone: bool
) -> None:
    with pytest.raises(NotAcceptable) as refused:
        negotiate(accept, standalone)
    assert "text/html; profile=standalone" in refused.value.details["offered"]
    assert "ask for one of these" in refused.value.message


@pytest.mark.parametrize(
    ("accept", "chosen"),
    [
        ("", "markdown"),
        ("*/*", "markdown"),
        ("not a media type", "markdown"),
        ("text/html", "html"),
        ('text/html; profile="standalone"', "standalone"),
        ("text/html,application/xhtml+xml,*/*;q=0.8", "html"),
        ("*/*, text/markdown;q=0", "json"),
        ("text/html;q=0.5, application/json;q=0.9", "json"),
    ],
)
def test_accept_picks_the_format_by_weight_and_specificity(accept: str, chosen: str) -> None:
    assert negotiate(accept).name == chosen


async def test_report_formats_are_refused_clearly_and_another_keys_report_is_not_found(
    tmp_path: Path, corpus_index: Path
) -> None:
    async with _served(tmp_path, corpus_index) as (a, b):
        thread_id = await _researched(a, TOPIC)
        url = f"/v1/research/{thread_id}/report"
        refused = await a.get(url, headers={"Accept": "image/png"})
        not_standalone = await a.get(
            url, params={"standalone": "1"}, headers={"Accept": "application/json"}
        )
        theirs = [
            await b.get(url, headers=STANDALONE),
            await b.get(url, params={"standalone": "1"}),
            await b.get(url, headers={"Accept": "image/png"}),
            await b.get(url, headers={"Accept": DOCX_TYPE}),
            await b.get(url, headers={"Accept": "application/pdf"}),
        ]
        mine = await a.get(url, headers={"Accept": "application/pdf"})
    assert refused.status_code == 406, refused.text
    error = refused.json()["error"]
    assert error["code"] == "not_acceptable" and "application/json" in error["details"]["offered"]
    assert "text/html; profile=standalone" in error["message"]
    assert not_standalone.status_code == 406
    assert "drop ?standalone=1" in not_standalone.json()["error"]["message"]
    assert [r.status_code for r in theirs] == [404] * 5, "another key's thread, in any format"
    assert all(r.json()["error"]["code"] == "not_found" for r in theirs)
    assert mine.status_code in (200, 406), (
        "the owner gets the PDF (406 only where Pango is missing)"
    )


DOCX_TYPE = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"


def _cited(markdown: str) -> set[int]:
    """Return the numbers of the footnotes the report's text cites."""
    return {int(n) for n in re.findall(r"\[\^(\d+)\](?!:)", markdown)}


async def test_the_report_as_word_holds_its_headings_every_citation_and_every_reference_url(
    tmp_path: Path, corpus_index: Path
) -> None:
    as_json, answer = await _exported(tmp_path, corpus_index, DOCX_TYPE, "docx")
    document = docx.Document(io.BytesIO(answer.content))
    markdown = as_json["report"]
    headings = [(p.style.name if p.style is not None else "", p.text) for p in document.paragraphs]
    wanted = [
        (
            "Title" if line.startswith("# ") else f"Heading {line.index(' ') - 1}",
            line.split(" ", 1)[1],
        )
        for line in markdown.splitlines()
        if re.match(r"#{1,6} ", line)
    ]
    assert [h for h in headings if h[0] == "Title" or h[0].startswith("Heading")] == wanted
    assert document.core_properties.title == "印刷术 printing press"
    texts = [p.text for p in document.paragraphs]
    body = "\n".join(texts[: texts.index("References")])
    cited = _cited(markdown)
    assert cited and all(f"[{n}]" in body for n in cited), "every citation mark, in the text"
    links = [h.address for p in document.paragraphs for h in p.hyperlinks]
    for n in cited:
        source = _sources(as_json)[n - 1]
        reference = next(p for p in document.paragraphs if p.text.startswith(f"[{n}] "))
        if source.startswith("http"):
            assert source in links and source in reference.text, (n, source)
        else:
            assert source in reference.text, (n, source)


def test_a_right_to_left_report_is_right_to_left_in_word() -> None:
    document = docx.Document(
        io.BytesIO(
            report_docx("# تاريخ الطباعة\n\nنص.[^1]\n\n[^1]: [مصدر](https://example.org/a)\n")
        )
    )
    assert all(
        p._p.pPr is not None and p._p.pPr.find(qn("w:bidi")) is not None
        for p in document.paragraphs
    )
    assert [h.address for p in document.paragraphs for h in p.hyperlinks] == [
        "https://example.org/a"
    ]


def _pdf_text(content: bytes) -> tuple[str, list[str], set[str]]:
    """Return a PDF's text, its link annotations' URIs and the names of its fonts."""
    reader = pypdf.PdfReader(io.BytesIO(content))
    text = "\n".join(page.extract_text() for page in reader.pages)
    uris, fonts = [], set()
    for page in reader.pages:
        for annotation in page.get("/Annots") or []:
            action = annotation.get_object().get("/A")
            if action is not None and "/URI" in action:
                uris.append(str(action["/URI"]))
        resources = page["/Resources"].get_object()
        for font in (resources.get("/Font") or {}).values():
            fonts.add(str(font.get_object()["/BaseFont"]))
    return text, uris, fonts


@needs_weasyprint
async def test_the_report_as_pdf_holds_its_headings_every_citation_and_every_reference_url(
    tmp_path: Path, corpus_index: Path
) -> None:
    as_json, answer = await _exported(tmp_path, corpus_index, "application/pdf", "pdf")
    text, uris, fonts = _pdf_text(answer.content)
    markdown = as_json["report"]
    lines = [line.strip() for line in text.splitlines()]
    for heading in re.findall(r"^#{1,6} (.+)$", markdown, re.MULTILINE):
        assert heading in lines, heading
    joined = "".join(text.split())  # a long URL wraps
    cited = _cited(markdown)
    assert cited and all(f"[{n}]" in joined for n in cited), "every citation mark"
    for n in cited:
        source = _sources(as_json)[n - 1]
        assert "".join(source.split()) in joined, (n, source)
        if source.startswith("http"):
            assert source in uris, f"reference {n} is a link"
    # The CJK title is drawn with a font that has its glyphs (not DejaVu, which has none).
    assert "印刷术" in text
    assert any(re.search(r"WenQuanYi|CJK|Droid.*Fallback", f) for f in fonts), fonts


async def test_without_pango_the_service_runs_and_a_pdf_is_a_406_saying_what_to_install(
    tmp_path: Path, corpus_index: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What WeasyPrint's import raises where Pango is not installed, in the renderer's
    # process (spawned with this sys.path): the rest of the service is untouched.
    missing = tmp_path / "no_pango" / "weasyprint"
    missing.mkdir(parents=True)
    (missing / "__init__.py").write_text(
        "raise OSError(\"cannot load library 'libpango-1.0-0': libpango-1.0-0: "
        'cannot open shared object file: No such file or directory")\n'
    )
    monkeypatch.syspath_prepend(str(missing.parent))
    async with _served(tmp_path, corpus_index) as (client, _):
        thread_id = await _researched(client, TOPIC)
        url = f"/v1/research/{thread_id}/report"
        pdf = await client.get(url, headers={"Accept": "application/pdf"})
        word = await client.get(url, headers={"Accept": DOCX_TYPE})
        ready = await client.get("/readyz")
    assert pdf.status_code == 406, pdf.text
    error = pdf.json()["error"]
    assert error["code"] == "not_acceptable"
    assert "apt-get install libpango-1.0-0" in error["message"]
    assert "pip install 'research-agent[pdf]'" in error["message"]
    assert "application/pdf" not in error["details"]["offered"]
    assert DOCX_TYPE in error["details"]["offered"]
    assert word.status_code == 200 and ready.status_code == 200
