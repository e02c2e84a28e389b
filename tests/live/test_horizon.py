"""An event committed while an older transaction of the database still runs lies above the log's
horizon: the hub delivers it once that transaction ends, promptly (it reads again shortly after
an announcement it could not read yet, not only at its poll), and exactly once. A transaction in
another database of the cluster holds nothing back."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import asyncpg  # type: ignore[import-untyped]
import pytest
from broadcaster import Broadcast

from baton.access.principals import ADMIN
from baton.live.filters import EventFilter
from baton.live.hub import EventHub
from baton.live.logs import TASK_LOG
from baton.protocol.handoff import MoveName, TaskState, WaitingOn
from baton.services.tasks import MoveArgs, TaskService
from baton.store.db import Database, libpq_url
from baton.store.eventlog import SEQ_BITS
from baton.store.records import EventRecord
from tests.helpers import World, agent, checkpoint

POLL = 60.0  # the hub's poll: far longer than the test, so only the re-check can deliver


@pytest.fixture
async def hub(db: Database) -> AsyncIterator[EventHub[EventRecord]]:
    broadcast = Broadcast("memory://")
    await broadcast.connect()
    hub = EventHub(db, broadcast, TASK_LOG, poll_interval=POLL)
    await hub.start()
    yield hub
    await hub.stop()
    await broadcast.disconnect()


async def test_an_event_behind_a_running_transaction_is_delivered_once_it_ends(
    db: Database, database_url: str, world: World, hub: EventHub[EventRecord]
) -> None:
    service = TaskService(db, on_commit=hub.publish)
    task = await world.task_in(TaskState.working)
    received: list[EventRecord] = []
    arrived = asyncio.Event()

    async def follow() -> None:
        where = EventFilter(task_ids=frozenset({task.id}))
        async for event in hub.stream(ADMIN, where):
            received.append(event)
            arrived.set()

    following = asyncio.create_task(follow())
    try:
        # Live first: a checkpoint reaches the stream (so the subscription is in place; the
        # task's earlier events may come before it, if they were not readable yet when it began).
        first = await service.save_checkpoint(agent(world.assignee), task.id, checkpoint())
        for _ in range(100):
            await asyncio.wait_for(arrived.wait(), 10)
            arrived.clear()
            if received[-1].id == first.events[0].id:
                break
        seen = len(received)

        # An older transaction holds a transaction id and runs on: the horizon stays below it.
        blocker = await asyncpg.connect(libpq_url(database_url))
        try:
            blocking = blocker.transaction()
            await blocking.start()
            await blocker.fetchval("SELECT pg_current_xact_id()")
            moved = await service.move(
                agent(world.assignee),
                MoveName.PAUSE,
                task.id,
                args=MoveArgs(waiting_on=WaitingOn.human),
            )
            await asyncio.sleep(0.5)  # committed and announced, but not readable yet
            assert len(received) == seen
            await blocking.rollback()
        finally:
            await blocker.close()

        # Delivered after the blocker ended, long before the hub's next poll.
        await asyncio.wait_for(arrived.wait(), 5)
        await asyncio.sleep(0.3)  # and only once
        assert [e.id for e in received[seen - 1 :]] == [first.events[0].id, moved.events[0].id]
    finally:
        following.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await following


async def test_a_transaction_in_another_database_holds_nothing_back(
    db: Database, server_url: str, world: World, hub: EventHub[EventRecord]
) -> None:
    service = TaskService(db, on_commit=hub.publish)
    task = await world.task_in(TaskState.working)
    received: list[EventRecord] = []
    arrived = asyncio.Event()

    async def follow() -> None:
        async for event in hub.stream(ADMIN, EventFilter(task_ids=frozenset({task.id}))):
            received.append(event)
            arrived.set()

    following = asyncio.create_task(follow())
    # The server's own database: the same cluster, another database.
    blocker = await asyncpg.connect(libpq_url(server_url))
    try:
        first = await service.save_checkpoint(agent(world.assignee), task.id, checkpoint())
        for _ in range(100):  # the subscription is in place once its own checkpoint arrives
            await asyncio.wait_for(arrived.wait(), 10)
            arrived.clear()
            if received[-1].id == first.events[0].id:
                break
        blocking = blocker.transaction()
        await blocking.start()
        older = await blocker.fetchval("SELECT pg_current_xact_id()::text::bigint")
        moved = await service.move(
            agent(world.assignee),
            MoveName.PAUSE,
            task.id,
            args=MoveArgs(waiting_on=WaitingOn.human),
        )
        assert moved.events[0].id >> SEQ_BITS > older  # the event is the younger of the two
        # Delivered while the other database's older transaction still runs.
        await asyncio.wait_for(arrived.wait(), 5)
        assert received[-1].id == moved.events[0].id
        await blocking.rollback()
    finally:
        await blocker.close()
        following.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await following
