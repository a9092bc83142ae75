"""PDF and Word files in the local corpus: read, indexed, searched, cited by page and heading."""

import io
import re
import sqlite3
import zipfile
from contextlib import closing
from pathlib import Path
from urllib.parse import unquote, urlsplit

import docx
import pypdf
import pytest

from engines.extractive import ExtractiveEngine
from engines.report_markdown import cited_sentences, footnote_urls, split_front_matter
from graph.builder import ResearchGraph
from nodes.context import Deps
from tools import corpus_documents
from tools.corpus_files import CorpusFormatError, SkippedFile, iter_documents
from tools.local_corpus import LocalCorpus, build_index

from .support import needs_weasyprint, run_graph, start

# Known text on known pages of the report the tests print.
PAGES = [
    "Lighthouse keepers kept written logs of every ship that passed the headland. "
    "The logs of the northern stations survive in the county archive.",
    "The Fresnel lens was first installed in the Cordouan lighthouse in 1823. "
    "Its rings of prisms bend the light of one lamp into a beam seen twenty miles away. "
    "The Fresnel lens made lighthouse beams far brighter than mirrors had.",
    "Fog signals warned ships when the lighthouse beam could not be seen. "
    "Early fog signals were bells and cannon; later lighthouses used steam sirens.",
]
TOPIC = "history of lighthouses"


def pdf_bytes(pages: list[str], title: str = "Annual report 2025") -> bytes:
    import weasyprint

    body = "".join(
        f'<section style="page-break-after: always"><p>{text}</p></section>' for text in pages
    )
    html = f"<html><head><title>{title}</title></head><body>{body}</body></html>"
    return weasyprint.HTML(string=html).write_pdf()  # type: ignore[no-any-return]


def write_docx(path: Path) -> None:
    document = docx.Document()
    document.add_paragraph("Keeper's handbook", style="Title")
    document.add_paragraph("This handbook is for the keepers of the coastal stations.")
    document.add_heading("Lamp care", level=1)
    document.add_paragraph("Trim the wick of the lamp every four hours through the night.")
    document.add_heading("Fog signals", level=1)
    document.add_paragraph("Sound the fog horn twice a minute while the fog lasts.")
    document.save(str(path))


@pytest.fixture
def documents(tmp_path: Path) -> Path:
    folder = tmp_path / "documents"
    folder.mkdir()
    (folder / "report.pdf").write_bytes(pdf_bytes(PAGES))
    write_docx(folder / "handbook.docx")
    (folder / "notes.md").write_text(
        "# Lighthouse notes\n\nA lighthouse is a tower with a light that guides ships.\n"
    )
    return folder


def page_text(pdf: Path, page: int) -> str:
    text = pypdf.PdfReader(pdf).pages[page - 1].extract_text() or ""
    return " ".join(text.split())


@needs_weasyprint
def test_pdf_pages_and_docx_headings_are_read_as_documents(documents: Path) -> None:
    read = list(iter_documents(documents))
    pdf = [d for d in read if d.file and d.file.endswith("report.pdf")]
    assert [d.page for d in pdf] == [1, 2, 3]
    assert pdf[1].title == "Annual report 2025 (report.pdf, p. 2)"
    assert pdf[1].url == (documents / "report.pdf").resolve().as_uri() + "#page=2"
    assert "Cordouan lighthouse in 1823" in " ".join(pdf[1].text.split())
    assert "Cordouan" not in pdf[0].text + pdf[2].text

    word = {d.heading: d for d in read if d.file and d.file.endswith("handbook.docx")}
    assert set(word) == {None, "Lamp care", "Fog signals"}
    assert word["Fog signals"].title == "Keeper's handbook (handbook.docx, Fog signals)"
    assert word["Fog signals"].text == "Sound the fog horn twice a minute while the fog lasts."
    assert word[None].title == "Keeper's handbook (handbook.docx)"
    assert "Trim the wick" in word["Lamp care"].text and "fog" not in word["Lamp care"].text


@needs_weasyprint
def test_a_search_hit_in_a_pdf_or_docx_names_its_page_or_heading(
    documents: Path, tmp_path: Path
) -> None:
    build_index(iter_documents(documents), tmp_path / "index.sqlite")
    corpus = LocalCorpus(tmp_path / "index.sqlite")
    hit = corpus.search_sync("Fresnel lens Cordouan", 1)[0]
    assert hit.title == "Annual report 2025 (report.pdf, p. 2)"
    assert hit.url.endswith("/report.pdf#page=2")
    assert "Cordouan lighthouse in 1823" in page_text(documents / "report.pdf", 2)
    assert "Cordouan lighthouse in 1823" in " ".join(hit.content.split())
    horn = corpus.search_sync("fog horn twice a minute", 1)[0]
    assert horn.title == "Keeper's handbook (handbook.docx, Fog signals)"
    corpus.close()
    # Each passage keeps its file, page and heading in the index.
    with closing(sqlite3.connect(tmp_path / "index.sqlite")) as db:
        rows = db.execute("SELECT file, page, heading, body FROM passages").fetchall()
    where = {(Path(f).name, p, h) for f, p, h, _ in rows}
    assert {("report.pdf", 2, None), ("handbook.docx", None, "Fog signals")} <= where
    assert ("notes.md", None, None) in where
    assert all("Cordouan" not in b for f, p, _, b in rows if f.endswith(".pdf") and p != 2)


@needs_weasyprint
async def test_a_research_over_documents_cites_the_page_its_sentence_is_on(
    documents: Path, tmp_path: Path, graph: ResearchGraph
) -> None:
    build_index(iter_documents(documents), tmp_path / "index.sqlite")
    corpus = LocalCorpus(tmp_path / "index.sqlite")
    deps = Deps(engine=ExtractiveEngine(), search=corpus)
    values = await run_graph(graph, deps, "documents", start(TOPIC, max_iterations=3))
    corpus.close()
    _, body = split_front_matter(values["final_report"])
    urls = footnote_urls(body)
    pages = {n: int(u.rsplit("#page=", 1)[1]) for n, u in urls.items() if "#page=" in u}
    assert pages, f"no PDF page is cited:\n{body}"
    assert len(set(pages.values())) > 1, "the pages are told apart: each is its own source"
    checked = 0
    for sentence, refs in cited_sentences(body):
        for ref in refs:
            if ref not in pages:
                continue
            path = Path(unquote(urlsplit(urls[ref]).path))
            # Without its footnotes and a finding's bold label ("**Annual report 2025:** ").
            claim = re.sub(r"\[\^\d+\]|^[-*\s]*\*\*[^*]+:\*\*", "", sentence)
            claim = " ".join(claim.split())
            assert claim in page_text(path, pages[ref]), (claim, pages[ref])
            checked += 1
    assert checked
    # The references name the file and the page.
    assert re.search(r"Annual report 2025 \(report\.pdf, p\. \d\)", body)


def encrypted_pdf() -> bytes:
    writer = pypdf.PdfWriter()
    writer.append(pypdf.PdfReader(io.BytesIO(pdf_bytes(["Secret text of the board."]))))
    writer.encrypt("password")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def blank_pdf() -> bytes:
    writer = pypdf.PdfWriter()
    writer.add_blank_page(width=595, height=842)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def zip_of(path: Path, size: int, level: int = 9) -> None:
    """A .docx-shaped zip whose document.xml unpacks to `size` bytes of zeros."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=level) as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        with archive.open("word/document.xml", "w", force_zip64=True) as part:
            chunk = b"\0" * (1024 * 1024)
            for _ in range(size // len(chunk)):
                part.write(chunk)


@needs_weasyprint
def test_unreadable_files_are_listed_with_reasons_and_the_rest_indexed(
    documents: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (documents / "encrypted.pdf").write_bytes(encrypted_pdf())
    (documents / "malformed.pdf").write_bytes(b"%PDF-1.7\n1 0 obj <<\ntruncated")
    (documents / "empty.pdf").write_bytes(b"")
    (documents / "scanned.pdf").write_bytes(blank_pdf())
    (documents / "renamed.pdf").write_text("Just text, named as a PDF.")
    empty_word = docx.Document()
    empty_word.save(str(documents / "empty.docx"))
    with (
        zipfile.ZipFile(documents / "handbook.docx") as good,
        zipfile.ZipFile(documents / "garbled.docx", "w") as garbled,
    ):
        for part in good.infolist():
            xml = b"<w:document><<<" if part.filename == "word/document.xml" else None
            garbled.writestr(part, xml or good.read(part))
    (documents / "locked.docx").write_bytes(corpus_documents.OLE_MAGIC + b"\0" * 504)
    with zipfile.ZipFile(documents / "other.docx", "w") as archive:
        archive.writestr("content.xml", "<not-word/>")
    big = documents / "big.pdf"
    big.write_bytes(pdf_bytes(PAGES * 40))
    smaller = max((documents / n).stat().st_size for n in ("report.pdf", "handbook.docx"))
    assert big.stat().st_size > smaller
    monkeypatch.setattr(corpus_documents, "MAX_DOCUMENT_BYTES", smaller)

    skipped: list[SkippedFile] = []
    read = list(iter_documents(documents, skipped))
    reasons = {s.path.name: s.reason for s in skipped}
    assert set(reasons) == {
        "encrypted.pdf",
        "malformed.pdf",
        "empty.pdf",
        "scanned.pdf",
        "renamed.pdf",
        "empty.docx",
        "garbled.docx",
        "locked.docx",
        "other.docx",
        "big.pdf",
    }
    assert "encrypted" in reasons["encrypted.pdf"] and "password" in reasons["encrypted.pdf"]
    assert reasons["malformed.pdf"].startswith("malformed PDF")
    assert reasons["empty.pdf"] == "empty file"
    assert "no text layer" in reasons["scanned.pdf"]
    assert "not a PDF" in reasons["renamed.pdf"] and "%PDF-" in reasons["renamed.pdf"]
    assert "empty document" in reasons["empty.docx"]
    assert reasons["garbled.docx"].startswith("malformed .docx (XMLSyntaxError")
    assert reasons["locked.docx"].startswith("an encrypted Word file")
    assert "not a DOCX" in reasons["other.docx"] and "word/document.xml" in reasons["other.docx"]
    assert "too large" in reasons["big.pdf"] and "MAX_DOCUMENT_BYTES" in reasons["big.pdf"]
    assert {Path(d.file or "").name for d in read} == {"report.pdf", "handbook.docx", "notes.md"}
    # Without a list to note them in, an unreadable file is an error naming it.
    with pytest.raises(CorpusFormatError, match=r"encrypted\.pdf: encrypted PDF"):
        list(iter_documents(documents / "encrypted.pdf"))


def test_a_zip_bomb_named_docx_is_refused_before_it_is_unpacked(tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.docx"
    zip_of(bomb, corpus_documents.MAX_DOCX_UNPACKED_BYTES + 1024 * 1024)
    assert bomb.stat().st_size < 1024 * 1024
    dense = tmp_path / "dense.docx"
    zip_of(dense, 8 * 1024 * 1024)
    skipped: list[SkippedFile] = []
    assert list(iter_documents(tmp_path, skipped)) == []
    reasons = {s.path.name: s.reason for s in skipped}
    assert "zip bomb" in reasons["bomb.docx"] and "MAX_DOCX_UNPACKED_BYTES" in reasons["bomb.docx"]
    assert "zip bomb" in reasons["dense.docx"] and "MAX_DOCX_RATIO" in reasons["dense.docx"]


def test_a_pdf_is_known_by_its_content_not_its_name(tmp_path: Path) -> None:
    (tmp_path / "report.txt").write_bytes(blank_pdf())
    skipped: list[SkippedFile] = []
    assert list(iter_documents(tmp_path, skipped)) == []
    assert [s.reason for s in skipped] == ["no text layer (a scanned PDF? OCR is not supported)"]


@needs_weasyprint
def test_a_reader_failing_on_one_file_leaves_the_others_indexed(
    documents: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def deep(path: Path) -> list[object]:
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(corpus_documents, "read_pdf", deep)
    skipped: list[SkippedFile] = []
    read = list(iter_documents(documents, skipped))
    assert [(s.path.name, s.reason) for s in skipped] == [
        (
            "report.pdf",
            "could not be read as PDF (RecursionError: maximum recursion depth exceeded)",
        )
    ]
    assert {Path(d.file or "").name for d in read} == {"handbook.docx", "notes.md"}
