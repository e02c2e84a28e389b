"""bench.scale's delivery check: what counts as lost, repeated and out of order."""

from __future__ import annotations

import asyncio
from array import array

from bench.scale import check_delivery
from bench.subscribers import Subscriber, WorkerSpec


def _subscriber(ids: list[int]) -> Subscriber:
    spec = WorkerSpec("http://127.0.0.1:1", "token", "subscription { x }", {}, count=1)
    subscriber = Subscriber(spec, asyncio.get_running_loop().create_future())
    subscriber.ids = array("q", ids)
    subscriber.times = array("d", [100.0 + i for i in range(len(ids))])
    return subscriber


async def test_every_event_once_in_order_is_a_clean_delivery() -> None:
    committed = [(1, 99.0), (2, 99.5), (3, 100.0)]
    found = check_delivery(2, [_subscriber([1, 2, 3]), _subscriber([1, 2, 3])], committed)
    assert (found.lost, found.repeated, found.disordered) == (0, 0, 0)
    assert found.received == [3, 3] and found.events == 3
    assert found.p50_ms > 0


async def test_a_missing_a_repeated_and_a_late_event_are_each_counted() -> None:
    committed = [(1, 99.0), (2, 99.0), (3, 99.0), (4, 99.0)]
    found = check_delivery(
        3,
        [_subscriber([1, 2, 3]), _subscriber([1, 2, 2, 3, 4]), _subscriber([1, 3, 2, 4])],
        committed,
    )
    assert (found.lost, found.repeated, found.disordered) == (1, 1, 1)
