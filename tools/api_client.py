"""One HTTP client setup and one retry policy for every search API we call.

A response hook turns non-2xx answers into `ProviderError`s before any SDK sees them, so
our error types and the server's Retry-After survive whatever the SDK would have raised.
"""

import asyncio
import contextlib
import json
import random
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import ClassVar, TypeVar

import httpx
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt

from tools.errors import ProviderError, error_for_status

T = TypeVar("T")
_DETAIL_CHARS = 300


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Retry policy: 3 retries, delay min(base * 2^n, max), only for retryable errors."""

    max_retries: int = 3
    base_delay_s: float = 1.0
    max_delay_s: float = 10.0
    max_retry_after_s: float = 60.0
    jitter: float = 0.0
    sleep: Callable[[float], Awaitable[None]] = field(default=asyncio.sleep)

    def delay(self, retry_number: int, error: BaseException | None) -> float:
        """Seconds to wait before retry `retry_number` (0-based), at least the server's Retry-After.

        With `jitter` (0..1) the backoff is drawn from [backoff * (1 - jitter), backoff], so
        clients that failed together do not all come back at the same instant.
        """
        backoff = min(self.base_delay_s * 2.0**retry_number, self.max_delay_s)
        if self.jitter:
            backoff *= 1 - random.uniform(0, self.jitter)  # spreading, not secrecy
        if isinstance(error, ProviderError) and error.retry_after is not None:
            return max(backoff, min(error.retry_after, self.max_retry_after_s))
        return backoff


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or HTTP date); None when absent or bad."""
    if not value:
        return None
    with contextlib.suppress(ValueError):  # not delta-seconds
        return max(0.0, float(value))
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def _detail(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:_DETAIL_CHARS] or response.reason_phrase
    if isinstance(body, dict):
        for key in ("detail", "error", "message"):
            value = body.get(key)
            if isinstance(value, dict):
                value = value.get("error") or value.get("message") or value.get("detail")
            if value:
                return str(value)[:_DETAIL_CHARS]
    return response.reason_phrase


async def _raise_for_status(response: httpx.Response) -> None:
    if response.is_success:
        return
    await response.aread()
    retry_after = parse_retry_after(response.headers.get("retry-after"))
    raise error_for_status(response.status_code, _detail(response), retry_after)


def api_client(base_url: str, headers: dict[str, str], timeout_s: float) -> httpx.AsyncClient:
    """Return an AsyncClient whose error responses raise `ProviderError`."""
    return httpx.AsyncClient(
        base_url=base_url,
        headers=headers,
        timeout=timeout_s,
        event_hooks={"response": [_raise_for_status]},
    )


def as_provider_error(exc: BaseException, timeout_s: float) -> ProviderError:
    """Map a failure of a call to the taxonomy (a ProviderError passes through)."""
    if isinstance(exc, ProviderError):
        return exc
    if isinstance(exc, httpx.TimeoutException | TimeoutError):
        return ProviderError(f"no answer within {timeout_s:g} s", "TIMEOUT_ERROR")
    if isinstance(exc, httpx.TransportError):
        return ProviderError(f"could not reach the service ({type(exc).__name__})", "NETWORK_ERROR")
    if isinstance(exc, json.JSONDecodeError | KeyError | TypeError | ValueError):
        return ProviderError("the service sent a malformed response", "SERVER_ERROR")
    raise exc


async def call_with_retries(
    operation: Callable[[], Awaitable[T]],
    policy: RetryPolicy,
    timeout_s: float,
    classify: Callable[[BaseException, float], ProviderError] = as_provider_error,
) -> T:
    """Run `operation`, retrying retryable failures by `policy`; raise the last `ProviderError`.

    `classify` maps a failure to the taxonomy (or re-raises what is not a call failure).
    """

    async def attempt() -> T:
        try:
            return await operation()
        except Exception as exc:  # mapped, or re-raised unchanged when not ours to map
            raise classify(exc, timeout_s) from exc

    def wait(state: RetryCallState) -> float:
        error = state.outcome.exception() if state.outcome else None
        return policy.delay(state.attempt_number - 1, error)

    retrying = AsyncRetrying(
        stop=stop_after_attempt(policy.max_retries + 1),
        wait=wait,
        retry=retry_if_exception(lambda e: isinstance(e, ProviderError) and e.is_retryable),
        sleep=policy.sleep,
        reraise=True,
    )
    return await retrying(attempt)


class ApiProvider(ABC):
    """What every search API provider holds: its HTTP client, time cap and retry policy.

    A provider names its default address and its key's headers; calls go through `_with_retries`.
    """

    default_base_url: ClassVar[str]

    def __init__(
        self,
        api_key: str,
        base_url: str | None = None,
        timeout_s: float = 30.0,
        retry: RetryPolicy | None = None,
    ) -> None:
        self._timeout_s = timeout_s
        self._retry = retry or RetryPolicy()
        address = self.default_base_url if base_url is None else base_url
        self._http = api_client(address, self._headers(api_key), timeout_s)
        self._connected(api_key)

    @abstractmethod
    def _headers(self, api_key: str) -> dict[str, str]:
        """Return the request headers, the key's among them."""

    def _connected(self, api_key: str) -> None:  # noqa: B027 (a hook, empty unless overridden)
        """Set up what rides on the HTTP client (an SDK client, say); nothing by default."""

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()

    async def _with_retries(self, operation: Callable[[], Awaitable[T]]) -> T:
        return await call_with_retries(operation, self._retry, self._timeout_s)
