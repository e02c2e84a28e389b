"""The hub wakes its reader only for news: a commit while nobody subscribes wakes nothing (the
next subscriber starts from the log's end), an id announced by another process wakes it, and
an announcement it has already heard (its own, coming back from the broker) does not deliver
anything twice. The hub's poll is far longer than each test, so only wake-ups deliver; the
broker is PostgreSQL's LISTEN/NOTIFY, as a server runs it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest
from broadcaster import Broadcast

from baton.access.principals import ADMIN
from baton.live.backends import PostgresBackend
from baton.live.filters import EventFilter
from baton.live.hub import EventHub
from baton.live.logs import TASK_LOG
from baton.metrics import REGISTRY
from baton.protocol.handoff import TaskState
from baton.services.tasks import TaskService
from baton.store.db import Database, libpq_url
from baton.store.records import EventRecord
from tests.helpers import World, agent, checkpoint
from tests.live.big_events import until

POLL = 60.0


@pytest.fixture
async def broadcast(database_url: str) -> AsyncIterator[Broadcast]:
    broadcast = Broadcast(backend=PostgresBackend(libpq_url(database_url)))
    await broadcast.connect()
    yield broadcast
    await broadcast.disconnect()


@pytest.fixture
async def hub(db: Database, broadcast: Broadcast) -> AsyncIterator[EventHub[EventRecord]]:
    hub = EventHub(db, broadcast, TASK_LOG, poll_interval=POLL)
    await hub.start()
    yield hub
    await hub.stop()


class Follower:
    """One stream of `hub`'s checkpoints in `world`'s project, collected as they arrive (the
    task's earlier events were committed by a service that announced nothing)."""

    def __init__(self, hub: EventHub[EventRecord], world: World) -> None:
        self.received: list[EventRecord] = []
        self.arrived = asyncio.Event()
        self._where = EventFilter(
            projects=frozenset({world.project}), kinds=frozenset({"checkpoint_saved"})
        )
        self._hub = hub
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Follower:
        self._task = asyncio.create_task(self._follow())
        # Registered: what commits from now on is its.
        await until(lambda: bool(self._hub._subscribers), 5, "the stream registered")
        return self

    async def _follow(self) -> None:
        async for event in self._hub.stream(ADMIN, self._where):
            self.received.append(event)
            self.arrived.set()

    async def next(self) -> EventRecord:
        await asyncio.wait_for(self.arrived.wait(), 5)
        self.arrived.clear()
        return self.received[-1]

    async def __aexit__(self, *_: object) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


async def test_commits_while_nobody_subscribes_reach_no_later_subscriber(
    db: Database, world: World, hub: EventHub[EventRecord]
) -> None:
    service = TaskService(db, on_commit=hub.publish)
    task = await world.task_in(TaskState.working)
    for _ in range(3):
        await service.save_checkpoint(agent(world.assignee), task.id, checkpoint())
    async with Follower(hub, world) as follower:
        later = await service.save_checkpoint(agent(world.assignee), task.id, checkpoint())
        # Promptly (the poll is a minute away), and nothing from before it joined.
        assert (await follower.next()).id == later.events[0].id
        await asyncio.sleep(0.3)
        assert [e.id for e in follower.received] == [later.events[0].id]


async def test_an_id_announced_by_another_process_wakes_the_reader_once(
    db: Database, world: World, hub: EventHub[EventRecord], broadcast: Broadcast
) -> None:
    elsewhere = TaskService(db)  # another process's service: it tells this hub nothing itself
    task = await world.task_in(TaskState.working)
    async with Follower(hub, world) as follower:
        saved = await elsewhere.save_checkpoint(agent(world.assignee), task.id, checkpoint())
        event_id = saved.events[0].id
        await asyncio.sleep(0.3)
        assert follower.received == []  # committed, but nobody here was told
        await broadcast.publish(TASK_LOG.channel, str(event_id))
        assert (await follower.next()).id == event_id
        # The same announcement again (as a process hears its own come back): nothing more.
        await broadcast.publish(TASK_LOG.channel, str(event_id))
        await asyncio.sleep(0.3)
        assert [e.id for e in follower.received] == [event_id]


async def test_every_delivery_is_counted_with_its_lag_in_the_metrics(
    db: Database, world: World, hub: EventHub[EventRecord]
) -> None:
    def sample(name: str) -> float:
        return REGISTRY.get_sample_value(name) or 0.0

    service = TaskService(db, on_commit=hub.publish)
    task = await world.task_in(TaskState.working)
    before = {
        name: sample(name)
        for name in (
            "baton_events_delivered_total",
            "baton_event_delivery_lag_seconds_count",
            "baton_event_delivery_lag_seconds_sum",
        )
    }
    slowest = REGISTRY.get_sample_value("baton_event_delivery_lag_seconds_bucket", {"le": "10.0"})
    async with Follower(hub, world) as first, Follower(hub, world) as second:
        await service.save_checkpoint(agent(world.assignee), task.id, checkpoint())
        await first.next()
        await second.next()
    assert sample("baton_events_delivered_total") == before["baton_events_delivered_total"] + 2
    lags = sample("baton_event_delivery_lag_seconds_count")
    assert lags == before["baton_event_delivery_lag_seconds_count"] + 2
    lag = (
        sample("baton_event_delivery_lag_seconds_sum")
        - before["baton_event_delivery_lag_seconds_sum"]
    )
    assert 0 < lag < 10  # two deliveries, each a moment after the commit
    within = REGISTRY.get_sample_value("baton_event_delivery_lag_seconds_bucket", {"le": "10.0"})
    assert within == (slowest or 0.0) + 2
