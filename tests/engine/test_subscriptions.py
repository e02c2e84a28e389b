"""Subscriptions on the engine: flat memory per event, and one execution shared per event."""

from __future__ import annotations

import asyncio
import gc
import tracemalloc
from collections.abc import AsyncGenerator
from functools import partial

import pytest
import strawberry

from baton.budget import current_budget, request_budget
from baton.engine.limits import DEFAULT_LIMITS
from baton.engine.runner import Engine, Outcome, Request
from baton.engine.sharing import EXECUTION, SharedOutcomes

completions = 0


@strawberry.type
class Item:
    id: int

    @strawberry.field
    def name(self) -> str:
        global completions
        completions += 1
        return f"item {self.id}"

    def share_key(self) -> tuple[str, int]:
        return ("Item", self.id)


@strawberry.type
class Query:
    ok: bool = True


@strawberry.type
class Subscription:
    @strawberry.subscription
    async def items(self, count: int = 1_000_000) -> AsyncGenerator[Item, None]:
        for n in range(1, count + 1):
            yield Item(id=n)


ENGINE = Engine(strawberry.Schema(Query, subscription=Subscription), DEFAULT_LIMITS)


async def test_a_subscription_keeps_no_memory_per_event() -> None:
    stream = await ENGINE.subscribe(Request("subscription { items { id name } }"), None)
    assert not isinstance(stream, Outcome)
    for _ in range(200):
        await anext(stream)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(3000):
            outcome = await anext(stream)
            assert not outcome.errors
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
        await stream.aclose()
    # graphql-core 3.3's own executor kept ~1 KB per event here (a shared memo of subfields).
    assert kept < 3000 * 50, kept


async def test_subscribers_of_one_document_share_each_events_execution() -> None:
    global completions
    document = Request("subscription($n: Int!) { items(count: $n) { id name } }", {"n": 5})
    streams = []
    for _ in range(20):
        stream = await ENGINE.subscribe(document, None, sharing="alice")
        assert not isinstance(stream, Outcome)
        streams.append(stream)
    other = await ENGINE.subscribe(document, None, sharing="bob")
    assert not isinstance(other, Outcome)
    completions = 0
    received = await asyncio.gather(*(_all(s) for s in streams))
    assert completions == 5  # once per event, not once per subscriber
    assert all(r == received[0] for r in received)
    assert [o.data for o in received[0]] == [
        {"items": {"id": n, "name": f"item {n}"}} for n in range(1, 6)
    ]
    await _all(other)  # another principal: its own executions
    assert completions == 10


async def _all(stream: AsyncGenerator[Outcome, None]) -> list[Outcome]:
    return [outcome async for outcome in stream]


async def test_shared_executions_are_bounded_by_the_bytes_their_outcomes_hold() -> None:
    shared: SharedOutcomes[bytes] = SharedOutcomes(max_bytes=10_000, size=len)

    async def big(n: int) -> bytes:
        return bytes(3_000) + str(n).encode()

    for n in range(20):
        await shared.get(("event", n), partial(big, n))
    assert shared.bytes <= 10_000 and len(shared) == 3  # the newest three of ~3 KB
    # one outcome over the bound by itself is still shared while it is the only one
    await shared.get(("huge", 0), partial(_value, bytes(50_000)))
    assert len(shared) == 1


async def _value(value: bytes) -> bytes:
    return value


async def test_a_waiter_that_leaves_a_shared_execution_does_not_stop_it_for_the_others() -> None:
    shared: SharedOutcomes[str] = SharedOutcomes()
    release = asyncio.Event()
    runs = 0

    async def slow() -> str:
        nonlocal runs
        runs += 1
        await release.wait()
        return "answer"

    waiters = [asyncio.create_task(shared.get("event", slow)) for _ in range(3)]
    await asyncio.sleep(0)  # all three are waiting on the one execution
    waiters[0].cancel()
    await asyncio.sleep(0)
    release.set()
    assert await asyncio.gather(*waiters[1:]) == ["answer", "answer"]
    assert waiters[0].cancelled() and runs == 1
    assert await shared.get("event", slow) == "answer" and runs == 1  # done: shared at once


async def test_a_shared_execution_that_fails_fails_every_waiter() -> None:
    shared: SharedOutcomes[str] = SharedOutcomes()
    release = asyncio.Event()

    async def failing() -> str:
        await release.wait()
        raise ValueError("boom")

    waiters = [asyncio.create_task(shared.get("event", failing)) for _ in range(2)]
    await asyncio.sleep(0)
    release.set()
    results = await asyncio.gather(*waiters, return_exceptions=True)
    assert [type(r) for r in results] == [ValueError, ValueError]


async def test_an_execution_that_needs_no_waiting_is_shared_without_a_turn_of_the_loop() -> None:
    shared: SharedOutcomes[str] = SharedOutcomes()
    runs = 0

    async def at_once() -> str:
        nonlocal runs
        runs += 1
        return "answer"

    for _ in range(3):
        # Driven by hand: each `get` finishes on its first step, never suspending.
        step = shared.get("event", at_once).__await__()
        with pytest.raises(StopIteration) as done:
            next(step)
        assert done.value.value == "answer"
    assert runs == 1


async def test_an_execution_that_waits_keeps_its_context_to_itself() -> None:
    shared: SharedOutcomes[list[int] | None] = SharedOutcomes()

    async def budgeted() -> list[int] | None:
        with request_budget(5, 100):  # set before the first wait, reset after it
            await asyncio.sleep(0)
            return current_budget()

    assert await shared.get("event", budgeted) == [5, 100]
    assert current_budget() is None  # the caller's context never saw it


async def test_a_cancelled_execution_is_cancelled_inside_and_for_every_waiter() -> None:
    shared: SharedOutcomes[str] = SharedOutcomes()
    cleaned = asyncio.Event()

    async def forever() -> str:
        try:
            await asyncio.Event().wait()
        finally:
            cleaned.set()
        return "never"

    waiters = [asyncio.create_task(shared.get("event", forever)) for _ in range(2)]
    await asyncio.sleep(0)
    [execution] = [t for t in asyncio.all_tasks() if t.get_name() == EXECUTION]
    execution.cancel()
    results = await asyncio.gather(*waiters, return_exceptions=True)
    assert cleaned.is_set()
    assert [type(r) for r in results] == [asyncio.CancelledError, asyncio.CancelledError]


async def test_a_timeout_the_execution_sets_before_it_waits_ends_the_execution_only() -> None:
    shared: SharedOutcomes[str] = SharedOutcomes()

    async def timed() -> str:
        try:
            async with asyncio.timeout(0.05):  # entered in the first step, run at once
                await asyncio.sleep(5)
        except TimeoutError:
            return "timed out"
        return "slept"

    # The subscriber that started it is not the one cancelled when the timeout expires.
    assert await asyncio.wait_for(shared.get("event", timed), 2) == "timed out"
