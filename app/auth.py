"""API keys: who is calling, so each key sees only its own threads."""

import hmac

from fastapi import Request

from service.errors import Unauthorized
from service.thread_ids import LOCAL_OWNER, owner_id


class KeyAuth:
    """Reads `Authorization: Bearer <key>` or `X-API-Key`; with no keys configured, all is local."""

    def __init__(self, keys: list[str]) -> None:
        self._keys = [k for k in keys if k]

    REFUSAL = "send a valid API key as 'Authorization: Bearer <key>' or 'X-API-Key'"

    def owner(self, request: Request) -> str | None:
        """Return the owner id of the key the request presents, None if it presents no valid one."""
        if not self._keys:
            return LOCAL_OWNER
        header = request.headers.get("authorization", "")
        presented = header[7:].strip() if header.lower().startswith("bearer ") else ""
        presented = presented or request.headers.get("x-api-key", "").strip()
        for key in self._keys:
            if presented and hmac.compare_digest(presented.encode(), key.encode()):
                return owner_id(key)
        return None

    async def __call__(self, request: Request) -> str:
        """Return the caller's owner id, or raise Unauthorized (a coroutine: no thread hop)."""
        owner = self.owner(request)
        if owner is None:
            raise Unauthorized(self.REFUSAL)
        return owner
