"""Read a folder of documents (.md, .txt, .html, JSON lines, PDF, .docx) into indexable documents.

PDF and Word files are read by `tools.corpus_documents`, recognised by their content.
"""

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from bs4 import BeautifulSoup

_BLOCK_TAGS = ["script", "style", "noscript", "nav", "header", "footer", "aside", "form"]
_FRONT_MATTER = re.compile(r"\A---\n(.*?)\n---\n", re.DOTALL)
_MD_TITLE = re.compile(r"^#\s+(.+)$", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class Document:
    """A unit of the corpus: what a search hit cites."""

    title: str
    url: str
    text: str
    published_date: str | None = None
    # Where it came from: the file read, the PDF page, the .docx heading above it.
    file: str | None = None
    page: int | None = None
    heading: str | None = None


class CorpusFormatError(ValueError):
    """A corpus file could not be read; the message names the file and line."""


class UnreadableFileError(ValueError):
    """A document file cannot be read (encrypted, malformed, empty, ...); the message says why."""


@dataclass(frozen=True, slots=True)
class SkippedFile:
    """A file left out of the corpus, and why."""

    path: Path
    reason: str


_TEXT_SUFFIXES = (".md", ".markdown", ".txt")
_HTML_SUFFIXES = (".html", ".htm")
_DOCUMENT_SUFFIXES = (".pdf", ".docx")
SUPPORTED_SUFFIXES = (".jsonl", *_HTML_SUFFIXES, *_TEXT_SUFFIXES, *_DOCUMENT_SUFFIXES)


def iter_documents(root: Path, skipped: list[SkippedFile] | None = None) -> Iterator[Document]:
    """Yield the documents of a file or of every supported file under a folder, in path order.

    A PDF or .docx file that cannot be read is added to `skipped` with the reason, and the
    rest are read; without a `skipped` list it raises `CorpusFormatError`.
    """
    files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
    for path in files:
        suffix = path.suffix.lower()
        if suffix not in SUPPORTED_SUFFIXES:
            continue
        try:
            documents = _read_document_file(path, suffix)
        except UnreadableFileError as exc:
            if skipped is None:
                raise CorpusFormatError(f"{path}: {exc}") from exc
            skipped.append(SkippedFile(path, str(exc)))
            continue
        if documents is not None:
            yield from documents
            continue
        if suffix == ".jsonl":
            yield from _read_jsonl(path)
        elif suffix in _HTML_SUFFIXES:
            yield _read_html(path)
        else:
            yield _read_text(path)


def _read_document_file(path: Path, suffix: str) -> list[Document] | None:
    """Read a PDF or .docx (by content, whatever its name); None for the other formats."""
    if suffix not in _DOCUMENT_SUFFIXES:
        with path.open("rb") as file:
            if not file.read(5).startswith((b"%PDF-", b"PK")):
                return None  # text: no need to load the PDF and Word readers
    from tools import corpus_documents as documents

    size = path.stat().st_size
    if size == 0 and suffix in _DOCUMENT_SUFFIXES:
        raise UnreadableFileError("empty file")
    kind = documents.sniff(path) if size else None
    if kind is None and suffix == ".docx" and documents.is_ole(path):
        raise UnreadableFileError(
            "an encrypted Word file or an old binary .doc, not a .docx zip (save it as .docx "
            "without a password)"
        )
    if kind is None and suffix in _DOCUMENT_SUFFIXES:
        expected = "%PDF-" if suffix == ".pdf" else "a zip holding word/document.xml"
        raise UnreadableFileError(
            f"not a {suffix[1:].upper()} file (its content is not {expected})"
        )
    if kind is not None and size > documents.MAX_DOCUMENT_BYTES:
        raise UnreadableFileError(
            f"too large: {size:,} bytes, more than {documents.MAX_DOCUMENT_BYTES:,} "
            "(MAX_DOCUMENT_BYTES)"
        )
    if kind is None:
        return None
    try:
        return documents.read_pdf(path) if kind == "pdf" else documents.read_docx(path)
    except UnreadableFileError:
        raise
    except Exception as exc:  # a reader's bug on one odd file must not stop the others
        raise UnreadableFileError(
            f"could not be read as {kind.upper()} ({type(exc).__name__}: {exc})"
        ) from exc


def _read_jsonl(path: Path) -> Iterator[Document]:
    with path.open(encoding="utf-8") as lines:
        for line_no, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                text = row.get("text") or row.get("content") or row.get("extract") or ""
                url = row.get("url") or f"{path.resolve().as_uri()}#L{line_no}"
                title = row.get("title") or url
            except (json.JSONDecodeError, AttributeError) as exc:
                raise CorpusFormatError(f"{path}:{line_no}: not a JSON object ({exc})") from exc
            if text.strip():
                yield Document(
                    title=str(title),
                    url=str(url),
                    text=str(text),
                    published_date=row.get("published_date"),
                    file=str(path),
                )


def _read_text(path: Path) -> Document:
    raw = path.read_text(encoding="utf-8", errors="replace")
    meta: dict[str, str] = {}
    if match := _FRONT_MATTER.match(raw):
        for line in match.group(1).splitlines():
            key, _, value = line.partition(":")
            meta[key.strip().lower()] = value.strip().strip("'\"")
        raw = raw[match.end() :]
    heading = _MD_TITLE.search(raw)
    first_block = raw.strip().split("\n\n", 1)[0].strip()
    if heading:
        title = heading.group(1).strip()
    elif "\n" not in first_block and len(first_block) <= 120:
        title = first_block  # a plain-text file whose first paragraph is a short line
    else:
        title = path.stem.replace("_", " ")
    title = meta.get("title") or title
    return Document(
        title=title,
        url=meta.get("url") or path.resolve().as_uri(),
        text=raw,
        published_date=meta.get("date") or meta.get("published"),
        file=str(path),
    )


def _read_html(path: Path) -> Document:
    soup = BeautifulSoup(path.read_bytes(), "lxml")
    for tag in soup(_BLOCK_TAGS):
        tag.decompose()
    title_tag = soup.find("title")
    heading = soup.find("h1")
    title = (title_tag.get_text(strip=True) if title_tag else "") or (
        heading.get_text(strip=True) if heading else path.stem
    )
    canonical = soup.find("link", rel="canonical")
    href = canonical.get("href") if canonical else None
    body = soup.body or soup
    text = "\n\n".join(
        block.get_text(" ", strip=True)
        for block in body.find_all(["h1", "h2", "h3", "h4", "p", "li", "blockquote", "pre"])
    )
    return Document(
        title=title, url=str(href) if href else path.resolve().as_uri(), text=text, file=str(path)
    )


class UnsupportedFileError(ValueError):
    """A file whose content is none of the formats read (whatever its name says)."""


# The formats an uploaded file may be, told by its content.
UPLOAD_KINDS = ("pdf", "docx", "html", "text")
_HTML_START = re.compile(rb"^\s*(<!doctype html|<html|<head|<body)", re.IGNORECASE)


def upload_kind(path: Path) -> str:
    """Return the kind of a file by its content: pdf, docx, html or text.

    Raise `UnreadableFileError` for an empty file or an encrypted Word file, and
    `UnsupportedFileError` for anything else that is neither a PDF, a .docx nor UTF-8 text.
    """
    from tools import corpus_documents as documents

    if path.stat().st_size == 0:
        raise UnreadableFileError("empty file")
    kind = documents.sniff(path)
    if kind is not None:
        return kind
    if documents.is_ole(path):
        raise UnreadableFileError(
            "an encrypted Word file or an old binary .doc, not a .docx zip (save it as .docx "
            "without a password)"
        )
    with path.open("rb") as file:
        head = file.read(64 * 1024)
    if head.startswith(documents.ZIP_MAGIC):
        raise UnsupportedFileError("a zip archive that is not a .docx (no word/document.xml)")
    try:
        (head[: len(head) - 3] if len(head) == 64 * 1024 else head).decode("utf-8")
    except UnicodeDecodeError:
        raise UnsupportedFileError(
            "its content is not a PDF, a .docx or UTF-8 text (the name does not decide)"
        ) from None
    if b"\x00" in head:
        raise UnsupportedFileError("binary content, not a PDF, a .docx or UTF-8 text")
    return "html" if _HTML_START.match(head) else "text"


def read_upload(path: Path) -> tuple[str, list[Document]]:
    """Return a file's kind (told by its content) and its documents, read as `corpus index` reads them.

    Raise `UnreadableFileError` (malformed, encrypted, empty, oversized, a zip bomb) or
    `UnsupportedFileError` (not a format read).
    """
    kind = upload_kind(path)
    if kind in ("pdf", "docx"):
        found = _read_document_file(path, f".{kind}")
        assert found is not None  # a PDF or .docx by content is read, or refused
        return kind, found
    document = _read_html(path) if kind == "html" else _read_text(path)
    if not document.text.strip():
        raise UnreadableFileError("no text (an empty document)")
    return kind, [document]
