"""Script calls of concurrent callers share pipelines, each keeping its own outcome."""

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis
from redis.exceptions import ResponseError

from stores.redis_scripts import ScriptBatches

ECHO = """
if ARGV[1] == 'bad' then return redis.error_reply('bad argument') end
return ARGV[1]
"""


@pytest.fixture
async def named(redis_url: str) -> AsyncIterator[tuple[Redis, str]]:
    """A client whose connections carry a name of their own, so the server can count them."""
    name = f"batch-{uuid.uuid4().hex[:8]}"
    client = Redis.from_url(redis_url, client_name=name)
    try:
        yield client, name
    finally:
        await client.aclose()


async def _connections(client: Redis, name: str) -> int:
    listed = await client.client_list()
    return sum(1 for entry in listed if entry.get("name") == name)


async def test_a_burst_of_calls_goes_over_one_connection(named: tuple[Redis, str]) -> None:
    client, name = named
    script = client.register_script(ECHO + f"-- {uuid.uuid4().hex}")  # unknown to the server
    batches = ScriptBatches(client)
    replies = await asyncio.gather(*(batches.call(script, [], [str(i)]) for i in range(300)))
    assert replies == [str(i).encode() for i in range(300)]
    # Called one by one, 300 concurrent calls open a connection each.
    assert await _connections(client, name) <= 2
    direct = await asyncio.gather(*(script(args=[str(i)]) for i in range(300)))
    assert direct == replies
    assert await _connections(client, name) > 10, "the comparison shows what batching saves"


async def test_a_failing_call_fails_alone(named: tuple[Redis, str]) -> None:
    client, _ = named
    script = client.register_script(ECHO)
    batches = ScriptBatches(client)
    calls = [batches.call(script, [], [arg]) for arg in ("a", "bad", "c")]
    outcomes = await asyncio.gather(*calls, return_exceptions=True)
    assert outcomes[0] == b"a" and outcomes[2] == b"c"
    assert isinstance(outcomes[1], ResponseError) and "bad argument" in str(outcomes[1])


async def test_scripts_are_loaded_again_after_the_server_forgot_them(
    named: tuple[Redis, str],
) -> None:
    client, _ = named
    script = client.register_script(ECHO)
    batches = ScriptBatches(client)
    assert await batches.call(script, [], ["before"]) == b"before"
    await client.script_flush()
    replies = await asyncio.gather(*(batches.call(script, [], [str(i)]) for i in range(5)))
    assert replies == [str(i).encode() for i in range(5)]
    await batches.drain()
