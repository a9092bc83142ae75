"""Thread ids: what a client may choose, and how one key's ids stay apart from another's.

A client may name a thread (the LangGraph SDK's `threads.create(thread_id=...)`). Two
rules keep such names from reaching what is not the caller's:

- A client id is 1-128 letters, digits, `.`, `_` or `-` (`CLIENT_ID`). The service's
  own event-log streams are named with a `:` (`service.platform_runs`), and a scoped id
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

CLIENT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
CLIENT_ID_RULE = "1-128 letters, digits, '.', '_' or '-', starting with a letter or digit"
_SCOPE = "@"
# The one owner of every thread when the service runs without API keys.
LOCAL_OWNER = "local"


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
