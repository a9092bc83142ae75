"""A run's evidence: what it read and asked, kept so its report can be checked and replayed.

Every search call, page read and model call of a run is a record of the thread, in the
order it happened. The texts the run was given (search snippets, corpus passages, page
texts) are stored once per content hash, whichever runs read them: a record names its
texts by hash. A run header says how the run got its evidence (live, or a re-run that
replays another run's records or searches again) and, for a replay, holds the records it
answers from, copied from the run it replays (`script`), so a replay never reads another
thread's records while it runs.

Stores: `stores.sqlite_evidence` (the data file) and `stores.redis_evidence`.
"""

import hashlib
import zlib
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Annotated, Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from core.models import utcnow


def content_hash(text: str) -> str:
    """The key a text is stored under: its SHA-256, hex."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def pack(text: str) -> bytes:
    """A text as stored: UTF-8, deflated (article text shrinks about threefold)."""
    return zlib.compress(text.encode("utf-8"), 6)


def unpack(body: bytes) -> str:
    """A stored text back."""
    return zlib.decompress(body).decode("utf-8")


# A text as the stores take it: hash, characters, deflated body.
PackedText = tuple[str, int, bytes]


def packed_texts(texts: Iterable[str]) -> list[PackedText]:
    """Each distinct text once, deflated: done before a store's write, not inside it."""
    unique = {content_hash(t): t for t in texts}
    return [(h, len(t), pack(t)) for h, t in unique.items()]


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True)

    at: datetime = Field(default_factory=utcnow, description="When it happened.")


class Hit(BaseModel):
    """One search result as the run was given it; its text is stored under `content_hash`."""

    model_config = ConfigDict(frozen=True)

    title: str
    url: str
    content_hash: str
    score: float = 0.0
    published_date: str | None = None


class SearchCall(_Record):
    """One search: the provider, what was asked, and the results (or the failure)."""

    kind: Literal["search"] = "search"
    provider: str
    query: str
    max_results: int
    depth: str = "basic"
    hits: list[Hit] = Field(default_factory=list)
    error: str | None = Field(None, description="The failure, as 'Type: message'.")


class PageRead(_Record):
    """One page read: the text extracted from it (or the failure)."""

    kind: Literal["page"] = "page"
    url: str
    final_url: str = ""
    title: str = ""
    published_date: str | None = None
    content_hash: str | None = None
    chars: int = Field(0, description="Length of the extracted text before it was capped.")
    error: str | None = Field(None, description="The failure, as 'Type: message'.")


class ModelCallRecord(_Record):
    """One model request: the model the server named, the prompt's template and the tokens."""

    kind: Literal["model"] = "model"
    node: str
    role: str
    model: str = Field(description="The model as configured ('provider:model').")
    reported_model: str | None = Field(None, description="The model id the server answered with.")
    template: str | None = Field(None, description="The prompt template's name.")
    template_version: str | None = Field(
        None, description="A hash of the template's text: it changes when the prompt does."
    )
    params: dict[str, Any] = Field(default_factory=dict)
    input_tokens: int = 0
    output_tokens: int = 0
    seconds: float = 0.0
    error: str | None = None


Record = Annotated[SearchCall | PageRead | ModelCallRecord, Field(discriminator="kind")]
ToolRecord = Annotated[SearchCall | PageRead, Field(discriminator="kind")]
RECORD = TypeAdapter[Record](Record)
RECORDS = TypeAdapter[list[Record]](list[Record])

Mode = Literal["live", "replay", "refresh"]


class RunHeader(BaseModel):
    """How a run got its evidence, and with which tools."""

    model_config = ConfigDict(frozen=True)

    mode: Mode = "live"
    of: str | None = Field(None, description="The run this one re-runs (its public id).")
    provider: str = Field("", description="The search provider's name.")
    pages_per_query: int = 0
    reads_pages: bool = False
    created_at: datetime = Field(default_factory=utcnow)
    # A replay's answers: the search calls and page reads of the run it replays.
    script: list[ToolRecord] = Field(default_factory=list)


class Evidence(BaseModel):
    """Everything kept of one run: its header, its records, and the texts they name."""

    header: RunHeader | None = None
    records: list[Record] = Field(default_factory=list)
    contents: dict[str, str] = Field(default_factory=dict)


class StoreFigures(BaseModel):
    """What the store holds, for the storage figures and the size cap."""

    runs: int = 0
    records: int = 0
    contents: int = 0
    content_bytes: int = Field(0, description="Stored (deflated) bytes of the texts.")
    text_chars: int = Field(0, description="Characters of the texts before deflating.")


def hashes_of(records: Iterable[Record]) -> set[str]:
    """The content hashes `records` name."""
    found: set[str] = set()
    for record in records:
        if isinstance(record, SearchCall):
            found.update(hit.content_hash for hit in record.hits)
        elif isinstance(record, PageRead) and record.content_hash:
            found.add(record.content_hash)
    return found


class EvidenceStore(Protocol):
    """Where runs' evidence is kept (see the module docstring)."""

    def add(self, thread_id: str, header: RunHeader, record: Record, texts: Sequence[str]) -> None:
        """Queue `record` (with the texts it names) for the thread; never raises.

        `header` is written when the thread has none yet. Writes keep their order. On
        SQLite a record shares the checkpoints' transactions, so a checkpoint written
        after it never lands without it; on Redis it is written within milliseconds, on
        its own, so a process killed in between may lose its last step's records (the
        step is not repeated, so a replay of that run finds those calls missing and notes
        them as failed). A failure is logged, never raised: a run does not fail for its
        bookkeeping.
        """
        ...

    async def put(self, thread_id: str, evidence: Evidence) -> None:
        """Store a whole run's evidence (a re-run's header, an imported run), replacing any."""
        ...

    async def header(self, thread_id: str) -> RunHeader | None:
        """The thread's run header, None when it has none."""
        ...

    async def records(self, thread_id: str) -> list[Record]:
        """The thread's records, in the order they happened."""
        ...

    async def contents(self, hashes: Iterable[str]) -> dict[str, str]:
        """The stored texts of `hashes` (those still kept)."""
        ...

    async def delete(self, thread_id: str) -> None:
        """Forget the thread's evidence, and the texts no other thread names."""
        ...

    async def prune(self, older_than: datetime | None, max_bytes: int | None) -> int:
        """Forget old runs' evidence; how many runs' evidence went.

        First the runs older than `older_than`, then the oldest runs until the texts take
        at most `max_bytes`.
        """
        ...

    async def figures(self) -> StoreFigures:
        """What the store holds."""
        ...

    async def flush(self) -> None:
        """Wait until every queued record is written."""
        ...


async def load(store: EvidenceStore, thread_id: str) -> Evidence:
    """The thread's whole evidence: header, records and every text they name."""
    header = await store.header(thread_id)
    records = await store.records(thread_id)
    wanted = hashes_of(records) | hashes_of(header.script if header else [])
    return Evidence(header=header, records=records, contents=await store.contents(wanted))
