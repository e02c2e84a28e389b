"""What a task's change waits for, and what it sees, when another transaction holds or changes
the task meanwhile. The statement takes the task's lock and its row lock before it matches the
task's position (`baton.store.lifecycle`), so it is checked on the task as the other one
committed it; an UPDATE that checked the position itself would check it on the snapshot its
statement began with, and refuse a move that a concurrent one was making possible."""

from __future__ import annotations

import asyncio

from baton.access.principals import SYSTEM
from baton.protocol.handoff import MoveName, TaskState
from baton.services.tasks import MoveArgs, TaskService, change_for
from baton.store import tasks as store
from baton.store.db import Database
from baton.store.tasks import EVENT_APPEND_LOCK
from tests.helpers import World, execute

ACCEPT = "mutation($id: ID!) { acceptTask(input: {id: $id}) { __typename } }"
HOLD = "SELECT pg_advisory_xact_lock($1, hashtext($2))"


async def _events(db: Database, task_id: str) -> list[tuple[str | None, str | None, str, int]]:
    rows = await db.fetch(
        "SELECT move, from_state, to_state, version FROM task_events WHERE task_id = $1 "
        "ORDER BY id",
        task_id,
    )
    return [(r["move"], r["from_state"], r["to_state"], r["version"]) for r in rows]


async def test_a_move_made_possible_by_a_concurrent_one_is_applied_after_it(
    service: TaskService, db: Database, world: World
) -> None:
    """The accept starts while the route that allows it is written but not committed: its
    statement sees the task still requested and waits for the task's lock; once the route
    commits, the accept is applied on the routed task, and the log has both in order."""
    task = await world.task_in(TaskState.requested)
    route = change_for(MoveName.ROUTE, MoveArgs(), by_server=True)
    async with db.transaction() as holder:
        routed = await store.change(holder, task.id, route, SYSTEM, expected_version=None)
        assert routed is not None
        accepting = asyncio.create_task(
            service.move(world.roles["assignee"], MoveName.ACCEPT, task.id)
        )
        await asyncio.sleep(0.3)
        assert not accepting.done()  # waiting for the route's transaction
    outcome = await asyncio.wait_for(accepting, 10)
    assert outcome.task.state is TaskState.accepted
    assert outcome.task.version == task.version + 2
    assert (await _events(db, task.id))[-2:] == [
        ("ROUTE", "requested", "routed", task.version + 1),
        ("ACCEPT", "routed", "accepted", task.version + 2),
    ]


async def test_a_move_that_waited_for_one_that_forbids_it_is_refused(
    service: TaskService, db: Database, world: World
) -> None:
    """The accept waits for a cancel written first; it is then checked on the cancelled task
    and refused, and nothing of it is written."""
    task = await world.task_in(TaskState.routed)
    cancel = change_for(MoveName.CANCEL, MoveArgs())
    async with db.transaction() as holder:
        cancelled = await store.change(
            holder, task.id, cancel, world.roles["requester"], expected_version=None, reason="x"
        )
        assert cancelled is not None
        accepting = asyncio.create_task(
            execute(service, world.roles["assignee"], ACCEPT, {"id": task.id})
        )
        await asyncio.sleep(0.3)
        assert not accepting.done()
    answer = await asyncio.wait_for(accepting, 10)
    assert answer["acceptTask"]["__typename"] == "InvalidStateError"
    assert [e[0] for e in await _events(db, task.id)][-1] == "CANCEL"


async def test_an_outsiders_move_does_not_wait_for_a_hidden_tasks_lock(
    service: TaskService, db: Database, world: World
) -> None:
    """The task's own lock is taken only once the row's conditions hold: an outsider's move
    is refused at once while another transaction holds that lock (were it to wait, the wait
    would tell that the task exists)."""
    task = await world.task_in(TaskState.working)
    async with db.transaction() as holder, db.connection() as conn:
        await holder.execute(HOLD, EVENT_APPEND_LOCK, task.id)
        refused = store.change(
            conn,
            task.id,
            change_for(MoveName.CANCEL, MoveArgs()),
            world.roles["outsider_owner"],
            expected_version=None,
            reason="mine now",
        )
        assert await asyncio.wait_for(refused, 5) is None
