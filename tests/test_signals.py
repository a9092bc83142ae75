"""Pause requests across processes: heard on a channel, so node boundaries rarely ask Redis."""

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from redis.asyncio import Redis

from stores.redis_batches import RedisBatches
from stores.redis_signals import RedisSignals

RECHECK_S = 1.0  # shorter than the service's, so that the tests of it are quick


@dataclass
class Sides:
    """An API replica's signals and a worker's, on clients of their own."""

    api: RedisSignals
    worker: RedisSignals
    client: Redis  # the API's client, for looking at the server
    worker_name: str  # the worker's connections' name
    prefix: str


@pytest.fixture
async def sides(redis_url: str) -> AsyncIterator[Sides]:
    name = f"worker-{uuid.uuid4().hex[:8]}"
    prefix = f"test:{uuid.uuid4().hex}"
    api_client = Redis.from_url(redis_url)
    worker_client = Redis.from_url(redis_url, client_name=name)
    worker = RedisSignals(RedisBatches(worker_client), prefix, recheck_s=RECHECK_S)
    try:
        yield Sides(
            RedisSignals(RedisBatches(api_client), prefix), worker, api_client, name, prefix
        )
    finally:
        await worker.aclose()
        await api_client.aclose()
        await worker_client.aclose()


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


async def test_boundaries_ask_redis_only_when_a_pause_was_heard(sides: Sides) -> None:
    await _hearing(sides.worker, "t1")
    await sides.worker.take_pause("t1")
    before = await _dels(sides.client)
    assert not any([await sides.worker.take_pause("t1") for _ in range(100)])
    assert await _dels(sides.client) - before == 0, "no request heard: nothing asked"

    await sides.api.request_pause("t1")
    assert await _taken(sides.worker, "t1", 2.0) >= 0
    assert not await sides.worker.take_pause("t1"), "a request is taken once"
    assert await _dels(sides.client) - before <= 2


async def test_a_request_never_heard_is_found_within_the_recheck(sides: Sides) -> None:
    await _hearing(sides.worker, "t2")
    # Set as a replica would whose message was lost: the key alone.
    await sides.client.set(f"{sides.prefix}:pause:t2", 1)
    assert await _taken(sides.worker, "t2", RECHECK_S * 3) >= 0, "the recheck found it"


async def test_a_dropped_subscription_comes_back_and_hears_again(sides: Sides) -> None:
    await _hearing(sides.worker, "t3")
    listed = await sides.client.client_list(_type="pubsub")
    ids = [entry["id"] for entry in listed if entry.get("name") == sides.worker_name]
    assert ids, "the worker's subscription has a connection of its own"
    for client_id in ids:
        await sides.client.client_kill_filter(_id=client_id)
    await sides.api.request_pause("t3")  # maybe published while it was down: still taken
    assert await _taken(sides.worker, "t3", RECHECK_S * 4) >= 0
    await _hearing(sides.worker, "t3")
    await sides.api.request_pause("t3")
    assert await _taken(sides.worker, "t3", 2.0) >= 0
