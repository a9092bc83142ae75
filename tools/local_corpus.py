"""The `local` search provider: an embedded SQLite FTS5 index over a folder of documents.

FTS5 ships with Python, is as fast as tantivy or bm25s at this size (bench/local_search.py),
and keeps the index in one ordinary file.
"""

import asyncio
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from tools.corpus_files import Document
from tools.search import Depth, SearchError, SearchHit
from tools.text import (
    FORM_WORDS,
    STOPWORDS,
    content_words,
    fold,
    movement_forms,
    number_forms,
    stem,
    without_possessive,
    words,
)

PASSAGE_CHARS = 1500
_SCHEMA = """
CREATE VIRTUAL TABLE passages USING fts5(
    title, body, url UNINDEXED, published UNINDEXED,
    file UNINDEXED, page UNINDEXED, heading UNINDEXED,
    tokenize = 'porter unicode61 remove_diacritics 2'
);
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""
# Title matches count three times as much as body matches.
_RANK = "bm25(passages, 3.0, 1.0)"
# The longest run of a query's words looked up as an article's title, and how many
# titles sharing its stems are compared with it ("Socialism" among the "Social ..." ones).
TITLE_WORDS = 4
TITLE_LOOKUP = 100
# A title's disambiguation: "Go (game)" is named "Go".
_DISAMBIGUATION = re.compile(r"\s*\(.*?\)\s*$")
# Rows of a BM25 tier read before they are ranked again by the words as written
# (`_ranked_as_written`): enough that the stemmer's false friends do not crowd out the rest.
RERANKED = 100


# A ranked passage: title, body, URL, publication date, BM25 relevance (higher is better).
Row = tuple[str, str, str, str | None, float]


class CorpusMissingError(SearchError):
    """No index where the settings point; the message says how to make one."""


def require_index(index_path: Path) -> None:
    """Raise `CorpusMissingError`, saying how to make one, when there is no index file."""
    if not index_path.is_file():
        raise CorpusMissingError(
            f"no corpus index at {index_path}: run `research-agent corpus demo` "
            "or `research-agent corpus index PATH`"
        )


@dataclass(frozen=True, slots=True)
class IndexStats:
    """What `build_index` did."""

    documents: int
    passages: int
    seconds: float


def split_passages(text: str, limit: int = PASSAGE_CHARS) -> Iterator[str]:
    """Cut long text at paragraph boundaries into passages of about `limit` characters."""
    current: list[str] = []
    size = 0
    for paragraph in (p.strip() for p in text.split("\n\n")):
        if not paragraph:
            continue
        if current and size + len(paragraph) > limit:
            yield "\n\n".join(current)
            current, size = [], 0
        current.append(paragraph)
        size += len(paragraph)
    if current:
        yield "\n\n".join(current)


def build_index(documents: Iterable[Document], index_path: Path) -> IndexStats:
    """Write a fresh index of `documents` to `index_path`, replacing any old one atomically."""
    started = time.perf_counter()
    index_path.parent.mkdir(parents=True, exist_ok=True)
    partial = index_path.with_name(index_path.name + ".partial")
    partial.unlink(missing_ok=True)
    docs = passages = 0
    with sqlite3.connect(partial) as db:
        db.executescript(_SCHEMA)
        for doc in documents:
            docs += 1
            for passage in split_passages(doc.text):
                passages += 1
                db.execute(
                    "INSERT INTO passages (title, body, url, published, file, page, heading) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (
                        doc.title,
                        passage,
                        doc.url,
                        doc.published_date,
                        doc.file,
                        doc.page,
                        doc.heading,
                    ),
                )
        db.execute("INSERT INTO passages (passages) VALUES ('optimize')")
        db.executemany(
            "INSERT INTO meta VALUES (?, ?)",
            [("documents", str(docs)), ("passages", str(passages)), ("built_at", str(time.time()))],
        )
    db.close()
    partial.replace(index_path)
    return IndexStats(documents=docs, passages=passages, seconds=time.perf_counter() - started)


def query_terms(query: str) -> list[str]:
    """Return the content words of a query, once each, safe to quote in FTS5.

    A possessive loses its "'s": the index splits "DNA's" into "dna" and "s", so the
    quoted word would ask for that two-word phrase and miss every text that says "DNA".
    """
    found = (without_possessive(w).replace('"', "") for w in content_words(query))
    return [t for t in dict.fromkeys(found) if t]


def term_forms(term: str) -> list[str]:
    """Return the forms a query word is found by: itself and its family's other word.

    The other word of a movement, or of an irregular noun's number: the index's Porter
    stemmer keeps "existentialist" apart from "existentialism" and "leaves" apart from
    "leaf", and a query for either finds the other too.
    """
    single = fold(term)
    movement = [f for f in movement_forms(single) or () if f != single]
    number = [f for f in number_forms(term) or () if f != term.lower()]
    return [term, *dict.fromkeys(movement + number)]


def match_expression(terms: list[str], operator: str) -> str:
    """Return an FTS5 query of quoted terms (each with its `term_forms`) joined by AND or OR."""
    groups = (" OR ".join(f'"{f}"' for f in term_forms(t)) for t in terms)
    return f" {operator} ".join(g if " OR " not in g else f"({g})" for g in groups)


class LocalCorpus:
    """Search an index built by `build_index`; thread-safe, queries run off the event loop."""

    name = "local"

    def __init__(self, index_path: Path) -> None:
        require_index(index_path)
        self.index_path = index_path
        self._db = sqlite3.connect(
            f"{index_path.as_uri()}?mode=ro", uri=True, check_same_thread=False
        )
        self._lock = threading.Lock()

    def close(self) -> None:
        """Release the database handle."""
        self._db.close()

    def stats(self) -> dict[str, str]:
        """Metadata written at build time."""
        with self._lock:
            return dict(self._db.execute("SELECT key, value FROM meta").fetchall())

    def _ranked(self, expression: str, limit: int) -> list[Row]:
        with self._lock:
            rows = self._db.execute(
                f"SELECT title, body, url, published, {_RANK} AS rank FROM passages "
                "WHERE passages MATCH ? ORDER BY rank LIMIT ?",
                (expression, limit),
            ).fetchall()
        return [(t, b, u, p, -r) for t, b, u, p, r in rows]

    def _ranked_as_written(self, expression: str, terms: list[str], limit: int) -> list[Row]:
        """Rank like `_ranked`, but count a query word matched only through its stem at half.

        BM25 over stems makes one word of "capitalism" and "capital", and ranks capital
        cities above Karl Marx for "capitalism socialism"; this boosts the words as written.
        """
        # Per query word: as written (plurals aside), and any word of its stem.
        patterns = [
            (
                re.compile(rf"\b(?:{'|'.join(re.escape(fold(f)) for f in term_forms(t))})s?\b"),
                re.compile(rf"\b{re.escape(stem(t))}"),
            )
            for t in terms
        ]
        ranked: list[Row] = []
        for title, body, url, published, relevance in self._ranked(expression, RERANKED):
            text = f"{title} {body}".lower()
            only_stem = sum(
                not written.search(text) and bool(stemmed.search(text))
                for written, stemmed in patterns
            )
            relevance *= 1 - 0.5 * only_stem / len(patterns)
            ranked.append((title, body, url, published, relevance))
        ranked.sort(key=lambda row: row[4], reverse=True)
        return ranked[:limit]

    def _titled(self, query: str) -> tuple[list[Row], list[Row]]:
        """Return the documents whose title the query names: by all its words, and by some.

        A run of the query's words that is a whole title (disambiguation aside), or that
        title in the plural ("plants" names Plant), names the document; within a longer
        query only titles of two words or more count ("Mount Everest"), since one common
        word names too much. Longest runs first.
        """
        tokens = [w.replace('"', "") for w in words(query)]
        # The words that shape a question ("history", "works") name no title of their own:
        # "history of jazz" names Jazz as a whole.
        content = set(query_terms(query)) - FORM_WORDS
        whole: list[Row] = []
        part: list[Row] = []
        seen: set[str] = set()
        for n in range(min(TITLE_WORDS, len(tokens)), 0, -1):
            for start in range(len(tokens) - n + 1):
                run = tokens[start : start + n]
                if all(t in STOPWORDS or len(t) < 2 for t in run):
                    continue
                singular = [fold(t) for t in run]
                # "leaves" names Leaf, which the index's stemmer keeps apart.
                irregular = singular != run and any(number_forms(t) for t in run)
                rows = self._ranked(f'title : "{" ".join(run)}"', TITLE_LOOKUP)
                if irregular:
                    rows += self._ranked(f'title : "{" ".join(singular)}"', TITLE_LOOKUP)
                named = [words(_DISAMBIGUATION.sub("", row[0])) for row in rows]
                as_written = [row for row, title in zip(rows, named, strict=True) if title == run]
                in_plural = [
                    row for row, title in zip(rows, named, strict=True) if title == singular != run
                ]
                for row in as_written + in_plural:  # "blues" names Blues before Blue
                    if row[2] in seen:
                        continue
                    seen.add(row[2])
                    if content <= set(run):
                        whole.append(row)
                    elif n > 1:  # one common word of a longer query names too much
                        part.append(row)
        return whole, part

    def search_sync(self, query: str, max_results: int = 5) -> list[SearchHit]:
        """Rank passages in tiers, one hit per document, each tier by BM25.

        Tiers: title is the query, exact phrase, every word, title is part of the query,
        any word. Scores are in 0..1, the best hit's 1.0; a better tier scores higher.
        """
        terms = query_terms(query)
        if not terms:
            return []
        whole, part = self._titled(query)
        phrase = " ".join(w.replace('"', "") for w in words(query))
        limit = max_results * 3
        tiers: list[Callable[[], list[Row]]] = [
            lambda: whole,
            lambda: self._ranked(f'"{phrase}"', limit) if len(terms) > 1 else [],
            lambda: self._ranked_as_written(match_expression(terms, "AND"), terms, limit),
            lambda: part,
            lambda: (
                self._ranked_as_written(match_expression(terms, "OR"), terms, limit)
                if len(terms) > 1
                else []
            ),
        ]
        hits: list[SearchHit] = []
        seen: set[str] = set()
        for tier, ranked in enumerate(tiers):
            if len(hits) == max_results:
                break  # a lower tier could add nothing: no need to ask
            rows = ranked()
            best = max((r[4] for r in rows), default=0.0)
            for title, body, url, published, relevance in rows:
                if url in seen or len(hits) == max_results:
                    continue
                seen.add(url)
                share = relevance / best if best > 0 else 0.0
                score = (len(tiers) - 1 - tier + share) / len(tiers)
                hits.append(
                    SearchHit(
                        title=title,
                        url=url,
                        content=body,
                        score=round(score, 4),
                        published_date=published,
                    )
                )
        top = hits[0].score if hits else 0.0
        if 0 < top < 1:  # the best hit scores 1.0 whichever tier it came from
            hits = [h.model_copy(update={"score": round(h.score / top, 4)}) for h in hits]
        return hits

    async def search(
        self, query: str, max_results: int = 5, depth: Depth = "basic"
    ) -> list[SearchHit]:
        """Async face of `search_sync` (the index has one depth)."""
        return await asyncio.to_thread(self.search_sync, query, max_results)
