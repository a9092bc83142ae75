"""Read a folder of documents (.md, .txt, .html, JSON lines) into indexable documents."""

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


class CorpusFormatError(ValueError):
    """A corpus file could not be read; the message names the file and line."""


def iter_documents(root: Path) -> Iterator[Document]:
    """Yield the documents of a file or of every supported file under a folder, in path order."""
    files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
    for path in files:
        suffix = path.suffix.lower()
        if suffix == ".jsonl":
            yield from _read_jsonl(path)
        elif suffix in (".html", ".htm"):
            yield _read_html(path)
        elif suffix in (".md", ".markdown", ".txt"):
            yield _read_text(path)


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
    return Document(title=title, url=str(href) if href else path.resolve().as_uri(), text=text)
