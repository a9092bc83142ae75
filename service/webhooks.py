"""Watch entries POSTed to a watch's webhook, signed with the key's secret, retried with backoff.

The URL passes the scraper's SSRF guard (`tools.http_safety.check_url` under the same
`FetchPolicy`) when the watch is made and again before every attempt, and the request
goes to the checked address (no DNS rebinding). The body is the entry as JSON; the
headers `X-Research-Timestamp` (Unix seconds) and `X-Research-Signature`
(`sha256=` + hex HMAC-SHA256 of `<timestamp>.<body>` under the key's secret, which
`GET /v1/watches/secret` gives the key) let the receiver check where it came from and
when. The secret is never logged nor put into an event.

A delivery is durable: it is recorded with its entry (`stores.watches.Delivery`), and
each try is recorded before it is made (claimed for a lease of the request's time), each
failure with the time of the next try, and the acknowledgement by removing it. A process
stopped or killed before the receiver acknowledged leaves the delivery in the store,
where the scheduler's tick (at start-up and every `watch_poll_seconds`, any process on
Redis) finds it due and tries it again, with the same signature scheme and backoff. So
an entry is delivered at least once (twice only if the process dies between the
receiver's 2xx and its removal) and not re-sent once acknowledged.
"""

import asyncio
import hashlib
import hmac
import logging
import time
from datetime import UTC, datetime, timedelta

import httpx

from core.tasks import stop_all
from service.errors import Unprocessable
from service.watches import WatchEntry
from stores.watches import Delivery, WatchStore
from tools.download import FetchPolicy, allowed_networks, default_client
from tools.errors import ScrapeError, UnsafeURLError
from tools.http_safety import Resolver, SafeTarget, check_url, resolve_host

logger = logging.getLogger(__name__)

SIGNATURE_HEADER = "X-Research-Signature"
TIMESTAMP_HEADER = "X-Research-Timestamp"
ATTEMPTS = 6
MAX_DELAY_S = 300.0


def signature(secret: str, timestamp: str, body: bytes) -> str:
    """Return the signature header's value for `body` sent at `timestamp`."""
    message = timestamp.encode() + b"." + body
    return "sha256=" + hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


class DeliveryFailed(Exception):
    """The receiver did not take the entry; retried unless it refused it for good."""

    def __init__(self, message: str, retry: bool) -> None:
        super().__init__(message)
        self.retry = retry


def _retryable(exc: BaseException) -> bool:
    return isinstance(exc, httpx.TransportError) or (isinstance(exc, DeliveryFailed) and exc.retry)


class WebhookSender:
    """Checks webhook URLs and delivers entries to them in the background."""

    def __init__(
        self,
        policy: FetchPolicy,
        store: WatchStore,
        first_delay_s: float = 2.0,
        resolver: Resolver = resolve_host,
    ) -> None:
        """`store`: the deliveries and the owners' signing secrets; `first_delay_s`: the first retry's wait."""
        self._policy = policy
        self._store = store
        self._secret_of = store.secret
        self._first_delay_s = first_delay_s
        self._resolver = resolver
        self._client = default_client(policy)
        self._tasks: set[asyncio.Task[None]] = set()

    async def check(self, url: str) -> str:
        """Return the URL as it will be called; Unprocessable when the SSRF rules refuse it."""
        try:
            target = await self._target(url)
        except (UnsafeURLError, ScrapeError) as exc:
            raise Unprocessable(f"webhook: {exc}", {"field": "webhook"}) from None
        return str(target.url)

    async def _target(self, url: str) -> SafeTarget:
        """Return where `url` goes, by the scraper's SSRF rules (raise if they refuse it)."""
        return await check_url(
            url,
            resolver=self._resolver,
            allow_private=self._policy.allow_private,
            allowed_networks=allowed_networks(self._policy.allowed_networks),
            allowed_ports=self._policy.allowed_ports,
        )

    @property
    def lease_s(self) -> float:
        """How long a try is its claimant's: past it, the claimant is taken for dead."""
        return 3.0 * self._policy.timeout_s

    def backoff_s(self, attempts: int) -> float:
        """Return the wait after the try number `attempts` failed: doubling, capped."""
        return float(min(self._first_delay_s * 2 ** (attempts - 1), MAX_DELAY_S))

    async def deliver(self, delivery: Delivery, entry: WatchEntry) -> None:
        """Make the claimed try of `delivery` (and the retries after it) in the background."""
        task = asyncio.create_task(self._send(delivery, entry))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send(self, delivery: Delivery, entry: WatchEntry) -> None:
        body = entry.model_dump_json().encode()
        store = self._store
        try:
            while True:
                try:
                    assert delivery.url is not None
                    await self._post(delivery.owner, delivery.url, body)
                except Exception as exc:
                    if not _retryable(exc) or delivery.attempts >= ATTEMPTS:
                        # Given up: the entry stays in .../watch/changes.
                        logger.warning(
                            "webhook for watch entry %d not delivered: %s", entry.seq, exc
                        )
                        await store.finish_delivery(delivery)
                        return
                    wait = self.backoff_s(delivery.attempts)
                    later = delivery.model_copy(
                        update={"next_try": datetime.now(UTC) + timedelta(seconds=wait)}
                    )
                    waiting = await store.replace_delivery(delivery, later)
                    if waiting is None:  # removed with its watch, or taken over
                        return
                    await asyncio.sleep(wait)
                    again = waiting.model_copy(
                        update={
                            "attempts": waiting.attempts + 1,
                            "next_try": datetime.now(UTC) + timedelta(seconds=self.lease_s),
                        }
                    )
                    claimed = await store.replace_delivery(waiting, again)
                    if claimed is None:
                        return
                    delivery = claimed
                    continue
                await store.finish_delivery(delivery)  # acknowledged: never sent again
                return
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the store away: the claim's lease ends, a tick retries
            logger.warning("webhook for watch entry %d: %s", entry.seq, exc)

    async def _post(self, owner: str, url: str, body: bytes) -> None:
        target = await self._target(url)  # again: the name may resolve elsewhere by now
        timestamp = str(int(time.time()))
        headers = {
            "Host": target.host_header,
            "Content-Type": "application/json",
            TIMESTAMP_HEADER: timestamp,
            SIGNATURE_HEADER: signature(await self._secret_of(owner), timestamp, body),
            "User-Agent": self._policy.user_agent,
        }
        sni = target.sni_hostname
        request = self._client.build_request(
            "POST",
            target.request_url(target.addresses[0]),
            headers=headers,
            content=body,
            extensions={"sni_hostname": sni} if sni else None,
        )
        answer = await self._client.send(request)
        if not answer.is_success:
            retry = answer.status_code >= 500 or answer.status_code in (408, 429)
            raise DeliveryFailed(f"the receiver answered {answer.status_code}", retry)

    async def close(self) -> None:
        """Stop deliveries under way and close the client."""
        await stop_all(self._tasks)
        await self._client.aclose()
