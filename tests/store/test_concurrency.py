"""Racing moves on one task: the guarded update lets exactly one through."""

from __future__ import annotations

import asyncio
import itertools
from collections import Counter

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from baton.protocol.handoff import TaskState
from baton.services.tasks import TaskService
from tests.helpers import World, execute

ACCEPT = """
mutation($id: ID!) {
  acceptTask(input: {id: $id}) { __typename ... on Error { code } }
}
"""
CANCEL = """
mutation($id: ID!) {
  cancelTask(input: {id: $id, reason: "changed my mind"}) { __typename ... on Error { code } }
}
"""


async def _event_count(engine: AsyncEngine, task_id: str) -> int:
    async with engine.connect() as conn:
        result = await conn.execute(
            text("SELECT count(*) FROM task_events WHERE task_id = :id"), {"id": task_id}
        )
        return int(result.scalar_one())


async def test_twenty_concurrent_accepts_let_exactly_one_through(
    service: TaskService, engine: AsyncEngine, world: World
) -> None:
    task = await world.task_in(TaskState.routed)
    before = await _event_count(engine, task.id)
    assignee = world.roles["assignee"]
    answers = await asyncio.gather(
        *(execute(service, assignee, ACCEPT, {"id": task.id}) for _ in range(20))
    )
    kinds = Counter(a["acceptTask"]["__typename"] for a in answers)
    assert kinds == {"MoveSuccess": 1, "InvalidStateError": 19}
    after = await service.get(assignee, task.id)
    assert after.state is TaskState.accepted
    assert after.version == task.version + 1
    assert await _event_count(engine, task.id) == before + 1


async def test_racing_accept_and_cancel_leave_one_consistent_outcome(
    service: TaskService, engine: AsyncEngine, world: World
) -> None:
    for _ in range(5):
        task = await world.task_in(TaskState.routed)
        accept, cancel = await asyncio.gather(
            execute(service, world.roles["assignee"], ACCEPT, {"id": task.id}),
            execute(service, world.roles["requester"], CANCEL, {"id": task.id}),
        )
        outcomes = {accept["acceptTask"]["__typename"], cancel["cancelTask"]["__typename"]}
        after = await service.get(world.roles["admin"], task.id)
        if after.state is TaskState.accepted:
            # Cancelling an accepted task is allowed, so a cancel that lost the race retries
            # on the fresh row; it may still succeed after the accept.
            assert accept["acceptTask"]["__typename"] == "MoveSuccess"
        assert after.state in (TaskState.accepted, TaskState.cancelled)
        assert "MoveSuccess" in outcomes
        successes = sum(
            o["__typename"] == "MoveSuccess" for o in (accept["acceptTask"], cancel["cancelTask"])
        )
        assert after.version == task.version + successes
        assert await _event_count(engine, task.id) == after.version


async def test_under_racing_moves_every_event_starts_where_the_last_one_ended(
    service: TaskService, engine: AsyncEngine, world: World
) -> None:
    """A cancel that waits on another move's row lock records the state it really left."""
    pause = (
        """mutation($id: ID!) { pauseTask(input: {id: $id, waitingOn: human}) { __typename } }"""
    )
    for _ in range(8):
        task = await world.task_in(TaskState.working)
        await asyncio.gather(
            execute(service, world.roles["assignee"], pause, {"id": task.id}),
            execute(service, world.roles["requester"], CANCEL, {"id": task.id}),
        )
        async with engine.connect() as conn:
            rows = (
                await conn.execute(
                    text(
                        "SELECT from_state, to_state, version FROM task_events"
                        " WHERE task_id = :id ORDER BY id"
                    ),
                    {"id": task.id},
                )
            ).all()
        for earlier, later in itertools.pairwise(rows):
            assert later.from_state in (earlier.to_state, None), rows
            assert later.version == earlier.version + 1, rows
