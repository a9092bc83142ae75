"""An outage told once: a warning when Redis goes, one when it is seen answering again."""

import logging

import pytest
from redis.exceptions import TimeoutError as RedisTimeoutError

from stores.redis_outage import Outage


async def test_a_round_that_asks_redis_nothing_does_not_say_redis_is_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    outage = Outage("the run queue")
    with caplog.at_level(logging.WARNING, logger="stores.redis_outage"):
        for _ in range(3):
            async with outage.tolerated():
                raise RedisTimeoutError("Timeout reading from redis")
            async with outage.tolerated(confirms=False):  # no job to abort: no command sent
                pass
        assert outage.ongoing
        async with outage.tolerated():  # a round that reached Redis
            pass
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 2, said
    assert "not answering" in said[0] and "answers again" in said[1]
    assert not outage.ongoing


async def test_waiting_past_the_limit_gives_up_quietly() -> None:
    outage = Outage("event log followers")
    calls = 0

    async def away() -> int:
        nonlocal calls
        calls += 1
        raise RedisTimeoutError("Timeout reading from redis")

    assert await outage.waited(away, 0.0) is None
    assert calls == 1 and outage.ongoing

    async def back() -> int:
        return 7

    assert await outage.waited(back, 0.0) == 7 and not outage.ongoing
