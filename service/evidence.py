"""A run's tools, recording what they return, or answering from a replayed run's records.

A live (or refreshed) run records each search and page read as it returns. A replay
answers each call with what the same call returned in the run it replays (the header's
`script`), failures included, and records that as its own evidence; a call the original
never made fails, and the run goes on.
"""

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from core.models import Rerun
from engines.recording import ModelCall
from nodes.context import Deps, PageReader
from nodes.reading import describe, kept_text
from stores.evidence import (
    EvidenceStore,
    Hit,
    ModelCallRecord,
    PageRead,
    RunHeader,
    SearchCall,
    content_hash,
    hashes_of,
)
from tools.errors import ScrapeError
from tools.extraction import Page
from tools.search import Depth, SearchError, SearchHit, SearchProvider

_KINDS: dict[tuple[str, type[Exception]], type[Exception]] = {}


def _replayed_kind(name: str, base: type[Exception]) -> type[Exception]:
    """Return an exception class named as the recorded failure's, so notes read the same."""
    if (name, base) not in _KINDS:
        _KINDS[name, base] = type(name, (base,), {"__module__": __name__})
    return _KINDS[name, base]


def replayed_error(recorded: str, base: type[Exception]) -> Exception:
    """Return the recorded failure ('Type: message', as `describe` wrote it) as a `base`."""
    name, _, message = recorded.partition(": ")
    kind = _replayed_kind(name, base) if name.isidentifier() else base
    return kind(message)


class RunEvidence:
    """The evidence sink of one thread: records each call as it returns (never raises)."""

    def __init__(self, store: EvidenceStore, thread_id: str, header: RunHeader) -> None:
        self._store = store
        self._thread_id = thread_id
        self._header = header

    def searched(
        self,
        provider: str,
        query: str,
        max_results: int,
        depth: str,
        hits: Sequence[SearchHit] | None,
        error: str | None = None,
        at: datetime | None = None,
    ) -> None:
        """Record a search and the texts of its results (`at`: when, if not now)."""
        texts = [h.content for h in hits or []]
        record = SearchCall(
            provider=provider,
            query=query,
            max_results=max_results,
            depth=depth,
            hits=[
                Hit(**h.model_dump(exclude={"content"}), content_hash=content_hash(h.content))
                for h in hits or []
            ],
            error=error,
            **({"at": at} if at else {}),
        )
        self._store.add(self._thread_id, self._header, record, texts)

    def read(
        self, url: str, page: Page | None, error: str | None = None, at: datetime | None = None
    ) -> None:
        """Record a page read and its text, capped as the run keeps it (`at`: if not now)."""
        when = {"at": at} if at else {}
        if page is None:
            record = PageRead(url=url, error=error, **when)
            self._store.add(self._thread_id, self._header, record, [])
            return
        text = kept_text(page.text)
        record = PageRead(
            url=url,
            final_url=page.final_url,
            title=page.title,
            published_date=page.published_date,
            content_hash=content_hash(text),
            chars=len(page.text),
            **when,
        )
        self._store.add(self._thread_id, self._header, record, [text])

    def model_calls(self, node: str, calls: Sequence[ModelCall]) -> None:
        """Record a node step's model requests: of each, the fields a record keeps."""
        kept = set(ModelCallRecord.model_fields)
        for call in calls:
            record = ModelCallRecord(node=node, **call.model_dump(include=kept))
            self._store.add(self._thread_id, self._header, record, [])


class RecordingSearch:
    """A search provider whose every call is recorded."""

    def __init__(self, inner: SearchProvider, evidence: RunEvidence) -> None:
        self._inner = inner
        self._evidence = evidence
        self.name = inner.name

    async def search(
        self, query: str, max_results: int = 5, depth: Depth = "basic"
    ) -> list[SearchHit]:
        """Return the inner provider's hits, recorded (a failure too, then raised)."""
        try:
            hits = await self._inner.search(query, max_results, depth)
        except Exception as exc:
            self._evidence.searched(self.name, query, max_results, depth, None, describe(exc))
            raise
        self._evidence.searched(self.name, query, max_results, depth, hits)
        return hits


class RecordingReader:
    """A page reader whose every read is recorded."""

    def __init__(self, inner: PageReader, evidence: RunEvidence) -> None:
        self._inner = inner
        self._evidence = evidence

    async def fetch(self, url: str) -> Page:
        """Return the inner reader's page, recorded (a failure too, then raised)."""
        try:
            page = await self._inner.fetch(url)
        except Exception as exc:
            self._evidence.read(url, None, describe(exc))
            raise
        self._evidence.read(url, page)
        return page


class _Script:
    """The replayed run's calls: the n-th same call gets the n-th answer (or the last)."""

    def __init__(self, keys: list[tuple[object, ...]], answers: list[object]) -> None:
        self._answers: dict[tuple[object, ...], list[object]] = defaultdict(list)
        for key, answer in zip(keys, answers, strict=True):
            self._answers[key].append(answer)
        self._asked: dict[tuple[object, ...], int] = defaultdict(int)

    def answer(self, *keys: tuple[object, ...]) -> object | None:
        """Return the next answer to the first key the script knows, None if it knows none."""
        for key in keys:
            answers = self._answers.get(key)
            if answers:
                turn = self._asked[key]
                self._asked[key] += 1
                return answers[min(turn, len(answers) - 1)]
        return None


class ReplaySearch:
    """Answers searches with the replayed run's results (see the module docstring)."""

    def __init__(
        self, calls: Sequence[SearchCall], texts: dict[str, str], evidence: RunEvidence, name: str
    ) -> None:
        self.name = name
        self._texts = texts
        self._evidence = evidence
        self._script = _Script(
            [(c.query, c.max_results, c.depth) for c in calls] + [(c.query,) for c in calls],
            [*calls, *calls],
        )

    async def search(
        self, query: str, max_results: int = 5, depth: Depth = "basic"
    ) -> list[SearchHit]:
        """Return what the same search returned in the replayed run, or raise its failure."""
        call = self._script.answer((query, max_results, depth), (query,))
        if not isinstance(call, SearchCall):
            error = SearchError(f"the replayed run never searched for {query!r}")
            self._evidence.searched(self.name, query, max_results, depth, None, describe(error))
            raise error
        if call.error is not None:
            self._evidence.searched(self.name, query, max_results, depth, None, call.error, call.at)
            raise replayed_error(call.error, SearchError)
        hits = [
            SearchHit(**h.model_dump(exclude={"content_hash"}), content=self._texts[h.content_hash])
            for h in call.hits
            if h.content_hash in self._texts  # a text pruned since is a result lost
        ]
        # Recorded as read when the replayed run read it: the texts are that run's.
        self._evidence.searched(self.name, query, max_results, depth, hits, at=call.at)
        return hits


class ReplayReader:
    """Answers page reads with the replayed run's pages, or their failures."""

    def __init__(
        self, reads: Sequence[PageRead], texts: dict[str, str], evidence: RunEvidence
    ) -> None:
        self._texts = texts
        self._evidence = evidence
        self._script = _Script([(r.url,) for r in reads], list(reads))

    async def fetch(self, url: str) -> Page:
        """Return the page as the replayed run read it."""
        read = self._script.answer((url,))
        if not isinstance(read, PageRead):
            error = ScrapeError(f"the replayed run never read {url}")
            self._evidence.read(url, None, describe(error))
            raise error
        if read.error is not None or read.content_hash not in self._texts:
            recorded = read.error or "ScrapeError: its text is no longer kept"
            self._evidence.read(url, None, recorded, read.at)
            raise replayed_error(recorded, ScrapeError)
        page = Page(
            url=url,
            final_url=read.final_url,
            title=read.title,
            text=self._texts[read.content_hash],
            published_date=read.published_date,
        )
        self._evidence.read(url, page, at=read.at)
        return page


def header_for(deps: Deps, rerun: Rerun | None) -> RunHeader:
    """Return the header of a run with these tools (a live run's, or a refresh's)."""
    return RunHeader(
        mode=rerun.mode if rerun else "live",
        of=rerun.of if rerun else None,
        provider=deps.search.name,
        pages_per_query=deps.pages_per_query,
        reads_pages=deps.reader is not None,
    )


def recording_deps(deps: Deps, evidence: RunEvidence) -> Deps:
    """Return `deps` whose searches (its member kinds' too), page reads and model calls are recorded."""
    reader = RecordingReader(deps.reader, evidence) if deps.reader is not None else None
    kinds = tuple(
        replace(kind, search=RecordingSearch(kind.search, evidence)) for kind in deps.member_kinds
    )
    return replace(
        deps,
        search=RecordingSearch(deps.search, evidence),
        member_kinds=kinds,
        reader=reader,
        evidence=evidence,
    )


async def replay_deps(deps: Deps, store: EvidenceStore, thread_id: str, header: RunHeader) -> Deps:
    """Return `deps` answering searches and page reads from `header.script`."""
    evidence = RunEvidence(store, thread_id, header)
    texts = await store.contents(hashes_of(header.script))
    searches = [r for r in header.script if isinstance(r, SearchCall)]
    reads = [r for r in header.script if isinstance(r, PageRead)]
    reader = ReplayReader(reads, texts, evidence) if header.reads_pages else None
    # One script per provider, as the run recorded it: the run's own searches, and each
    # member kind's (a kind the run did not record, e.g. a run from before kinds had their
    # own providers, answers from the run's).
    by_name: dict[str, list[SearchCall]] = {}
    for call in searches:
        by_name.setdefault(call.provider, []).append(call)
    scripts: dict[str, ReplaySearch] = {}

    def replayed(name: str) -> ReplaySearch:
        if name not in scripts:
            calls = by_name.get(name) or by_name.get(header.provider, [])
            scripts[name] = ReplaySearch(calls, texts, evidence, name)
        return scripts[name]

    kinds = tuple(replace(kind, search=replayed(kind.search.name)) for kind in deps.member_kinds)
    return replace(
        deps,
        search=replayed(header.provider),
        member_kinds=kinds,
        reader=reader,
        pages_per_query=header.pages_per_query,
        evidence=evidence,
    )


async def run_deps(
    deps: Deps, store: EvidenceStore | None, thread_id: str, rerun: Rerun | None
) -> Deps:
    """Return the run's tools: recording what they return, or a replay's recorded answers.

    Without a store nothing is recorded.
    """
    if store is None:
        return deps
    if rerun is not None and rerun.mode == "replay":
        header = await store.header(thread_id)
        if header is not None and header.mode == "replay":
            return await replay_deps(deps, store, thread_id, header)
    return recording_deps(deps, RunEvidence(store, thread_id, header_for(deps, rerun)))
