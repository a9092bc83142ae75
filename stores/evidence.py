"""A run's evidence: what it read and asked, kept so its report can be checked and replayed.

Every search call, page read and model call of a run is a record of the thread, in order;
the texts it was given are stored once per content hash and named by hash. A run header
says how the run got its evidence and, for a replay, holds the records it answers from
(`script`). Stores: `stores.sqlite_evidence` and `stores.redis_evidence`.
"""

import hashlib
import zlib
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Annotated, Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from core.models import utcnow


def content_hash(text: str) -> str:
    """Return the key a text is stored under: its SHA-256, hex."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def pack(text: str) -> bytes:
    """Return a text as stored: UTF-8, deflated."""
    return zlib.compress(text.encode("utf-8"), 6)


def unpack(body: bytes) -> str:
    """Return a stored text."""
    return zlib.decompress(body).decode("utf-8")


# A text as the stores take it: hash, characters, deflated body.
PackedText = tuple[str, int, bytes]


def packed_texts(texts: Iterable[str]) -> list[PackedText]:
    """Return each distinct text once, deflated (before a store's write, not inside it)."""
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
    document: str | None = Field(None, description="The uploaded file it came from, if one.")
    page: int | None = Field(None, description="Its page in that file (a PDF's).")


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
    """Return the content hashes `records` name."""
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
        """Queue `record` (with the texts it names) for the thread; log, never raise, a failure.

        `header` is written when the thread has none yet; writes keep their order. On
        Redis a process killed right after a step may lose that step's records.
        """
        ...

    async def put(self, thread_id: str, evidence: Evidence) -> None:
        """Store a whole run's evidence (a re-run's header, an imported run), replacing any."""
        ...

    async def header(self, thread_id: str) -> RunHeader | None:
        """Return the thread's run header, None when it has none."""
        ...

    async def records(self, thread_id: str) -> list[Record]:
        """Return the thread's records, in the order they happened."""
        ...

    async def contents(self, hashes: Iterable[str]) -> dict[str, str]:
        """Return the stored texts of `hashes` (those still kept)."""
        ...

    async def delete(self, thread_id: str) -> None:
        """Forget the thread's evidence, and the texts no other thread names."""
        ...

    async def prune(self, older_than: datetime | None, max_bytes: int | None) -> int:
        """Forget the runs older than `older_than`, then the oldest until texts fit `max_bytes`.

        Return how many runs' evidence went.
        """
        ...

    async def figures(self) -> StoreFigures:
        """Return what the store holds."""
        ...

    async def flush(self) -> None:
        """Wait until every queued record is written."""
        ...


async def load(store: EvidenceStore, thread_id: str) -> Evidence:
    """Return the thread's whole evidence: header, records and every text they name."""
    header = await store.header(thread_id)
    records = await store.records(thread_id)
    wanted = hashes_of(records) | hashes_of(header.script if header else [])
    return Evidence(header=header, records=records, contents=await store.contents(wanted))
