"""Read PDF (its text layer, page by page) and Word .docx files into indexable documents.

A PDF page is one document, titled "Title (file.pdf, p. 12)" at `file:///…/file.pdf#page=12`,
so a citation names its page and opens the file there; a .docx section (the text under one
Heading-styled paragraph) is one document titled "Title (file.docx, Heading)". No OCR: a
PDF without a text layer is refused, as are encrypted, malformed, empty and oversized files
and a .docx whose parts would unpack past `MAX_DOCX_UNPACKED_BYTES` (a zip bomb).
"""

import logging
import re
import zipfile
from pathlib import Path

import docx
import pypdf
from docx.opc.exceptions import PackageNotFoundError
from docx.table import Table
from lxml.etree import LxmlError
from pypdf.errors import PyPdfError

from tools.corpus_files import Document, UnreadableFileError

# The largest file read at all, PDF or .docx (bigger ones are listed as skipped).
MAX_DOCUMENT_BYTES = 50 * 1024 * 1024
# The most a .docx's parts may unpack to, together, by their declared sizes (zipfile never
# unpacks a part past its declared size), and the most one part larger than a megabyte may
# be compressed (Word's XML compresses about 10:1; a zip bomb's zeros 1000:1).
MAX_DOCX_UNPACKED_BYTES = 100 * 1024 * 1024
MAX_DOCX_RATIO = 100
MAX_DOCX_PARTS = 2000
# The most pages of one PDF read.
MAX_PDF_PAGES = 2000

PDF_MAGIC = b"%PDF-"
ZIP_MAGIC = b"PK\x03\x04"
# An OLE compound file: what Word writes for a password-protected file, and an old .doc.
OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
_SENTENCE_END = re.compile(r"[.!?:;\"')\]]$")


def sniff(path: Path) -> str | None:
    """Return "pdf" or "docx" by the file's content (magic bytes, the zip's parts), else None."""
    with path.open("rb") as file:
        head = file.read(8)
    if head.startswith(PDF_MAGIC):
        return "pdf"
    if head.startswith(ZIP_MAGIC):
        try:
            with zipfile.ZipFile(path) as archive:
                names = set(archive.namelist())
        except (zipfile.BadZipFile, OSError):
            return None
        if "word/document.xml" in names:
            return "docx"
    return None


def is_ole(path: Path) -> bool:
    """Return whether the file is an OLE compound file (an encrypted Word file, a .doc)."""
    with path.open("rb") as file:
        return file.read(len(OLE_MAGIC)) == OLE_MAGIC


def read_pdf(path: Path) -> list[Document]:
    """Return one document per PDF page with text; raise `UnreadableFileError` saying why not."""
    # pypdf logs what it repairs (a missing EOF marker...) as warnings: the reason a file
    # is skipped is reported instead, once.
    pypdf_log = logging.getLogger("pypdf")
    level = pypdf_log.level
    pypdf_log.setLevel(logging.ERROR)
    try:
        return _read_pdf(path)
    finally:
        pypdf_log.setLevel(level)


def _read_pdf(path: Path) -> list[Document]:
    try:
        reader = pypdf.PdfReader(path)
        if reader.is_encrypted and not reader.decrypt(""):
            raise UnreadableFileError("encrypted PDF (it needs a password)")
        pages = reader.pages
        if len(pages) > MAX_PDF_PAGES:
            raise UnreadableFileError(
                f"{len(pages)} pages, more than the {MAX_PDF_PAGES} read (MAX_PDF_PAGES)"
            )
        meta_title = (reader.metadata.title if reader.metadata else None) or ""
        texts = [_pdf_paragraphs(page.extract_text() or "") for page in pages]
    except UnreadableFileError:
        raise
    except (PyPdfError, ValueError, KeyError, TypeError, AttributeError, OSError) as exc:
        raise UnreadableFileError(f"malformed PDF ({type(exc).__name__}: {exc})") from exc
    if not pages:
        raise UnreadableFileError("PDF without pages")
    if not any(texts):
        raise UnreadableFileError("no text layer (a scanned PDF? OCR is not supported)")
    title = str(meta_title).strip()
    uri = path.resolve().as_uri()
    return [
        Document(
            title=f"{title} ({path.name}, p. {number})" if title else f"{path.name}, p. {number}",
            url=f"{uri}#page={number}",
            text=text,
            file=str(path),
            page=number,
        )
        for number, text in enumerate(texts, start=1)
        if text
    ]


def _pdf_paragraphs(text: str) -> str:
    """Join a page's lines into paragraphs: a line ending a sentence ends its paragraph."""
    paragraphs: list[str] = []
    current: list[str] = []
    for line in (raw.strip() for raw in text.splitlines()):
        if not line:
            if current:
                paragraphs.append(" ".join(current))
                current = []
            continue
        current.append(line)
        if _SENTENCE_END.search(line):
            paragraphs.append(" ".join(current))
            current = []
    if current:
        paragraphs.append(" ".join(current))
    return "\n\n".join(paragraphs)


def check_docx_archive(path: Path) -> None:
    """Raise `UnreadableFileError` unless the .docx zip unpacks within the limits."""
    try:
        with zipfile.ZipFile(path) as archive:
            parts = archive.infolist()
    except (zipfile.BadZipFile, OSError) as exc:
        raise UnreadableFileError(f"malformed .docx (not a readable zip: {exc})") from exc
    if len(parts) > MAX_DOCX_PARTS:
        raise UnreadableFileError(
            f"{len(parts)} zip parts, more than {MAX_DOCX_PARTS} (MAX_DOCX_PARTS)"
        )
    unpacked = sum(part.file_size for part in parts)
    if unpacked > MAX_DOCX_UNPACKED_BYTES:
        raise UnreadableFileError(
            f"refused as a possible zip bomb: its parts unpack to {unpacked:,} bytes, more "
            f"than {MAX_DOCX_UNPACKED_BYTES:,} (MAX_DOCX_UNPACKED_BYTES)"
        )
    for part in parts:
        if part.file_size > 1024 * 1024 and part.file_size > MAX_DOCX_RATIO * max(
            part.compress_size, 1
        ):
            raise UnreadableFileError(
                f"refused as a possible zip bomb: {part.filename} is compressed "
                f"{part.file_size // max(part.compress_size, 1)}:1, more than "
                f"{MAX_DOCX_RATIO}:1 (MAX_DOCX_RATIO)"
            )


def read_docx(path: Path) -> list[Document]:
    """Return one document per heading's section of a .docx; raise `UnreadableFileError`."""
    check_docx_archive(path)
    try:
        document = docx.Document(str(path))
        title = (document.core_properties.title or "").strip()
        sections: list[tuple[str | None, list[str]]] = [(None, [])]
        for block in document.iter_inner_content():
            if isinstance(block, Table):
                rows = (" | ".join(c.text.strip() for c in row.cells) for row in block.rows)
                sections[-1][1].extend(r for r in rows if r.strip(" |"))
                continue
            text = block.text.strip()
            if not text:
                continue
            style = (block.style.name if block.style is not None else "") or ""
            if style == "Title" and not title:
                title = text
            elif style.startswith("Heading"):
                sections.append((text, []))
            else:
                sections[-1][1].append(text)
    except (PackageNotFoundError, zipfile.BadZipFile, LxmlError, KeyError, ValueError) as exc:
        raise UnreadableFileError(f"malformed .docx ({type(exc).__name__}: {exc})") from exc
    uri = path.resolve().as_uri()
    found = [
        Document(
            title=f"{title} ({where})" if title else where,
            url=f"{uri}#section={number}" if heading else uri,
            text="\n\n".join(paragraphs),
            file=str(path),
            heading=heading,
        )
        for number, (heading, paragraphs) in enumerate(sections)
        if paragraphs
        for where in [f"{path.name}, {heading}" if heading else path.name]
    ]
    if not found:
        raise UnreadableFileError("no text (an empty document)")
    return found
