"""The reader's read of a log's new events and its floor: one statement, from one snapshot,
with what the two reads made apart would give."""

from __future__ import annotations

from baton.live.hub import BATCH
from baton.live.logs import RUN_LOG, TASK_LOG
from baton.protocol.handoff import TaskState
from baton.store.db import Database
from tests.helpers import World, counting_statements


async def test_new_events_and_the_floor_come_in_one_statement_as_read_apart(
    db: Database, world: World
) -> None:
    await world.task_in(TaskState.working)  # a hand-off, a route, an acceptance
    async with db.connection() as conn:
        rows = await conn.fetch("SELECT id FROM task_events ORDER BY id DESC LIMIT 3")
        newest, _, third = (int(r["id"]) for r in rows)
        for log, cursor in ((TASK_LOG, third), (TASK_LOG, newest), (RUN_LOG, 0)):
            with counting_statements() as statements:
                events, floor = await log.after_and_floor(conn, cursor, BATCH)
            assert statements() == 1
            assert events == await log.after(conn, cursor, BATCH)
            assert floor == await log.floor(conn)
        assert len((await TASK_LOG.after_and_floor(conn, third, BATCH))[0]) == 2
        assert (await TASK_LOG.after_and_floor(conn, newest, BATCH))[0] == []
        # A floor raised (then rolled back): read with or without events after the cursor.
        raised = conn.raw.transaction()
        await raised.start()
        try:
            await conn.execute(
                "INSERT INTO retention_floors (log, floor, removed_subjects, removed_events) "
                "VALUES ('task_events', $1, 0, 0) "
                "ON CONFLICT (log) DO UPDATE SET floor = excluded.floor",
                third,
            )
            for cursor in (third, newest):
                events, floor = await TASK_LOG.after_and_floor(conn, cursor, BATCH)
                assert floor == third
                assert events == await TASK_LOG.after(conn, cursor, BATCH)
        finally:
            await raised.rollback()
