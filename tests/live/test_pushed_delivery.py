"""Live events pushed past a stream's task (`baton.live.streams`), on a real hub over a real
PostgreSQL: while the stream's consumer waits with nothing queued, its events go to its sink
and the consumer is not woken; an event the sink refuses, and every one after it until the
consumer has caught up, go through the consumer instead, so each event is delivered once, in
order, by one way or the other. A subscriber only gets what its filter and principal allow."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

from baton.access.principals import Principal
from baton.live.filters import EventFilter
from baton.live.hub import EventHub
from baton.protocol.handoff import TaskState
from baton.services.tasks import TaskService
from baton.store.db import Database
from baton.store.records import EventRecord
from tests.helpers import World, agent, checkpoint
from tests.live.big_events import until


class Pushed:
    """One stream of `world`'s checkpoints with a sink: what the sink took, what the consumer
    took, and a gate the consumer waits at after each event it takes."""

    def __init__(
        self,
        hub: EventHub[EventRecord],
        world: World,
        principal: Principal,
        take: Callable[[EventRecord], bool] = lambda _: True,
    ) -> None:
        self.sunk: list[int] = []
        self.consumed: list[int] = []
        self.gate = asyncio.Event()
        self.gate.set()
        self._take = take
        # Checkpoints only: the task's earlier events were committed by a service that told
        # the hub nothing, and its reader may come across them after the stream registered.
        where = EventFilter(
            projects=frozenset({world.project}), kinds=frozenset({"checkpoint_saved"})
        )
        self._stream = hub.stream(principal, where)
        self._stream.push_to(self._sink)
        self._hub = hub
        self._task: asyncio.Task[None] | None = None

    def _sink(self, event: EventRecord) -> bool:
        if not self._take(event):
            return False
        self.sunk.append(event.id)
        return True

    async def _consume(self) -> None:
        async for event in self._stream:
            self.consumed.append(event.id)
            await self.gate.wait()

    async def __aenter__(self) -> Pushed:
        registered = len(self._hub._subscribers)
        self._task = asyncio.create_task(self._consume())
        await until(lambda: len(self._hub._subscribers) > registered, 5, "registered")
        return self

    async def __aexit__(self, *_: object) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task

    @property
    def delivered(self) -> list[int]:
        return sorted(self.sunk + self.consumed)


async def saved(service: TaskService, world: World, task_id: str) -> int:
    result = await service.save_checkpoint(agent(world.assignee), task_id, checkpoint())
    return result.events[0].id


async def test_events_for_a_waiting_stream_go_to_its_sink_and_never_wake_its_consumer(
    db: Database, world: World, hub: EventHub[EventRecord]
) -> None:
    service = TaskService(db, on_commit=hub.publish)
    task = await world.task_in(TaskState.working)
    async with Pushed(hub, world, agent(world.assignee)) as stream:
        ids = [await saved(service, world, task.id) for _ in range(5)]
        await until(lambda: len(stream.sunk) == 5, 5, "all five pushed")
        await asyncio.sleep(0.2)
        assert stream.sunk == ids  # in order, each once
        assert stream.consumed == []  # its task slept through them


async def test_a_refused_event_and_all_after_it_go_through_the_consumer_until_it_waits_again(
    db: Database, world: World, hub: EventHub[EventRecord]
) -> None:
    service = TaskService(db, on_commit=hub.publish)
    task = await world.task_in(TaskState.working)
    refused: set[int] = set()
    async with Pushed(hub, world, agent(world.assignee), lambda e: e.id not in refused) as stream:
        first = await saved(service, world, task.id)
        await until(lambda: stream.sunk == [first], 5, "the first pushed")
        stream.gate.clear()  # the consumer will hold on to what it takes next
        refused.add(second := await saved(service, world, task.id))
        await until(lambda: stream.consumed == [second], 5, "the refused one consumed")
        # The consumer holds the second: the next events queue behind it, none is pushed.
        later = [await saved(service, world, task.id) for _ in range(3)]
        await asyncio.sleep(0.3)
        assert stream.sunk == [first]
        stream.gate.set()
        await until(lambda: stream.consumed == [second, *later], 5, "the rest consumed")
        # Caught up, it waits again: the next event is pushed.
        last = await saved(service, world, task.id)
        await until(lambda: stream.sunk == [first, last], 5, "pushed again")
        await asyncio.sleep(0.2)
        assert stream.consumed == [second, *later]


async def test_only_the_events_a_subscriber_may_see_reach_its_sink(
    db: Database, world: World, hub: EventHub[EventRecord]
) -> None:
    service = TaskService(db, on_commit=hub.publish)
    task = await world.task_in(TaskState.working)
    async with (
        Pushed(hub, world, agent(world.assignee)) as allowed,
        Pushed(hub, world, agent(f"{world.tag}-outsider/x")) as outsider,
    ):
        event = await saved(service, world, task.id)
        await until(lambda: allowed.sunk == [event], 5, "pushed to the assignee")
        await asyncio.sleep(0.3)
        assert outsider.sunk == [] and outsider.consumed == []


async def test_a_stream_that_ends_leaves_the_hub_and_is_pushed_nothing_more(
    db: Database, world: World, hub: EventHub[EventRecord]
) -> None:
    service = TaskService(db, on_commit=hub.publish)
    task = await world.task_in(TaskState.working)
    async with Pushed(hub, world, agent(world.assignee)) as stream:
        registered = len(hub._subscribers)
        await saved(service, world, task.id)
        await until(lambda: len(stream.sunk) == 1, 5, "pushed")
    assert len(hub._subscribers) == registered - 1
    await saved(service, world, task.id)
    await asyncio.sleep(0.3)
    assert len(stream.sunk) == 1


async def test_a_long_fan_out_lets_other_work_run_while_it_goes(
    db: Database, world: World, hub: EventHub[EventRecord]
) -> None:
    """200 sinks of a millisecond each: the fan-out takes 0.2 s, and other tasks still get a
    turn every few milliseconds (the moves and the sockets' reads are such tasks)."""

    def slow(_: EventRecord) -> bool:
        time.sleep(0.001)
        return True

    service = TaskService(db, on_commit=hub.publish)
    task = await world.task_in(TaskState.working)
    gaps: list[float] = []

    async def tick() -> None:
        last = time.monotonic()
        while True:
            await asyncio.sleep(0)
            now = time.monotonic()
            gaps.append(now - last)
            last = now

    async with contextlib.AsyncExitStack() as stack:
        streams = [
            await stack.enter_async_context(Pushed(hub, world, agent(world.assignee), slow))
            for _ in range(200)
        ]
        ticker = asyncio.create_task(tick())
        try:
            event = await saved(service, world, task.id)
            await until(lambda: all(s.sunk == [event] for s in streams), 10, "all pushed")
        finally:
            ticker.cancel()
    assert sum(gaps) > 0.2  # the ticker ran through the fan-out
    assert max(gaps) < 0.05  # and was never kept waiting long
