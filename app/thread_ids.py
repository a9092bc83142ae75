"""Thread ids: what a client may choose, and how one key's ids stay apart from another's.

A client may name a thread (the LangGraph SDK's `threads.create(thread_id=...)`). Two
rules keep such names from reaching what is not the caller's:

- A client id is 1-128 letters, digits, `.`, `_` or `-` (`CLIENT_ID`). The service's
  own event-log streams are named with a `:` (`app.platform_runs`), and a scoped id
  (below) with an `@`: no client id can name either.
- Ids are scoped per key. A thread a key names is stored as `<name>@<owner>`, so two keys
  may both have a thread `support-chat-42` and neither can tell that the other has one:
  creating, reading or deleting it answers exactly as for a name nobody uses. Ids the
  service generates (UUIDs) are stored as they are. Without keys there is one owner and
  nothing to scope.

The HTTP layer turns a path's id into the stored one (`RunManager.resolve`) and a stored
id back into the client's (`public_id`) in what it answers.
"""

import re
from collections.abc import Callable
from typing import Annotated, Any, Protocol

from fastapi import Depends

from app.auth import LOCAL_OWNER

CLIENT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
CLIENT_ID_RULE = "1-128 letters, digits, '.', '_' or '-', starting with a letter or digit"
_SCOPE = "@"


def is_client_id(thread_id: str) -> bool:
    """Whether a client could have named (or been given) a thread this."""
    return CLIENT_ID.fullmatch(thread_id) is not None


def check_client_id(thread_id: str) -> str:
    """The id a client chose, or ValueError saying what an id may be (for validators)."""
    if not is_client_id(thread_id):
        raise ValueError(f"a thread id is {CLIENT_ID_RULE}")
    return thread_id


def scoped(owner: str, thread_id: str) -> str:
    """How the thread a key named `thread_id` is stored."""
    return thread_id if owner == LOCAL_OWNER else f"{thread_id}{_SCOPE}{owner}"


def public_id(stored: str) -> str:
    """The id the client knows a stored thread by."""
    return stored.split(_SCOPE, 1)[0]


class _Resolver(Protocol):
    async def resolve(self, owner: str, thread_id: str) -> str: ...


def stored_id_dependency(manager: Callable[[], _Resolver], owner_dependency: Any) -> Any:
    """A FastAPI dependency: the path's `thread_id` as the caller's stored thread id."""

    async def stored_id(thread_id: str, owner: Annotated[str, Depends(owner_dependency)]) -> str:
        return await manager().resolve(owner, thread_id)

    return stored_id
