"""Checkpointer factories; each one only deserialises the types our state is made of."""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from graph import models

# Everything a checkpoint of ResearchState may hold beyond LangGraph's own safe types.
STATE_TYPES: tuple[type, ...] = (
    models.RunOptions,
    models.ResearchPlan,
    models.SearchResult,
    models.ResearchNote,
    models.ReviewIssue,
    models.ReviewScores,
    models.Review,
    models.Draft,
    models.NodeUsage,
    models.Usage,
    models.ApprovalDecision,
)


def serializer() -> JsonPlusSerializer:
    """A serializer that refuses to revive any type not in `STATE_TYPES`."""
    return JsonPlusSerializer(
        allowed_msgpack_modules=[(t.__module__, t.__name__) for t in STATE_TYPES]
    )


def memory_saver() -> InMemorySaver:
    """In-process checkpointer for tests and benchmarks."""
    return InMemorySaver(serde=serializer())


@asynccontextmanager
async def sqlite_saver(path: Path) -> AsyncIterator[AsyncSqliteSaver]:
    """The embedded default: one SQLite file holds every thread's checkpoints."""
    path.parent.mkdir(parents=True, exist_ok=True)
    async with AsyncSqliteSaver.from_conn_string(str(path)) as saver:
        saver.serde = serializer()
        await saver.setup()
        yield saver
