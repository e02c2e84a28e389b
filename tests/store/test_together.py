"""Changes that arrive together are written in one transaction (`baton.store.together`), with
every guard and outcome each would have alone."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any

import asyncpg
import pytest

from baton.access.principals import Principal
from baton.protocol.handoff import Actor, TaskState
from baton.services.tasks import SAVE_CHECKPOINT
from baton.store import tasks as store
from baton.store.db import Connection, Database
from baton.store.eventlog import SEQ_BITS
from baton.store.records import EventRecord, TaskRecord
from baton.store.tasks import EVENT_APPEND_LOCK, Change
from baton.store.together import MOST, Lanes, Together
from tests.helpers import World, agent

CHECKPOINT = {
    "progress": "half way",
    "decisions": [],
    "files_touched": [],
    "next_steps": [],
    "open_questions": [],
}
SAVE = Change(
    kind="checkpoint_saved", pairs=SAVE_CHECKPOINT, actor=Actor.ASSIGNEE, checkpoint=CHECKPOINT
)


@pytest.fixture
async def wide(database_url: str, db: Database) -> AsyncIterator[Database]:
    """A pool of its own, as another process would have (`db` migrated the database)."""
    pool = await Database.connect(database_url, max_size=8, acquire_timeout=30)
    yield pool
    await pool.close()


async def _working(world: World, n: int) -> list[str]:
    return [(await world.task_in(TaskState.working)).id for _ in range(n)]


async def _save(
    together: Together, task_id: str, principal: Principal, change: Change = SAVE
) -> EventRecord | None:
    return await store.change_together(together, task_id, change, principal, expected_version=None)


def _transaction(event: EventRecord) -> int:
    return event.id >> SEQ_BITS


async def test_changes_that_wait_for_the_lane_go_in_one_transaction(
    world: World, wide: Database
) -> None:
    ids = await _working(world, 6)
    together = Together(wide, store.lock_visible)
    me = agent(world.assignee)
    events = await asyncio.gather(*(_save(together, i, me) for i in ids))
    assert all(e is not None for e in events)
    made = [e for e in events if e is not None]
    assert [e.task.id for e in made] == ids  # each caller gets its own task's event
    assert [e.task.version for e in made] == [5] * 6  # working at 4
    # The first ran alone; the five that waited for it went together.
    assert len({_transaction(e) for e in made}) == 2
    assert len({_transaction(e) for e in made[1:]}) == 1


async def test_a_refused_change_together_writes_nothing_and_the_others_apply(
    world: World, wide: Database
) -> None:
    ids = await _working(world, 4)
    done = await world.task_in(TaskState.completed)
    together = Together(wide, store.lock_visible)
    me = agent(world.assignee)
    events = await asyncio.gather(*(_save(together, i, me) for i in [*ids, done.id]))
    assert events[-1] is None  # no checkpoint on a completed task
    assert all(e is not None for e in events[:-1])
    async with wide.connection() as conn:
        unchanged = await store.load(conn, done.id)
    assert unchanged is not None and unchanged.version == done.version


async def test_a_change_the_database_refuses_fails_only_itself(
    world: World, wide: Database
) -> None:
    ids = await _working(world, 4)
    together = Together(wide, store.lock_visible)
    me = agent(world.assignee)
    # jsonb holds no NUL: this change's statement fails, and rolls back the transaction of the
    # changes beside it, which are then made alone.
    bad = Change(
        kind="checkpoint_saved",
        pairs=SAVE_CHECKPOINT,
        actor=Actor.ASSIGNEE,
        checkpoint={**CHECKPOINT, "progress": "nul \x00 here"},
    )
    first, *rest = ids
    outcomes = await asyncio.gather(
        _save(together, first, me),
        *(_save(together, i, me, bad if i == rest[1] else SAVE) for i in rest),
        return_exceptions=True,
    )
    assert isinstance(outcomes[2], asyncpg.PostgresError)
    assert all(isinstance(o, EventRecord) for n, o in enumerate(outcomes) if n != 2)
    async with wide.connection() as conn:
        refused = await store.load(conn, rest[1])
    assert refused is not None and refused.version == 4  # as it was


async def test_one_subject_twice_goes_in_two_transactions_in_order(
    world: World, wide: Database
) -> None:
    [busy, one, other] = await _working(world, 3)
    together = Together(wide, store.lock_visible)
    me = agent(world.assignee)
    events = await asyncio.gather(
        _save(together, busy, me),
        _save(together, one, me),
        _save(together, one, me),
        _save(together, other, me),
    )
    made = [e for e in events if e is not None]
    assert len(made) == 4
    assert [made[1].task.version, made[2].task.version] == [5, 6]
    assert made[1].id < made[2].id
    assert _transaction(made[1]) != _transaction(made[2])


async def test_at_most_MOST_changes_go_in_one_transaction(world: World, wide: Database) -> None:
    ids = await _working(world, MOST + 3)
    together = Together(wide, store.lock_visible)
    me = agent(world.assignee)
    events = await asyncio.gather(*(_save(together, i, me) for i in ids))
    made = [e for e in events if e is not None]
    assert len(made) == len(ids)
    sizes: dict[int, int] = {}
    for event in made:
        sizes[_transaction(event)] = sizes.get(_transaction(event), 0) + 1
    assert sorted(sizes.values()) == [1, 2, MOST]  # alone, the first MOST that waited, the rest


async def _holding_lock(
    db: Database, task_id: str, held: asyncio.Event, free: asyncio.Event
) -> None:
    async with db.transaction() as conn:
        await conn.execute(
            "SELECT pg_advisory_xact_lock($1, hashtext($2))", EVENT_APPEND_LOCK, task_id
        )
        held.set()
        await free.wait()


async def test_the_locks_taken_first_skip_a_task_the_principal_may_not_see(
    world: World, wide: Database, db: Database
) -> None:
    [seen, hidden] = await _working(world, 2)
    held, free = asyncio.Event(), asyncio.Event()
    holder = asyncio.create_task(_holding_lock(db, hidden, held, free))
    await held.wait()
    try:
        outsider = agent(f"x{world.tag}/x")
        me = agent(world.assignee)
        async with wide.transaction() as conn:
            await conn.execute("SET LOCAL lock_timeout = '300ms'")
            sql, args = store.lock_visible(outsider, [seen, hidden])
            assert await conn.fetchval(sql, *args) == 0  # sees neither: locks neither
        async with wide.transaction() as conn:
            await conn.execute("SET LOCAL lock_timeout = '300ms'")
            sql, args = store.lock_visible(me, [seen, hidden])
            with pytest.raises(asyncpg.LockNotAvailableError):
                await conn.fetchval(sql, *args)  # sees both: waits for the one held
    finally:
        free.set()
        await holder


async def test_two_processes_together_keep_each_task_in_version_order(
    world: World, wide: Database, database_url: str
) -> None:
    """Two pools (two processes) saving checkpoints on the same tasks at once: every task's
    events still follow its versions in id order, which readers rely on."""
    ids = await _working(world, 8)
    other = await Database.connect(database_url, max_size=8, acquire_timeout=30)
    try:
        sides = [Together(wide, store.lock_visible), Together(other, store.lock_visible)]
        me = agent(world.assignee)
        await asyncio.gather(*(_save(side, i, me) for _ in range(5) for side in sides for i in ids))
    finally:
        await other.close()
    async with wide.connection() as conn:
        rows = await conn.fetch(
            "SELECT task_id, version FROM task_events WHERE task_id = ANY($1) ORDER BY id", ids
        )
    versions: dict[str, list[int]] = {}
    for row in rows:
        versions.setdefault(row["task_id"], []).append(row["version"])
    assert set(versions) == set(ids)
    for seen in versions.values():
        assert seen == list(range(1, 15))  # to working in 4, then 10 checkpoints


async def test_reads_that_wait_for_the_lane_are_one_statement_each_seeing_its_own(
    world: World, wide: Database
) -> None:
    ids = await _working(world, 4)
    hidden = (await World(world.service).task_in(TaskState.working)).id  # another world's
    calls: list[tuple[str, int]] = []

    async def one(
        conn: Connection, key: store.ReadKind, task_id: str, args: object
    ) -> TaskRecord | None:
        calls.append(("one", 1))
        return await store.read_one(conn, key, task_id, args)

    async def many(
        conn: Connection, key: store.ReadKind, items: Sequence[tuple[str, object]]
    ) -> dict[str, TaskRecord]:
        calls.append(("many", len(items)))
        return await store.read_many(conn, key, items)

    reads: Lanes[store.ReadKind, TaskRecord] = Lanes(wide, one, many, once_per_subject=False)
    key = (agent(world.assignee), store.ALL)
    wanted = [ids[0], ids[1], ids[1], hidden, ids[2], ids[3]]
    got = await asyncio.gather(*(reads.run(key, i, None) for i in wanted))
    assert [t.id if t is not None else None for t in got] == [*wanted[:3], None, *wanted[4:]]
    assert calls == [("one", 1), ("many", 5)]  # the first alone, the rest in one statement
    async with wide.connection() as conn:
        alone = await store.load_visible(conn, agent(world.assignee), ids[3])
    assert got[-1] == alone  # the same record a read alone makes


async def test_pages_that_wait_for_the_lane_are_one_statement_each_its_own_page(
    world: World, wide: Database
) -> None:
    other = World(world.service)
    mine = await _working(world, 3)
    theirs = await _working(other, 2)
    calls: list[int] = []

    async def many(
        conn: Connection, key: store.PageKind, items: Sequence[tuple[str, Any]]
    ) -> dict[str, store.PageRows]:
        calls.append(len(items))
        return await store.page_many(conn, key, items)

    pages: Lanes[store.PageKind, store.PageRows] = Lanes(
        wide, store.page_one, many, once_per_subject=False
    )
    me, them = agent(world.assignee), agent(other.assignee)
    here = store.TaskQuery(projects=[world.project], states=[TaskState.working])
    there = store.TaskQuery(projects=[other.project], states=[TaskState.working])
    async with wide.connection() as conn:
        newest = (await store.page(conn, me, here, 1, None))[0][0]
    cursor = store.encode_cursor(newest)
    # A lane per reader and statement text: pages from the start, and pages after a cursor.
    asked = [
        (me, here, 2, None),  # alone in its lane
        (me, here, 2, None),
        (me, there, 5, None),  # sees none of the other world's tasks
        (me, here, 1, None),
        (me, here, 1, cursor),  # alone in its lane
        (me, here, 2, cursor),
        (me, here, 1, cursor),
        (them, there, 5, None),  # another reader: alone in a lane of its own
    ]
    got = await asyncio.gather(*(store.page_together(pages, *page) for page in asked))
    assert sorted(calls) == [2, 3]  # those that waited, one statement a lane
    newest_mine = list(reversed(mine))
    assert [[t.id for t in rows] for rows, _ in got] == [
        newest_mine[:2],
        newest_mine[:2],
        [],
        newest_mine[:1],
        newest_mine[1:2],
        newest_mine[1:],
        newest_mine[1:2],
        list(reversed(theirs)),
    ]
    assert [more for _, more in got] == [True, True, False, True, True, False, True, False]
    async with wide.connection() as conn:
        alone = await store.page(conn, me, here, 2, cursor)
    assert got[5] == alone  # the same records a page alone reads


async def test_pages_whose_parameters_cannot_be_arrays_are_read_one_by_one(
    world: World, wide: Database
) -> None:
    """A list parameter (two states: `= ANY($n)`) cannot go in a `LATERAL` batch: the pages
    that wait are read one after another, each its own."""
    mine = await _working(world, 3)
    pages: Lanes[store.PageKind, store.PageRows] = Lanes(
        wide, store.page_one, store.page_many, once_per_subject=False
    )
    me = agent(world.assignee)
    query = store.TaskQuery(projects=[world.project], states=[TaskState.working, TaskState.waiting])
    got = await asyncio.gather(*(store.page_together(pages, me, query, n, None) for n in (1, 2, 3)))
    newest_mine = list(reversed(mine))
    assert [[t.id for t in rows] for rows, _ in got] == [
        newest_mine[:1],
        newest_mine[:2],
        newest_mine,
    ]
    assert [more for _, more in got] == [True, True, False]
