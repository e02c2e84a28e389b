"""One process sweeps at a time, and a sweep never makes a move wait on it: correctness, not
timing (the waits below only keep a broken build from hanging)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest

from baton.errors import NotFound
from baton.protocol.handoff import MoveName, TaskState
from baton.services.retention import Retention
from baton.services.runs import RunService
from baton.services.tasks import TaskService
from baton.store import retention as store
from baton.store.db import Database
from baton.store.tasks import TASKS
from tests.helpers import ADMIN, agent, checkpoint, owner
from tests.retention.conftest import DAY, Place

KEEP = 30 * DAY
OLD = 40 * DAY
HANG = 60  # seconds: only a hung build gets there


@pytest.fixture
async def second(own_url: str) -> AsyncIterator[Database]:
    """Another pool on the same database: another process, as PostgreSQL sees it."""
    db = await Database.connect(own_url, acquire_timeout=30)
    yield db
    await db.close()


async def _old_finished(place: Place, count: int) -> list[str]:
    w = place.world()
    ids = [(await w.task_in(TaskState.completed)).id for _ in range(count)]
    await place.age("tasks", ids, OLD)
    return ids


async def _left(db: Database, ids: list[str]) -> int:
    return int(await db.fetchval("SELECT count(*) FROM tasks WHERE id = ANY($1::text[])", ids))


def _retention(db: Database, holder: str, batch: int = 200) -> Retention:
    return Retention(db, KEEP.total_seconds(), holder=holder, batch=batch)


async def test_no_second_process_sweeps_while_one_holds_the_lease(
    place: Place, second: Database
) -> None:
    ids = await _old_finished(place, 3)
    assert await store.claim(place.db, "first", 60)  # between two of its batches: no lock held
    assert await _retention(second, "second").sweep() is None
    assert await _left(place.db, ids) == 3
    await store.release(place.db, "first")
    swept = await _retention(second, "second").sweep()
    assert swept is not None and swept.subjects["task"] >= 3
    assert await _left(place.db, ids) == 0


async def test_a_claim_does_not_wait_for_a_batch_in_progress(
    place: Place, second: Database
) -> None:
    async with place.db.transaction() as conn:
        assert await store.bound(conn)
        assert await store.hold(conn, "first", 60)
        # The first's batch holds the sweep lock: the second's claim tries it and gives up.
        claimed = await asyncio.wait_for(store.claim(second, "second", 60), HANG)
        assert not claimed
        assert conn.raw.is_in_transaction()
    await store.release(place.db, "first")


async def test_two_sweeps_at_once_remove_everything_once(place: Place, second: Database) -> None:
    ids = await _old_finished(place, 12)
    first, other = _retention(place.db, "a", batch=2), _retention(second, "b", batch=2)
    results = await asyncio.wait_for(asyncio.gather(first.sweep(), other.sweep()), HANG)
    worked = [r for r in results if r is not None and r.subjects["task"] > 0]
    assert len(worked) == 1
    assert worked[0].subjects["task"] >= 12 and worked[0].batches >= 6
    assert await _left(place.db, ids) == 0


async def test_a_lease_that_ran_out_is_taken_over(place: Place, second: Database) -> None:
    ids = await _old_finished(place, 2)
    async with place.db.transaction() as conn:
        assert await store.bound(conn)
        assert await store.hold(conn, "gone", 0.01)  # a process that died mid-sweep
    await asyncio.sleep(0.05)
    swept = await _retention(second, "heir").sweep()
    assert swept is not None and swept.subjects["task"] >= 2
    assert await _left(place.db, ids) == 0


async def test_moves_of_open_work_go_on_while_a_batch_is_uncommitted(
    place: Place, second: Database
) -> None:
    w = place.world()
    working = await w.task_in(TaskState.working)
    routed = await w.task_in(TaskState.routed)
    ids = await _old_finished(place, 4)
    moves = TaskService(second)
    cutoff = datetime.now(UTC) - KEEP
    async with place.db.transaction() as conn:
        assert await store.bound(conn)
        removed = await store.remove_batch(conn, TASKS, cutoff, 100)
        assert removed.subjects >= 4
        # The batch has deleted rows and holds its locks until it commits; open work moves.
        await asyncio.wait_for(
            asyncio.gather(
                moves.save_checkpoint(agent(w.assignee), working.id, checkpoint()),
                moves.move(ADMIN, MoveName.ACCEPT, routed.id),
                w.hand_off(),
            ),
            HANG,
        )
        assert conn.raw.is_in_transaction()
    assert await _left(place.db, ids) == 0
    assert (await place.tasks.get(ADMIN, routed.id)).state is TaskState.accepted


async def test_a_batch_that_would_wait_for_a_lock_gives_up(place: Place, second: Database) -> None:
    ids = await _old_finished(place, 2)
    async with second.transaction() as conn:
        # Someone holds what the batch needs (as a migration would): it is not waited for.
        await conn.execute("LOCK TABLE task_events IN SHARE MODE")
        swept = await asyncio.wait_for(_retention(place.db, "patient").sweep(), HANG)
        assert swept is not None and swept.subjects["task"] == 0
    assert await _left(place.db, ids) == 2
    swept = await _retention(place.db, "patient").sweep()
    assert swept is not None and swept.subjects["task"] >= 2


async def test_a_run_made_on_a_task_as_it_is_removed_finds_no_task(
    place: Place, second: Database
) -> None:
    w = place.world()
    done = await w.task_in(TaskState.completed)
    await place.age("tasks", [done.id], OLD)
    runs = RunService(second)
    async with place.db.transaction() as conn:
        assert await store.bound(conn)
        removed = await store.remove_batch(conn, TASKS, datetime.now(UTC) - KEEP, 100)
        assert removed.subjects >= 1
        # The run's insert checks its task's key: it waits for the batch, which deleted it.
        making = asyncio.create_task(
            runs.create(owner(w.req_owner), project=w.project, title="T", task_id=done.id)
        )
        await _until_waiting(place.db, making)
    with pytest.raises(NotFound):
        await asyncio.wait_for(making, HANG)


async def _until_waiting(db: Database, task: asyncio.Task[object]) -> None:
    """Until some session waits for a lock (or `task` ended)."""
    for _ in range(HANG * 10):
        if task.done() or await db.fetchval("SELECT count(*) FROM pg_locks WHERE NOT granted"):
            return
        await asyncio.sleep(0.1)


async def test_a_sweep_vacuums_a_table_once_it_removed_a_hundredth_of_it(place: Place) -> None:
    async def vacuumed() -> datetime | None:
        found: datetime | None = await place.db.fetchval(
            "SELECT last_vacuum FROM pg_stat_user_tables WHERE relname = 'task_events'"
        )
        return found

    retention = Retention(place.db, KEEP.total_seconds(), url=place.url, holder="vacuums")
    retention.unvacuumed["task_events"] = 0
    before = await vacuumed()
    ids = await _old_finished(place, 2)  # a dozen events: far from a hundredth
    swept = await retention.sweep()
    assert swept is not None and swept.events["task"] >= 12
    assert await vacuumed() == before
    assert retention.unvacuumed["task_events"] >= 12
    # Past the share: the next sweep vacuums, and starts counting again.
    retention.unvacuumed["task_events"] = 10**9
    ids += await _old_finished(place, 1)
    await retention.sweep()
    after = await vacuumed()
    assert after is not None and (before is None or after > before)
    assert "task_events" not in retention.unvacuumed
    assert await _left(place.db, ids) == 0
