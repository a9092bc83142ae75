"""Commands and script calls of concurrent callers share pipelines, each keeping its own outcome."""

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis
from redis.exceptions import LockNotOwnedError, ResponseError

from stores.redis_batches import RedisBatches

ECHO = """
if ARGV[1] == 'bad' then return redis.error_reply('bad argument') end
return ARGV[1]
"""
# Long past a lock's 0.3 s lifetime: a safety net against a hang, not a timing.
EXPIRY_WAIT_S = 10.0


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
    batches = RedisBatches(client)
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
    batches = RedisBatches(client)
    calls = [batches.call(script, [], [arg]) for arg in ("a", "bad", "c")]
    outcomes = await asyncio.gather(*calls, return_exceptions=True)
    assert outcomes[0] == b"a" and outcomes[2] == b"c"
    assert isinstance(outcomes[1], ResponseError) and "bad argument" in str(outcomes[1])


async def test_scripts_are_loaded_again_after_the_server_forgot_them(
    named: tuple[Redis, str],
) -> None:
    client, _ = named
    script = client.register_script(ECHO)
    batches = RedisBatches(client)
    assert await batches.call(script, [], ["before"]) == b"before"
    await client.script_flush()
    replies = await asyncio.gather(*(batches.call(script, [], [str(i)]) for i in range(5)))
    assert replies == [str(i).encode() for i in range(5)]
    await batches.drain()


async def test_plain_commands_share_the_pipelines_and_are_parsed_as_the_client_does(
    named: tuple[Redis, str],
) -> None:
    client, name = named
    key = f"batch:{uuid.uuid4().hex}"
    await client.hset(key, mapping={"a": "1", "b": "2"})
    await client.set(f"{key}:text", "x")
    batches = RedisBatches(client)
    reads = [batches.command(lambda pipe: pipe.hgetall(key)) for _ in range(200)]
    wrong = batches.command(lambda pipe: pipe.hgetall(f"{key}:text"))  # a key of another type
    assert await asyncio.gather(*reads) == [{b"a": b"1", b"b": b"2"}] * 200
    with pytest.raises(ResponseError, match="WRONGTYPE"):
        await wrong
    assert await _connections(client, name) <= 2


async def test_a_read_queued_after_a_write_sees_it(named: tuple[Redis, str]) -> None:
    client, _ = named
    key = f"batch:{uuid.uuid4().hex}"
    batches = RedisBatches(client)
    written = [batches.command(lambda pipe, n=n: pipe.rpush(key, n)) for n in range(50)]
    read = batches.command(lambda pipe: pipe.lrange(key, 0, -1))
    await asyncio.gather(*written)
    assert await read == [str(n).encode() for n in range(50)]


async def test_a_batched_lock_excludes_other_holders_and_expires(named: tuple[Redis, str]) -> None:
    client, _ = named
    batches = RedisBatches(client)
    name = f"lock:{uuid.uuid4().hex}"
    first = batches.lock(name, timeout=0.3, thread_local=False)
    second = batches.lock(name, timeout=0.3, thread_local=False)
    assert await first.acquire(blocking=False)
    assert not await second.acquire(blocking=False)
    # The first holder died: its lock runs out (a hang fails after EXPIRY_WAIT_S).
    async with asyncio.timeout(EXPIRY_WAIT_S):
        while await client.exists(name):
            await asyncio.sleep(0.01)  # polling Redis for the expiry, not a timed wait
    assert await second.acquire(blocking=False)
    with pytest.raises(LockNotOwnedError):
        await first.release()  # it is the second's now
    await second.release()
    assert await client.exists(name) == 0


async def test_a_burst_of_locks_goes_over_few_connections(named: tuple[Redis, str]) -> None:
    client, name = named
    batches = RedisBatches(client)
    locks = [batches.lock(f"lock:{uuid.uuid4().hex}", timeout=5) for _ in range(200)]
    assert all(await asyncio.gather(*(lock.acquire() for lock in locks)))
    await asyncio.gather(*(lock.release() for lock in locks))
    assert await _connections(client, name) <= 2
