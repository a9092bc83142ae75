"""Failures of the tools, mapped once so every caller can tell a retry from a give-up.

`ToolError` has two kinds: `ProviderError` (a search API call) and `ScrapeError` (a page).
"""

from typing import Literal

from tools.search import SearchError

ErrorType = Literal[
    "AUTH_ERROR",
    "RATE_LIMIT_ERROR",
    "SERVER_ERROR",
    "SERVICE_UNAVAILABLE",
    "TIMEOUT_ERROR",
    "NETWORK_ERROR",
    "VALIDATION_ERROR",
]

RETRYABLE: frozenset[ErrorType] = frozenset(
    {"RATE_LIMIT_ERROR", "SERVER_ERROR", "SERVICE_UNAVAILABLE", "TIMEOUT_ERROR", "NETWORK_ERROR"}
)


class ToolError(Exception):
    """Base of every failure a tool reports on purpose."""


class ProviderError(SearchError, ToolError):
    """A search provider call failed; the message is safe to show (it never holds a key).

    `error_type` is an `ErrorType` code; `retry_after` is the server's Retry-After in seconds.
    """

    def __init__(
        self,
        message: str,
        error_type: ErrorType,
        status_code: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.error_type: ErrorType = error_type
        self.status_code = status_code
        self.retry_after = retry_after

    @property
    def is_retryable(self) -> bool:
        """Whether the same call may succeed later."""
        return self.error_type in RETRYABLE

    def __str__(self) -> str:
        status = f" (HTTP {self.status_code})" if self.status_code else ""
        return f"{self.error_type}{status}: {self.message}"


def error_for_status(status: int, message: str, retry_after: float | None = None) -> ProviderError:
    """Map an HTTP status to one of the error types (`ErrorType`)."""
    if status in (401, 403):
        kind: ErrorType = "AUTH_ERROR"
    elif status == 429:
        kind = "RATE_LIMIT_ERROR"
    elif status == 503:
        kind = "SERVICE_UNAVAILABLE"
    elif 400 <= status < 500:
        kind = "VALIDATION_ERROR"
    else:
        kind = "SERVER_ERROR"
    return ProviderError(message, kind, status_code=status, retry_after=retry_after)


class ScrapeError(ToolError):
    """A page could not be fetched or read; the researcher notes it and goes on."""


class UnsafeURLError(ScrapeError):
    """The URL or one of its redirects leads to an address or scheme we refuse."""
