"""Thread ids: what a client may choose, and how one key's ids stay apart from another's.

A client id is 1-128 letters, digits, `.`, `_` or `-` (`CLIENT_ID`), so it can name
neither the service's own streams (with a `:`) nor a scoped id (with an `@`). A thread a
key names is stored as `<name>@<owner>`, so no key can tell another's threads exist;
generated ids (UUIDs) are stored as they are.
"""

import hashlib
import re

CLIENT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
CLIENT_ID_RULE = "1-128 letters, digits, '.', '_' or '-', starting with a letter or digit"
_SCOPE = "@"
# The one owner of every thread when the service runs without API keys.
LOCAL_OWNER = "local"


def owner_id(key: str) -> str:
    """Return a stable, non-secret name for the owner of an API key (never the key itself)."""
    return "key-" + hashlib.sha256(key.encode()).hexdigest()[:16]


def is_client_id(thread_id: str) -> bool:
    """Return whether a client could have named (or been given) a thread this."""
    return CLIENT_ID.fullmatch(thread_id) is not None


def check_client_id(thread_id: str) -> str:
    """Return the id a client chose, or raise ValueError saying what an id may be."""
    if not is_client_id(thread_id):
        raise ValueError(f"a thread id is {CLIENT_ID_RULE}")
    return thread_id


def scoped(owner: str, thread_id: str) -> str:
    """Return how the thread a key named `thread_id` is stored."""
    return thread_id if owner == LOCAL_OWNER else f"{thread_id}{_SCOPE}{owner}"


def public_id(stored: str) -> str:
    """Return the id the client knows a stored thread by."""
    return stored.split(_SCOPE, 1)[0]
