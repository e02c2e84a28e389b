"""A2A streams take live updates pushed past their tasks (`baton.live.streams`): while a stream's
task waits with nothing queued, the hub hands each event of a non-final state to the stream's
sink, which makes its frames and writes them at once. An event of a final state goes through
the stream's task, which ends the stream after its updates; a resumed stream's event
`Last-Event-ID` names comes from the log, never pushed. Over HTTP, with several streams on a
task and updates in quick succession, every stream gets every update once, in order, with its
id, and ends after the final state's.

The handler's tests follow a task on a real hub over a real PostgreSQL; the others run against
a real `baton serve` over real HTTP."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator

from baton.a2a.frames import Frame
from baton.a2a.handler import BatonHandler, Call
from baton.access.principals import ADMIN, Principal
from baton.live.hub import EventHub
from baton.live.streams import Pushable
from baton.protocol.handoff import MoveName, TaskState
from baton.services.context import Context
from baton.services.runs import RunService
from baton.services.task_contexts import TaskContexts
from baton.services.tasks import TaskService
from baton.store.db import Database
from baton.store.records import EventRecord
from tests.a2a.conftest import agent_url
from tests.a2a.sse import Stream, subscribe
from tests.conftest import LiveServer
from tests.helpers import World, agent, checkpoint
from tests.live.big_events import until

STREAMS = 4
CHECKPOINTS = 40


class Followed:
    """A task followed through the handler, as the door follows it: a sink pushed down before
    the first frame is taken (so before the hub's stream exists), and a task taking the rest."""

    def __init__(self, frames: AsyncGenerator[Frame, None], hub: EventHub[EventRecord]) -> None:
        assert isinstance(frames, Pushable)  # what the door pushes its sink down
        self.frames = frames
        self.hub = hub
        self.pushed: list[Frame] = []
        self.consumed: list[Frame] = []
        frames.push_to(self._sink)
        self.task = asyncio.create_task(self._consume())

    def _sink(self, frame: Frame) -> bool:
        self.pushed.append(frame)
        return True

    async def _consume(self) -> None:
        async for frame in self.frames:
            self.consumed.append(frame)

    def waiting(self) -> bool:
        """Its hub stream waits for a live event with nothing queued."""
        return any(
            s._waiter is not None and not s._waiter.done() and s._events is None
            for s in self.hub._subscribers
        )

    async def close(self) -> None:
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task


def handler_on(hub: EventHub[EventRecord], service: TaskService) -> BatonHandler:
    def context(principal: Principal) -> Context:
        return Context(principal, service, RunService(service.db), hub=hub)

    return BatonHandler(context, lambda: TaskContexts(service.db))


def ids(frames: list[Frame]) -> list[str]:
    return [f.id for f in frames]


def state_of(frame: Frame) -> str:
    return str(frame.content["statusUpdate"]["status"]["state"])


async def save(service: TaskService, world: World, task_id: str) -> str:
    saved = await service.save_checkpoint(agent(world.assignee), task_id, checkpoint())
    (event,) = saved.events
    return str(event.id)


async def test_live_updates_of_a_followed_task_are_pushed_and_its_final_state_ends_the_stream(
    db: Database, world: World, hub: EventHub[EventRecord]
) -> None:
    service = TaskService(db, on_commit=hub.publish)
    task = await world.task_in(TaskState.working)
    handler = handler_on(hub, service)
    call = Call(world.roles["requester"], None, "unused")
    followed = Followed(await handler.subscribe_frames(call, task.id, None), hub)
    try:
        await until(lambda: len(followed.consumed) == 1 and followed.waiting(), 5, "waiting")
        assert "task" in followed.consumed[0].content
        saved = [await save(service, world, task.id) for _ in range(CHECKPOINTS)]
        await until(lambda: len(followed.pushed) == len(saved), 5, "every checkpoint pushed")
        assert ids(followed.pushed) == saved  # in order, each once
        assert len(followed.consumed) == 1  # the stream's task slept through them

        cancelled = await service.move(ADMIN, MoveName.CANCEL, task.id)
        (final,) = cancelled.events
        await asyncio.wait_for(followed.task, 5)  # the stream ended by itself
        assert ids(followed.consumed[1:]) == [str(final.id)]  # its task took the final one
        assert state_of(followed.consumed[-1]) == "TASK_STATE_CANCELED"
        assert ids(followed.pushed) == saved
    finally:
        await followed.close()


async def test_a_resumed_stream_takes_the_event_it_resumes_in_from_the_log_then_pushed_ones(
    db: Database, world: World, hub: EventHub[EventRecord]
) -> None:
    service = TaskService(db, on_commit=hub.publish)
    task = await world.task_in(TaskState.working)
    before = [await save(service, world, task.id) for _ in range(3)]
    handler = handler_on(hub, service)
    call = Call(world.roles["requester"], None, "unused")
    # Resumed inside event `before[0]` (after its first update, its only one): the rest of
    # the log after it, through the stream's task, then live events pushed.
    frames = await handler.subscribe_frames(call, task.id, f"{before[0]}.0")
    followed = Followed(frames, hub)
    try:
        await until(lambda: len(followed.consumed) == 2 and followed.waiting(), 5, "replayed")
        assert ids(followed.consumed) == before[1:]
        assert followed.pushed == []
        live = [await save(service, world, task.id) for _ in range(5)]
        await until(lambda: len(followed.pushed) == len(live), 5, "the live ones pushed")
        assert ids(followed.pushed) == live
        assert ids(followed.consumed) == before[1:]
    finally:
        await followed.close()


async def test_several_streams_get_quick_updates_in_order_and_end_after_the_final_one(
    live_server: LiveServer, world: World, binding: str
) -> None:
    task = await world.task_in(TaskState.working)
    token = await live_server.token(world.roles["requester"])
    base = agent_url(live_server, world.assignee)
    async with contextlib.AsyncExitStack() as stack:
        streams: list[Stream] = []
        for _ in range(STREAMS):
            streams.append(
                await stack.enter_async_context(subscribe(base, token, binding, task.id))
            )
            (first,) = await streams[-1].take(1)
            assert first.kind == "task"
        saved = [await save(world.service, world, task.id) for _ in range(CHECKPOINTS)]
        cancelled = await world.service.move(ADMIN, MoveName.CANCEL, task.id)
        (final,) = cancelled.events
        everything = await asyncio.gather(*(s.rest(wait=30) for s in streams))
    for got in everything:
        # Every update once, in order, with its id; the stream ended after the final state's.
        assert [u.id for u in got] == [*saved, str(final.id)]
        assert [u.state for u in got] == ["TASK_STATE_WORKING"] * len(saved) + [
            "TASK_STATE_CANCELED"
        ]
        assert all(u.event in ("", "message") for u in got)  # no error event
