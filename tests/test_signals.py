"""Pause requests across processes: heard on a channel, so node boundaries rarely ask Redis."""

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis

from service.signals import PAUSE_RECHECK_S, RedisSignals


@pytest.fixture
async def clients(redis_url: str) -> AsyncIterator[tuple[Redis, Redis, str]]:
    """The API's client and the worker's (named, so its connections can be found)."""
    name = f"worker-{uuid.uuid4().hex[:8]}"
    api, worker = Redis.from_url(redis_url), Redis.from_url(redis_url, client_name=name)
    try:
        yield api, worker, name
    finally:
        await api.aclose()
        await worker.aclose()


async def _dels(client: Redis) -> int:
    stats = await client.info("commandstats")
    return int(stats.get("cmdstat_del", {}).get("calls", 0))


async def _hearing(signals: RedisSignals, thread_id: str) -> None:
    await signals.take_pause(thread_id)  # the first boundary starts the subscription
    for _ in range(200):
        if signals.hearing:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the worker never subscribed")


async def _taken(signals: RedisSignals, thread_id: str, within_s: float) -> int:
    """How many boundaries passed before the pause was taken (-1: it never was)."""
    for boundary in range(int(within_s / 0.01)):
        if await signals.take_pause(thread_id):
            return boundary
        await asyncio.sleep(0.01)
    return -1


async def test_boundaries_ask_redis_only_when_a_pause_was_heard(
    clients: tuple[Redis, Redis, str],
) -> None:
    api_client, worker_client, _ = clients
    prefix = f"test:{uuid.uuid4().hex}"
    api, worker = RedisSignals(api_client, prefix), RedisSignals(worker_client, prefix)
    try:
        await _hearing(worker, "t1")
        await worker.take_pause("t1")
        before = await _dels(api_client)
        assert not any([await worker.take_pause("t1") for _ in range(100)])
        assert await _dels(api_client) - before == 0, "no request heard: nothing asked"

        await api.request_pause("t1")
        assert await _taken(worker, "t1", 2.0) >= 0
        assert not await worker.take_pause("t1"), "a request is taken once"
        assert await _dels(api_client) - before <= 2
    finally:
        await worker.aclose()


async def test_a_request_never_heard_is_found_within_the_recheck(
    clients: tuple[Redis, Redis, str],
) -> None:
    api_client, worker_client, _ = clients
    prefix = f"test:{uuid.uuid4().hex}"
    worker = RedisSignals(worker_client, prefix)
    try:
        await _hearing(worker, "t2")
        # Set as a replica would whose message was lost: the key alone.
        await api_client.set(f"{prefix}:pause:t2", 1)
        boundaries = await _taken(worker, "t2", PAUSE_RECHECK_S * 3)
        assert boundaries >= 0, "the recheck found it"
    finally:
        await worker.aclose()


async def test_a_dropped_subscription_comes_back_and_hears_again(
    clients: tuple[Redis, Redis, str],
) -> None:
    api_client, worker_client, name = clients
    prefix = f"test:{uuid.uuid4().hex}"
    api, worker = RedisSignals(api_client, prefix), RedisSignals(worker_client, prefix)
    try:
        await _hearing(worker, "t3")
        listed = await api_client.client_list(_type="pubsub")
        ids = [entry["id"] for entry in listed if entry.get("name") == name]
        assert ids, "the worker's subscription has a connection of its own"
        for client_id in ids:
            await api_client.client_kill_filter(_id=client_id)
        await api.request_pause("t3")  # maybe published while it was down: still taken
        assert await _taken(worker, "t3", PAUSE_RECHECK_S * 4) >= 0
        await _hearing(worker, "t3")
        await api.request_pause("t3")
        assert await _taken(worker, "t3", 2.0) >= 0
    finally:
        await worker.aclose()
