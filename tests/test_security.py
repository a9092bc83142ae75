"""The service as an attacker meets it: over real HTTP, on SQLite and on Redis.

Two keys share one server; key A tries every id it can name to read, alter or detect
key B's threads, runs and streams.
"""

import asyncio
import contextlib
import os
import signal
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from app.api import create_app
from app.serving import guarded_protocol
from app.settings import Settings

from .redis_server import redis_server
from .servers import KEY_A, KEY_B, bearer, serve_port, two_key_clients
from .sse import collect
from .support import TOPIC

Clients = Callable[..., Any]


@pytest.fixture
def service(tmp_path: Path, corpus_index: Path, stores: dict[str, Any]) -> Clients:
    """A server with two keys; yields one httpx client per key."""

    @asynccontextmanager
    async def running(
        **overrides: Any,
    ) -> AsyncIterator[tuple[httpx.AsyncClient, httpx.AsyncClient]]:
        settings = Settings(
            data_dir=tmp_path / "data",
            corpus_index=corpus_index,
            search_provider="local",
            api_keys=[KEY_A, KEY_B],
            **(stores | overrides),
        )
        async with two_key_clients(settings) as (a, b):
            yield a, b

    return running


def _name() -> str:
    """A thread name of B's (unique: the Redis server lives for the whole session)."""
    return f"support-chat-{uuid.uuid4().hex[:8]}"


async def _research(client: httpx.AsyncClient, thread_id: str) -> str:
    """Run research on a named Platform thread to its end; return the run id."""
    created = await client.post("/threads", json={"thread_id": thread_id})
    assert created.status_code == 200, created.text
    assert created.json()["thread_id"] == thread_id
    run = await client.post(
        f"/threads/{thread_id}/runs/wait",
        json={"assistant_id": "research", "input": {"topic": TOPIC}},
    )
    assert run.status_code == 200, run.text
    assert run.json()["final_report"], "the values of the caller's own thread"
    runs = (await client.get(f"/threads/{thread_id}/runs")).json()
    assert runs[0]["thread_id"] == thread_id and runs[0]["status"] == "success"
    return str(runs[0]["run_id"])


async def test_a_key_cannot_reach_another_keys_run_logs_through_thread_names(
    service: Clients,
) -> None:
    async with service() as (a, b):
        chat = _name()
        run_id = await _research(b, chat)
        for name in (
            f"platform-runs:{chat}",
            f"platform-run:{run_id}",
            f"{chat}@{'x' * 8}",
            f"../{chat}",
            "x" * 129,
        ):
            refused = await a.post("/threads", json={"thread_id": name})
            assert refused.status_code == 422, (name, refused.text)
            assert "thread id is 1-128 letters" in refused.json()["detail"]
            assert (await a.get(f"/v1/research/{name}/events")).status_code == 404
            assert (await a.get(f"/threads/{name}/runs")).status_code == 404
            assert (await a.delete(f"/threads/{name}")).status_code == 404
        # B's thread, its runs and its approvals still work.
        runs = await b.get(f"/threads/{chat}/runs")
        assert runs.status_code == 200 and runs.json()[0]["run_id"] == run_id
        joined = await collect(b, f"/threads/{chat}/runs/{run_id}/stream", until="end")
        assert joined[0].event == "metadata" and joined[-1].event == "end"


async def test_a_key_cannot_detect_read_or_alter_another_keys_named_thread(
    service: Clients,
) -> None:
    async with service() as (a, b):
        chat = _name()
        run_id = await _research(b, chat)
        b_state = (await b.get(f"/threads/{chat}/state")).json()
        assert b_state["checkpoint"]["thread_id"] == chat

        # A asks for the same name: answered exactly as for a name nobody uses.
        for path in (f"/threads/{chat}", f"/v1/research/{chat}"):
            assert (await a.get(path)).status_code == 404
        assert (await a.get(f"/threads/{chat}/runs/{run_id}")).status_code == 404
        created = await a.post("/threads", json={"thread_id": chat})
        assert created.status_code == 200, "the name is A's to use, as any unused one"
        again = await a.post("/threads", json={"thread_id": chat})
        assert again.status_code == 409, "A's own thread is there now"
        same = await a.post("/threads", json={"thread_id": chat, "if_exists": "do_nothing"})
        assert same.json()["metadata"] == {} and same.json()["status"] == "idle"
        assert (await a.get(f"/threads/{chat}/runs")).json() == []
        await a.patch(f"/threads/{chat}", json={"metadata": {"owner": "a"}})
        assert (await a.delete(f"/threads/{chat}")).status_code == 204

        # B's thread is untouched by all of it.
        thread = (await b.get(f"/threads/{chat}")).json()
        assert thread["metadata"] == {} and thread["status"] == "idle"
        assert thread["values"]["final_report"]
        listed = (await b.get("/v1/research")).json()["items"]
        assert chat in [t["thread_id"] for t in listed]
        listed = (await a.get("/v1/research")).json()["items"]
        searched = (await a.post("/threads/search", json={"limit": 1000})).json()
        assert chat not in [t["thread_id"] for t in listed + searched]


async def test_a_generated_thread_id_of_another_key_is_not_found_and_not_taken(
    service: Clients,
) -> None:
    async with service() as (a, b):
        started = await b.post("/v1/research", json={"topic": TOPIC})
        theirs = started.json()["thread_id"]
        await collect(b, f"/v1/research/{theirs}/events")
        for method, path in (
            ("GET", f"/v1/research/{theirs}"),
            ("GET", f"/v1/research/{theirs}/report"),
            ("GET", f"/v1/research/{theirs}/notes"),
            ("GET", f"/v1/research/{theirs}/sources/1"),
            ("POST", f"/v1/research/{theirs}/rerun"),
            ("GET", f"/v1/research/{theirs}/diff/{theirs}"),
            ("GET", f"/v1/research/{theirs}/export"),
            ("GET", f"/v1/research/{theirs}/events"),
            ("POST", f"/v1/research/{theirs}/cancel"),
            ("DELETE", f"/v1/research/{theirs}"),
            ("GET", f"/threads/{theirs}/state"),
            ("POST", f"/threads/{theirs}/history"),
        ):
            answer = await a.request(method, path, json={} if method == "POST" else None)
            assert answer.status_code == 404, (method, path, answer.text)
        # A's own run cannot be compared with B's: B's is not found either way.
        mine = (await a.post("/v1/research", json={"topic": TOPIC})).json()["thread_id"]
        await collect(a, f"/v1/research/{mine}/events")
        assert (await a.get(f"/v1/research/{mine}/diff/{theirs}")).status_code == 404
        assert (await b.get(f"/v1/research/{theirs}/diff/{mine}")).status_code == 404
        assert (await a.get(f"/v1/research/{mine}/diff/{mine}")).status_code == 200
        # Naming B's id gives A a thread of its own; B's is unchanged.
        assert (await a.post("/threads", json={"thread_id": theirs})).status_code == 200
        assert (await b.get(f"/v1/research/{theirs}")).json()["status"] == "completed"
        assert (await a.get(f"/threads/{theirs}")).json()["status"] == "idle"


# -- bodies: the key first, a size cap while reading, strict JSON -------------------------


async def _raw_request(port: int, head: bytes, body_part: bytes) -> bytes:
    """Send a request head and part of its body; return what the server answers and closes."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(head + body_part)
        await writer.drain()
        # Functional, not a speed check: a server that waits for the rest never answers.
        return await asyncio.wait_for(reader.read(), timeout=10)  # until it closes
    finally:
        writer.close()


def _port(client: httpx.AsyncClient) -> int:
    port = client.base_url.port
    assert port is not None
    return port


async def test_a_huge_body_without_a_key_is_refused_before_it_is_read(service: Clients) -> None:
    async with service() as (a, _):
        head = (
            b"POST /v1/research HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 400000000\r\n\r\n"
        )
        answer = await _raw_request(_port(a), head, b'{"topic": "' + b"x" * 4096)
        assert answer.startswith(b"HTTP/1.1 401"), answer[:200]
        assert b"connection: close" in answer.lower()
        assert b'"code":"unauthorized"' in answer.replace(b" ", b"")


async def test_an_oversized_body_gets_413_while_it_is_read(service: Clients) -> None:
    async with service(max_body_bytes=4096) as (a, _):
        big = {"topic": TOPIC, "options": {"approval": "none"}, "pad": "x" * 5000}
        declared = await a.post("/v1/research", json=big)
        assert declared.status_code == 413, declared.text
        error = declared.json()["error"]
        assert error["code"] == "payload_too_large" and "4096 bytes" in error["message"]

        # No Content-Length: counted as it is read. Sent in one write, so the server reads
        # all of it before it answers and closes (no reset of unread data).
        head = (
            b"POST /threads HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Authorization: Bearer " + KEY_A.encode() + b"\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        chunk = b"3e8\r\n" + b" " * 1000 + b"\r\n"
        answer = await _raw_request(_port(a), head, chunk * 5)
        assert answer.startswith(b"HTTP/1.1 413"), answer[:300]
        assert b"4096 bytes" in answer and b"connection: close" in answer.lower()
        assert (await a.get("/v1/research")).status_code == 200, "the server goes on"


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (
            {
                "metadata": {
                    "a": {
                        "b": {
                            "c": {
                                "d": {
                                    "e": {
                                        "f": {
                                            "g": {
                                                "h": {
                                                    "i": {
                                                        "j": {
                                                            "k": {
                                                                "l": {
                                                                    "m": {
                                                                        "n": {"o": {"p": {"q": 1}}}
                                                                    }
                                                                }
                                                            }
                                                        }
                                                    }
                                                }
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            },
            "deeper than 16",
        ),
        ({"metadata": {"blob": "x" * 20_000}}, "the limit is 16384"),
    ],
    ids=["deep", "large"],
)
async def test_metadata_is_bounded_and_nothing_is_stored(
    service: Clients, body: dict[str, Any], says: str
) -> None:
    async with service() as (a, _):
        name = _name()
        refused = await a.post("/threads", json={"thread_id": name, **body})
        assert refused.status_code == 422 and says in refused.json()["detail"], refused.text
        assert (await a.get(f"/threads/{name}")).status_code == 404
        patched = await a.post("/threads", json={"thread_id": name})
        assert (await a.patch(f"/threads/{name}", json=body)).status_code == 422
        assert (await a.get(f"/threads/{name}")).json()["metadata"] == {}
        assert patched.status_code == 200
        assert (await a.post("/threads/search", json={})).status_code == 200


async def test_hostile_json_is_a_clear_4xx_with_nothing_stored(service: Clients) -> None:
    async with service() as (a, _):
        name = _name()
        json_type = {"Content-Type": "application/json"}
        deep = '{"a":' * 900 + "1" + "}" * 900
        nested = f'{{"thread_id": "{name}", "metadata": {deep}}}'
        surrogate = f'{{"thread_id": "{name}", "metadata": {{"a": "\\udfff"}}}}'
        for text in (nested, surrogate):
            answer = await a.post("/threads", content=text, headers=json_type)
            assert answer.status_code == 422, answer.text
            assert "not valid JSON" in answer.json()["detail"]
        topic = await a.post("/v1/research", content='{"topic": "tea \\ud800"}', headers=json_type)
        assert topic.status_code == 422
        assert topic.json()["error"]["details"]["fields"][0]["field"] == ""
        assert topic.json()["error"]["message"].startswith("body: not valid JSON (")
        assert (await a.get(f"/threads/{name}")).status_code == 404
        assert (await a.post("/threads/search", json={})).status_code == 200

        as_text = await a.post(
            "/v1/research", content='{"topic": "tea"}', headers={"Content-Type": "text/plain"}
        )
        assert as_text.status_code == 415
        assert as_text.json()["error"]["code"] == "unsupported_media_type"
        cursor = await a.get("/v1/research", params={"cursor": "not-a-cursor"})
        assert cursor.status_code == 422 and "cursor" in cursor.json()["error"]["message"]


async def test_hostile_event_positions_replay_or_end_the_stream(service: Clients) -> None:
    async with service() as (a, _):
        chat = _name()
        run_id = await _research(a, chat)
        stream = f"/threads/{chat}/runs/{run_id}/stream"
        everything = await collect(a, stream, until="end")
        odd = await collect(a, stream, until="end", headers={"Last-Event-ID": b"\xb2"})  # type: ignore[dict-item]
        assert [f.id for f in odd] == [f.id for f in everything], "not a number: from the start"
        for position in ("9" * 30, str(everything[-1].id)):
            after_end = await collect(a, stream, headers={"Last-Event-ID": position})
            assert after_end == [], "the stream has ended: nothing left, and it closes"

        started = (await a.post("/v1/research", json={"topic": TOPIC})).json()["thread_id"]
        events = f"/v1/research/{started}/events"
        done = await collect(a, events)
        assert (await a.get(events, params={"after": "762779312450619179008"})).status_code == 422
        for position in ("9" * 30, str(done[-1].id)):
            assert await collect(a, events, headers={"Last-Event-ID": position}) == []
        tail = await collect(a, events, headers={"Last-Event-ID": str(done[-2].id)})
        assert [f.event for f in tail] == ["done"]


# -- bursts past the limits ---------------------------------------------------------------


async def test_a_burst_past_the_run_limits_gets_429_and_the_service_keeps_serving(
    service: Clients,
) -> None:
    limits = {"max_concurrent_runs": 2, "max_queued_runs": 5, "simulate_latency_ms": 2000}
    async with service(**limits) as (a, b):
        answers = await asyncio.gather(
            *(
                (a if i % 2 else b).post("/v1/research", json={"topic": f"{TOPIC} {i}"})
                for i in range(60)
            )
        )
        codes = sorted(r.status_code for r in answers)
        assert set(codes) == {202, 429}, codes
        accepted = [r for r in answers if r.status_code == 202]
        assert len(accepted) == 7, f"{len(accepted)} runs accepted, the limit is 2 + 5"
        refused = next(r for r in answers if r.status_code == 429)
        assert refused.json()["error"]["code"] == "too_many_runs"
        assert (await a.get("/v1/research")).status_code == 200, "the service keeps serving"
        for answer in accepted:  # leave no run behind on the shared Redis
            owner = a if answer.request.headers["authorization"].endswith(KEY_A) else b
            await owner.post(f"/v1/research/{answer.json()['thread_id']}/cancel")
        again = await a.post("/v1/research", json={"topic": TOPIC})
        assert again.status_code == 202, "places come back as runs end"
        await a.post(f"/v1/research/{again.json()['thread_id']}/cancel")


# -- a stalled Redis ------------------------------------------------------------------------


async def test_a_stalled_redis_gives_503_and_the_service_recovers(
    tmp_path: Path, corpus_index: Path
) -> None:
    """Redis stopped with SIGSTOP (a stall, not a crash): answers are 503, not a hang."""
    with redis_server() as url:
        pid = int(redis.Redis.from_url(url).info("server")["process_id"])
        settings = Settings(
            data_dir=tmp_path / "data",
            corpus_index=corpus_index,
            search_provider="local",
            api_keys=[KEY_A],
            redis_url=url,
        )
        with serve_port(create_app(settings), lifespan="on") as port:
            async with httpx.AsyncClient(
                base_url=f"http://127.0.0.1:{port}", headers=bearer(KEY_A), timeout=30
            ) as a:
                thread_id = (await a.post("/v1/research", json={"topic": TOPIC})).json()[
                    "thread_id"
                ]
                await collect(a, f"/v1/research/{thread_id}/events")
                os.kill(pid, signal.SIGSTOP)
                try:
                    for method, path in (
                        ("GET", "/v1/research"),
                        ("GET", f"/v1/research/{thread_id}"),
                        ("POST", "/v1/research"),
                        ("GET", "/readyz"),
                    ):
                        body = {"topic": TOPIC} if method == "POST" else None
                        answer = await a.request(method, path, json=body)
                        assert answer.status_code == 503, (path, answer.text)
                        assert answer.json()["error"]["code"] == "backend_unavailable"
                finally:
                    os.kill(pid, signal.SIGCONT)
                assert (await a.get(f"/v1/research/{thread_id}")).status_code == 200
                assert (await a.get("/readyz")).status_code == 200


# -- slow clients ---------------------------------------------------------------------------


@asynccontextmanager
async def _trickling(port: int, count: int) -> AsyncIterator[list[asyncio.StreamReader]]:
    """`count` connections that send half a request head and then nothing (slowloris)."""
    readers, writers = [], []
    try:
        for _ in range(count):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writers.append(writer)
            writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
            with contextlib.suppress(ConnectionError):  # closed already to make room
                await writer.drain()
            readers.append(reader)
        yield readers
    finally:
        for writer in writers:
            writer.close()
        await asyncio.gather(*(w.wait_closed() for w in writers), return_exceptions=True)


async def _closed_by_server(reader: asyncio.StreamReader) -> bool:
    # Functional bound, not a speed check: a connection the server keeps never ends.
    try:
        return await asyncio.wait_for(reader.read(), timeout=10) == b""
    except ConnectionResetError:  # closed with its unanswered head: closed all the same
        return True
    except TimeoutError:
        return False


@pytest.mark.parametrize("header_timeout_s", [1.0, 60.0], ids=["deadline", "cap"])
async def test_slow_clients_are_closed_and_do_not_starve_others(
    tmp_path: Path, corpus_index: Path, header_timeout_s: float
) -> None:
    settings = Settings(
        data_dir=tmp_path / "data",
        corpus_index=corpus_index,
        search_provider="local",
        header_timeout_s=header_timeout_s,
        max_connections=40,
    )
    app = create_app(settings)
    with serve_port(app, lifespan="on", http=guarded_protocol(settings)) as port:
        async with (
            _trickling(port, 60) as slow,
            httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as client,
        ):
            assert (await client.get("/healthz")).status_code == 200
            if header_timeout_s < 10:  # every one is closed once its head is overdue
                assert all(await asyncio.gather(*(_closed_by_server(r) for r in slow)))
            else:  # the oldest ones made room for newer connections
                closed = await asyncio.gather(*(_closed_by_server(r) for r in slow[:21]))
                assert all(closed), [i for i, c in enumerate(closed) if not c]
                assert not any(r.at_eof() for r in slow[-39:])


async def _stream_status(client: httpx.AsyncClient, url: str) -> httpx.Response:
    """Open an event stream, read its status line (and a refusal's body), close it."""
    async with client.stream("GET", url) as response:
        if response.status_code != 200:
            await response.aread()
        return response


async def test_past_the_stream_cap_a_new_stream_gets_503(service: Clients) -> None:
    async with service(max_streams=2) as (a, _):
        started = await a.post(
            "/v1/research", json={"topic": TOPIC, "options": {"approval": "plan"}}
        )
        events = f"/v1/research/{started.json()['thread_id']}/events"
        await collect(a, events, until="approval_required")  # it waits: streams stay open
        async with a.stream("GET", events) as one, a.stream("GET", events) as two:
            assert one.status_code == two.status_code == 200
            # Each is under way (counted) once an event is out. The line iterators are
            # kept: one let go is closed by the garbage collector, and its stream with it.
            readers = [one.aiter_lines(), two.aiter_lines()]
            for lines in readers:
                while not (await anext(lines)).startswith("id:"):
                    pass
            third = await _stream_status(a, events)
            assert third.status_code == 503 and third.headers["retry-after"] == "5"
            assert third.json()["error"]["code"] == "too_many_streams"
        # Closed streams give their places back, once the server has seen them go.
        for _ in range(500):
            if (await _stream_status(a, events)).status_code == 200:
                break
            await asyncio.sleep(0.01)  # polling the server, not a timed wait
        else:
            raise AssertionError("the places of closed streams never came back")


async def test_a_named_threads_streams_show_the_clients_id_only(service: Clients) -> None:
    async with service() as (_, b):
        chat = _name()
        assert (await b.post("/threads", json={"thread_id": chat})).status_code == 200
        body = {
            "assistant_id": "research",
            "input": {"topic": TOPIC},
            "stream_mode": ["debug", "messages-tuple", "values"],
        }
        async with b.stream("POST", f"/threads/{chat}/runs/stream", json=body) as response:
            assert response.status_code == 200
            text = (await response.aread()).decode()
        assert "event: end" in text and f'"thread_id":"{chat}"' in text.replace(" ", "")
        assert "@key-" not in text, "the stored id (with its key's tag) stays inside"
        state = (await b.post(f"/threads/{chat}/history", json={})).text
        assert "@key-" not in state and chat in state
