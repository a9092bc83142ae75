"""Watches over real HTTP on both stores: refreshes on a (test-short) interval, their diffs.

The service searches a loopback stand-in for Tavily (`tests.test_reproduction.Upstream`)
whose pages the test changes between refreshes, so a refresh's diff has something to say.
"""

import asyncio
import hashlib
import hmac
import json
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from app.api import create_app
from app.runtime import open_runtime, running_worker
from app.settings import Settings
from core.options import ResearchRequest
from service.thread_ids import LOCAL_OWNER, public_id
from service.watches import Watches, events_stream, refresh_id
from stores.registry import TERMINAL

from .servers import KEY_A, KEY_B, serve_port, two_key_clients
from .sse import collect
from .test_api import wait_for_status
from .test_reproduction import TOPIC, Upstream, finished, settings_for, upstream  # noqa: F401

WAIT_S = 60.0
# The test-only floor and scheduler period: a watch of a second, looked at ten times a second.
FAST = {"watch_min_seconds": 0.5, "watch_poll_seconds": 0.1}


async def until(check: Callable[[], Awaitable[bool]], what: str) -> None:
    """Poll `check` until it holds, failing after a generous deadline (not a timing)."""
    deadline = time.monotonic() + WAIT_S
    while not await check():
        assert time.monotonic() < deadline, f"gave up waiting: {what}"
        await asyncio.sleep(0.1)


@pytest.fixture
async def client(
    tmp_path: Path,
    upstream: Upstream,  # noqa: F811
    stores: dict[str, Any],
) -> AsyncIterator[httpx.AsyncClient]:
    settings = settings_for(tmp_path / "data", upstream).model_copy(update=FAST | stores)
    with serve_port(create_app(settings), lifespan="on") as port:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:
            yield http


async def entries(client: httpx.AsyncClient, thread_id: str) -> list[dict[str, Any]]:
    answer = await client.get(f"/v1/research/{thread_id}/watch/changes")
    assert answer.status_code == 200, answer.text
    found: list[dict[str, Any]] = answer.json()
    return found


async def test_a_watch_refreshes_its_thread_and_keeps_each_refreshs_diff(
    client: httpx.AsyncClient,
    upstream: Upstream,  # noqa: F811
) -> None:
    started = await client.post("/v1/research", json={"topic": TOPIC})
    watched = started.json()["thread_id"]
    await finished(client, watched)
    assert (await client.get(f"/v1/research/{watched}/watch")).status_code == 404

    answer = await client.post(f"/v1/research/{watched}/watch", json={"every": "PT1S"})
    assert answer.status_code == 201, answer.text
    assert answer.json()["every"] == "PT1S" and answer.json()["refreshes"] == 0
    # The key's stream of entries that changed something, followed from the start.
    stream = {"Accept": "text/event-stream"}
    told = asyncio.create_task(
        collect(client, "/v1/watches/events", until="watch_entry", headers=stream)
    )

    async def refreshed(n: int) -> bool:
        return len(await entries(client, watched)) >= n

    await until(lambda: refreshed(1), "the first refresh's entry")
    # The web changes: the second refresh reads a page whose text is not what it was.
    title, text = upstream.pages["spread"]
    upstream.pages["spread"] = (title, text + " Printing reached Moscow in 1553.")
    await until(lambda: refreshed(2), "the second refresh's entry")
    by_seq = {e["seq"]: e for e in await entries(client, watched)}
    assert (await client.delete(f"/v1/research/{watched}/watch")).status_code == 204
    frames = await asyncio.wait_for(told, WAIT_S)
    assert (await client.get(f"/v1/research/{watched}/watch")).status_code == 404

    first, second = by_seq[1], by_seq[2]
    assert first["previous"] == watched and first["status"] == "completed"
    assert second["previous"] == first["thread_id"], "each refresh is compared with the last"
    assert first["thread_id"] not in (watched, second["thread_id"])
    assert first["changed"] is False and first["diff"]["sources_changed"] == []
    changed_urls = [s["url"] for s in second["diff"]["sources_changed"]]
    assert changed_urls == [f"{upstream.base}/pages/spread"], second["diff"]
    assert second["changed"] is True
    for entry in (first, second):
        detail = (await client.get(f"/v1/research/{entry['thread_id']}")).json()
        assert detail["status"] == "completed"
        assert detail["rerun"] == {"of": watched, "mode": "refresh"}
    # Told once it changed something: the second refresh (the first changed nothing).
    assert [f.event for f in frames] == ["watch_entry"]
    assert frames[0].data["thread_id"] == second["thread_id"]
    assert frames[0].data["watched"] == watched
    # Without asking for a stream: the entries so far, as JSON.
    logged = (await client.get("/v1/watches/events")).json()
    assert [(e["id"], e["event"], e["data"]) for e in logged] == [
        (frames[0].id, "watch_entry", frames[0].data)
    ]


async def test_watch_bounds_validation_and_key_isolation(
    tmp_path: Path, corpus_index: Path
) -> None:
    settings = Settings(
        data_dir=tmp_path / "data",
        corpus_index=corpus_index,
        search_provider="local",
        api_keys=[KEY_A, KEY_B],
    )
    async with two_key_clients(settings) as (a, b):
        thread = (await a.post("/v1/research", json={"topic": TOPIC})).json()["thread_id"]
        url = f"/v1/research/{thread}/watch"
        await finished(a, thread)
        for path in (url, f"{url}/changes"):  # another key's thread: as if there were none
            assert (await b.get(path)).status_code == 404
        assert (await b.post(url, json={"every": "P1D"})).status_code == 404
        for every, says in (
            ("PT30M", "between every 1:00:00"),  # under the hour (no test floor here)
            ("P91D", "90 days"),
            ("1 day", "ISO 8601"),
            ("P", "ISO 8601"),
            ("-P1D", "ISO 8601"),
        ):
            refused = await a.post(url, json={"every": every})
            assert refused.status_code == 422, (every, refused.text)
            error = refused.json()["error"]
            assert error["code"] == "validation_error" and says in error["message"], error
        for body in ({}, {"every": "P1D", "extra": 1}, {"every": 86400}):
            assert (await a.post(url, json=body)).status_code == 422, body
        # A webhook obeys the scraper's SSRF rules: here, none that is not public.
        for hook in (
            "http://127.0.0.1:8080/hook",
            "http://localhost/hook",
            "http://169.254.169.254/latest/meta-data",
            "http://[::1]/hook",
            "ftp://example.com/hook",
            "http://10.0.0.1/hook",
        ):
            refused = await a.post(url, json={"every": "P1D", "webhook": hook})
            assert refused.status_code == 422, (hook, refused.text)
            assert refused.json()["error"]["message"].startswith("webhook: refused"), refused.text
        assert (await a.get(url)).status_code == 404  # nothing was watched

        made = await a.post(url, json={"every": "PT1H"})
        assert made.status_code == 201, made.text
        assert made.json()["every"] == "PT1H" and made.json()["every_seconds"] == 3600
        again = await a.post(url, json={"every": "P1W"})  # a new interval
        assert again.json()["every"] == "P7D"
        assert [w["thread_id"] for w in (await a.get("/v1/watches")).json()] == [thread]
        assert (await b.get("/v1/watches")).json() == []
        assert (await b.delete(url)).status_code == 404
        assert (await a.get(f"{url}/changes")).json() == []
        assert (await a.delete(url)).status_code == 204
        assert (await a.delete(url)).status_code == 404

        # Only a finished run is watched: one waiting for its plan's approval is a 409.
        body = {"topic": TOPIC, "options": {"approval": "plan"}}
        waiting = (await a.post("/v1/research", json=body)).json()["thread_id"]
        await wait_for_status(a, waiting, {"waiting_for_approval"})
        busy = await a.post(f"/v1/research/{waiting}/watch", json={"every": "P1D"})
        assert busy.status_code == 409 and busy.json()["error"]["code"] == "invalid_state"
        # A deleted thread's watch goes with it.
        assert (await a.post(url, json={"every": "P1D"})).status_code == 201
        assert (await a.delete(f"/v1/research/{thread}")).status_code == 204
        assert (await a.get("/v1/watches")).json() == []


class Receiver:
    """A webhook receiver on loopback: refuses the first delivery (503), takes the rest."""

    def __init__(self) -> None:
        self.received: list[tuple[dict[str, str], bytes, int]] = []

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/hook", self.hook, methods=["POST"])])

    async def hook(self, request: Request) -> Response:
        status = 503 if not self.received else 200
        self.received.append((dict(request.headers), await request.body(), status))
        return Response(status_code=status)


async def test_a_webhook_gets_each_changed_entry_signed_after_a_retry(
    tmp_path: Path,
    upstream: Upstream,  # noqa: F811
    stores: dict[str, Any],
) -> None:
    receiver = Receiver()
    with serve_port(receiver.app()) as hook_port:
        settings = settings_for(tmp_path / "data", upstream)
        ports = [*settings.page_allowed_ports, hook_port]
        fast = FAST | stores | {"page_allowed_ports": ports, "watch_webhook_retry_s": 0.05}
        with serve_port(create_app(settings.model_copy(update=fast)), lifespan="on") as port:
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:
                watched = (await http.post("/v1/research", json={"topic": TOPIC})).json()
                watched_id = watched["thread_id"]
                await finished(http, watched_id)
                secret = (await http.get("/v1/watches/secret")).json()["secret"]
                url = f"/v1/research/{watched_id}/watch"
                # Loopback is allowed here, as for the scraper; cloud metadata never is.
                metadata = {"every": "PT1S", "webhook": "http://169.254.169.254/hook"}
                assert (await http.post(url, json=metadata)).status_code == 422
                title, text = upstream.pages["spread"]
                upstream.pages["spread"] = (title, text + " Printing reached Moscow in 1553.")
                hook = f"http://127.0.0.1:{hook_port}/hook"
                made = await http.post(url, json={"every": "PT1S", "webhook": hook})
                assert made.status_code == 201 and made.json()["webhook"] == hook, made.text

                async def delivered() -> bool:
                    return any(status == 200 for _, _, status in receiver.received)

                await until(delivered, "the first changed entry to reach the receiver")
                assert (await http.delete(url)).status_code == 204
    (headers, body, status), (again_headers, again, ok) = receiver.received[:2]
    assert (status, ok) == (503, 200) and again == body, "retried, the same entry"
    timestamp = again_headers["x-research-timestamp"]
    expected = hmac.new(secret.encode(), f"{timestamp}.".encode() + again, hashlib.sha256)
    assert hmac.compare_digest(
        again_headers["x-research-signature"], "sha256=" + expected.hexdigest()
    )
    wrong = hmac.new(b"another key's secret", f"{timestamp}.".encode() + again, hashlib.sha256)
    assert again_headers["x-research-signature"] != "sha256=" + wrong.hexdigest()
    entry = json.loads(again)
    assert entry["seq"] == 1 and entry["changed"] is True and entry["watched"] == watched_id
    assert [s["url"] for s in entry["diff"]["sources_changed"]] == [f"{upstream.base}/pages/spread"]
    assert secret not in again.decode() and secret not in str(again_headers)


class HoldingReceiver:
    """A webhook receiver on loopback that holds every POST open until `release` is set.

    Held requests never succeed (the service is stopped while one waits); once released,
    it takes each POST (200). Records (headers, body, status) per request.
    """

    def __init__(self) -> None:
        self.received: list[tuple[dict[str, str], bytes, int]] = []
        self.arrived = threading.Event()
        self.release = threading.Event()

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/hook", self.hook, methods=["POST"])])

    async def hook(self, request: Request) -> Response:
        body = await request.body()
        if not self.release.is_set():
            self.arrived.set()
            await asyncio.to_thread(self.release.wait, WAIT_S)
            self.received.append((dict(request.headers), body, 0))  # never answered in time
            return Response(status_code=503)
        self.received.append((dict(request.headers), body, 200))
        return Response(status_code=200)

    def acknowledged(self) -> list[tuple[dict[str, str], bytes, int]]:
        return [r for r in self.received if r[2] == 200]


async def test_a_webhook_delivery_cut_by_a_restart_is_resumed_and_not_resent(
    tmp_path: Path,
    upstream: Upstream,  # noqa: F811
    stores: dict[str, Any],
) -> None:
    """The service stops while the receiver holds the first POST: the next one delivers it."""
    receiver = HoldingReceiver()
    with serve_port(receiver.app()) as hook_port:
        settings = settings_for(tmp_path / "data", upstream)
        ports = [*settings.page_allowed_ports, hook_port]
        # A try is its claimant's for three page timeouts (6 s here), then anyone's.
        fast = FAST | stores | {"page_allowed_ports": ports, "page_timeout_s": 2.0}
        settings = settings.model_copy(update=fast | {"watch_webhook_retry_s": 0.05})
        hook = f"http://127.0.0.1:{hook_port}/hook"
        with serve_port(create_app(settings), lifespan="on") as port:
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:
                watched = (await http.post("/v1/research", json={"topic": TOPIC})).json()
                watched_id = watched["thread_id"]
                await finished(http, watched_id)
                secret = (await http.get("/v1/watches/secret")).json()["secret"]
                title, text = upstream.pages["spread"]
                upstream.pages["spread"] = (title, text + " Printing reached Moscow in 1553.")
                url = f"/v1/research/{watched_id}/watch"
                made = await http.post(url, json={"every": "PT1S", "webhook": hook})
                assert made.status_code == 201, made.text
                assert await asyncio.to_thread(receiver.arrived.wait, WAIT_S), "no POST came"
        # The service is stopped with the first entry's POST unanswered.
        receiver.release.set()
        assert receiver.acknowledged() == []
        with serve_port(create_app(settings), lifespan="on") as port:
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:

                async def delivered() -> bool:
                    return bool(receiver.acknowledged())

                await until(delivered, "the cut delivery to be made after the restart")
                first_changed = [e for e in await entries(http, watched_id) if e["changed"]]
                # One day's interval: no more refreshes, so no new entry to deliver.
                await http.post(url, json={"every": "P1D", "webhook": hook})
        # Started again: an acknowledged delivery is not sent again.
        with serve_port(create_app(settings), lifespan="on") as port:
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:
                await asyncio.sleep(1.0)  # ten scheduler ticks after the start-up one
                assert (await http.delete(url)).status_code == 204
    acknowledged = receiver.acknowledged()
    bodies = [json.loads(body) for _, body, _ in acknowledged]
    assert [b["seq"] for b in bodies] == [
        e["seq"] for e in sorted(first_changed, key=lambda e: e["seq"])
    ]
    assert bodies[0]["seq"] == 1 and bodies[0]["changed"] is True
    held = receiver.received[0][1]
    assert acknowledged[0][1] == held, "the entry the restart cut, delivered whole"
    headers, body, _ = acknowledged[0]
    timestamp = headers["x-research-timestamp"]
    expected = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    assert hmac.compare_digest(headers["x-research-signature"], "sha256=" + expected.hexdigest())


class KilledOnce:
    """A watch store whose process 'dies' once at each of two moments (the tick fails there).

    After writing an entry (the write is kept, what follows it in the tick is not), and
    before removing a delivery told (so its next try finds it told already, or not).
    """

    def __init__(self, store: Any) -> None:
        self._store = store
        self.cut: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def add_entry(self, *args: Any) -> bool:
        added: bool = await self._store.add_entry(*args)
        if "add_entry" not in self.cut:
            self.cut.append("add_entry")
            raise RuntimeError("killed after recording the entry")
        return added

    async def finish_delivery(self, *args: Any) -> None:
        if "finish_delivery" not in self.cut:
            self.cut.append("finish_delivery")
            raise RuntimeError("killed before recording the delivery done")
        await self._store.finish_delivery(*args)


async def test_a_kill_around_recording_an_entry_tells_its_event_once(
    tmp_path: Path,
    upstream: Upstream,  # noqa: F811
    stores: dict[str, Any],
) -> None:
    settings = settings_for(tmp_path / "data", upstream).model_copy(
        update={"watch_min_seconds": 0.5, "watch_poll_seconds": 600} | stores
    )
    async with AsyncExitStack() as stack:
        runtime = await stack.enter_async_context(open_runtime(settings))
        if runtime.queue is not None:
            await stack.enter_async_context(running_worker(runtime))
        manager = runtime.manager
        watched = (await manager.start(LOCAL_OWNER, ResearchRequest(topic=TOPIC))).thread_id

        async def stopped(thread_id: str) -> bool:
            record = await runtime.stores.registry.get(thread_id)
            return record is not None and record.status in TERMINAL

        await until(lambda: stopped(watched), "the watched run")
        title, text = upstream.pages["spread"]
        upstream.pages["spread"] = (title, text + " Printing reached Moscow in 1553.")
        watch = await runtime.watches.watch(LOCAL_OWNER, watched, timedelta(seconds=1))
        store = KilledOnce(runtime.stores.watches)
        scheduler = Watches(manager, store)
        due = watch.next_due + timedelta(seconds=1)
        await scheduler.tick(due)  # claims and starts the refresh
        await until(lambda: stopped(refresh_id(watch, 1)), "the refresh")
        for moment in (due, due, due + timedelta(minutes=5), due + timedelta(minutes=10)):
            await scheduler.tick(moment)  # each tick after a kill: what a restart runs
        logged = await manager.events.read(events_stream(LOCAL_OWNER))
        told = [e.data["seq"] for e in logged if e.data.get("watched") == public_id(watched)]
        later = due + timedelta(days=1)
        left = [d for d in await store.deliveries_due(later) if d.thread_id == watched]
        await runtime.stores.watches.delete(watched)
        await manager.shutdown()
    assert told == [1], f"entry 1 told {len(told)} times (cut at {store.cut})"
    assert store.cut == ["add_entry", "finish_delivery"] and left == []


async def test_a_keys_watch_events_carry_only_its_own_entries(
    tmp_path: Path,
    upstream: Upstream,  # noqa: F811
    stores: dict[str, Any],
) -> None:
    """Two keys watch two threads each: each key's stream and JSON list hold its entries only."""
    settings = settings_for(tmp_path / "data", upstream).model_copy(
        update=FAST | stores | {"api_keys": [SecretStr(KEY_A), SecretStr(KEY_B)]}
    )
    async with two_key_clients(settings) as (a, b):
        watched: dict[str, list[str]] = {"a": [], "b": []}
        for name, client in (("a", a), ("b", b)):
            for _ in range(2):
                started = await client.post("/v1/research", json={"topic": TOPIC})
                watched[name].append(started.json()["thread_id"])
        for name, client in (("a", a), ("b", b)):
            for thread in watched[name]:
                await finished(client, thread)
        # Each watch's first refresh reads a changed page: an entry worth telling each.
        title, text = upstream.pages["spread"]
        upstream.pages["spread"] = (title, text + " Printing reached Moscow in 1553.")
        stream = {"Accept": "text/event-stream"}
        told = {
            name: asyncio.create_task(
                collect(client, "/v1/watches/events", headers=stream, limit=2)
            )
            for name, client in (("a", a), ("b", b))
        }
        for name, client in (("a", a), ("b", b)):
            for thread in watched[name]:
                made = await client.post(f"/v1/research/{thread}/watch", json={"every": "PT1S"})
                assert made.status_code == 201, made.text
        frames = {name: await asyncio.wait_for(task, WAIT_S) for name, task in told.items()}
        for name, client in (("a", a), ("b", b)):

            async def all_told(client: httpx.AsyncClient = client, name: str = name) -> bool:
                logged = (await client.get("/v1/watches/events")).json()
                return len({e["data"]["watched"] for e in logged}) >= len(watched[name])

            await until(all_told, f"key {name}'s entries")
        logged = {
            name: (await client.get("/v1/watches/events")).json()
            for name, client in (("a", a), ("b", b))
        }
        for name, client in (("a", a), ("b", b)):
            for thread in watched[name]:
                await client.delete(f"/v1/research/{thread}/watch")
        for name, other in (("a", b), ("b", a)):
            mine = set(watched[name])
            seen = [f.data for f in frames[name]] + [e["data"] for e in logged[name]]
            assert {d["watched"] for d in seen} == mine, (name, seen)
            for data in seen:  # the refresh each names is the key's own thread too
                assert (await other.get(f"/v1/research/{data['thread_id']}")).status_code == 404
