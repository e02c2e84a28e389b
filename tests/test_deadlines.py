"""`baton.deadlines`: `asyncio.timeout`'s behaviour for many waits on one timer."""

from __future__ import annotations

import asyncio
import gc
import time
import weakref

import pytest

from baton.deadlines import Deadlines

TICK = 0.01


async def test_a_block_past_its_limit_raises_timeout_within_a_tick() -> None:
    deadlines = Deadlines(TICK)
    started = time.monotonic()
    with pytest.raises(TimeoutError), deadlines.within(0.05):
        await asyncio.sleep(5)
    took = time.monotonic() - started
    assert 0.05 <= took < 0.05 + TICK + 0.5  # a tick late at most, and a busy machine's slack
    await asyncio.sleep(0)  # no cancellation is left over for the task's next wait


async def test_a_block_done_in_time_leaves_nothing_behind() -> None:
    deadlines = Deadlines(TICK)
    with deadlines.within(0.05):
        await asyncio.sleep(0.001)
    await asyncio.sleep(0.1)  # past the limit it had: nothing cancels the task now
    assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]


async def test_many_blocks_share_a_timer_and_each_ends_at_its_own_limit() -> None:
    deadlines = Deadlines(TICK)
    ended: dict[int, str] = {}

    async def one(n: int) -> None:
        limit, wait = (0.05, 5.0) if n % 2 else (5.0, 0.05)
        try:
            with deadlines.within(limit):
                await asyncio.sleep(wait)
            ended[n] = "done"
        except TimeoutError:
            ended[n] = "timed out"

    await asyncio.wait_for(asyncio.gather(*(one(n) for n in range(100))), 3)
    assert ended == {n: "timed out" if n % 2 else "done" for n in range(100)}


async def test_a_cancellation_from_elsewhere_goes_through_as_it_came() -> None:
    deadlines = Deadlines(TICK)
    inside = asyncio.Event()

    async def waiting(limit: float) -> None:
        with deadlines.within(limit):
            inside.set()
            await asyncio.sleep(5)

    for limit in (5.0, 0.0):  # before its limit, and once past it too
        inside.clear()
        task = asyncio.create_task(waiting(limit))
        await inside.wait()
        if limit == 0.0:
            await asyncio.sleep(TICK * 3)  # expired: the timer cancelled it already
            assert task.done()
            assert isinstance(task.exception(), TimeoutError)
            continue
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def test_a_cancellation_asked_for_as_the_limit_passes_is_not_a_timeout() -> None:
    deadlines = Deadlines(TICK)

    async def waiting() -> None:
        with deadlines.within(0.0):
            try:
                await asyncio.sleep(5)
            except asyncio.CancelledError:  # the limit's
                asyncio.current_task().cancel()  # type: ignore[union-attr]  # and another
                raise

    task = asyncio.create_task(waiting())
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 3)


def test_limits_work_on_each_loop_the_holder_is_used_on_and_keep_none_alive() -> None:
    deadlines = Deadlines(TICK)
    loops: list[weakref.ref[asyncio.AbstractEventLoop]] = []

    async def timed_out() -> bool:
        loops.append(weakref.ref(asyncio.get_running_loop()))
        try:
            with deadlines.within(0.02):
                await asyncio.sleep(5)
        except TimeoutError:
            pass
        else:
            return False
        with deadlines.within(5):  # done at once: its loop closes with the timer pending
            await asyncio.sleep(0)
        return True

    assert asyncio.run(asyncio.wait_for(timed_out(), 3))
    assert asyncio.run(asyncio.wait_for(timed_out(), 3))  # the first loop's timer is gone
    gc.collect()
    assert [loop() for loop in loops] == [None, None]
