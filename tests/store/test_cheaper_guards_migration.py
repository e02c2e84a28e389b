"""Migration 0016 (the task guard and the event ids as simple expressions) both ways on a
database that holds tasks: the guard refuses and allows the same changes, event ids keep
counting within a transaction, and the downgrade puts back the functions as they were."""

from __future__ import annotations

import asyncpg  # type: ignore[import-untyped]
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from baton.store.db import libpq_url
from baton.store.eventlog import SEQ_BITS
from tests.store.test_event_ids_migration import _hand_off, _migrate, scratch  # noqa: F401

BEFORE = "0015"
AT = "0016"
FUNCTIONS = ("baton_guard_task_change", "baton_event_id")


async def _definitions(conn: asyncpg.Connection) -> dict[str, str]:
    rows = await conn.fetch(
        "SELECT proname, pg_get_functiondef(oid) AS sql FROM pg_proc WHERE proname = ANY($1)",
        list(FUNCTIONS),
    )
    return {r["proname"]: r["sql"] for r in rows}


async def _guarded(conn: asyncpg.Connection, task_id: str) -> None:
    """The held task (waiting) may go back to routed, not to completed."""
    with pytest.raises(asyncpg.CheckViolationError, match="no move waiting -> completed"):
        await conn.execute(
            "UPDATE tasks SET state = 'completed', waiting_on = NULL, result = '{}', "
            "version = version + 1 WHERE id = $1",
            task_id,
        )
    await conn.execute(
        "UPDATE tasks SET state = 'routed', waiting_on = NULL, version = version + 1 WHERE id = $1",
        task_id,
    )


async def test_the_guard_and_event_ids_hold_through_the_upgrade_and_the_downgrade(
    scratch: tuple[str, AsyncEngine],  # noqa: F811
) -> None:
    url, engine = scratch
    await _migrate(engine, True, BEFORE)
    conn = await asyncpg.connect(libpq_url(url))
    try:
        before = await _definitions(conn)
        assert set(before) == set(FUNCTIONS)

        await _migrate(engine, True, AT)
        after = await _definitions(conn)
        assert after.keys() == before.keys()
        assert all(after[name] != before[name] for name in FUNCTIONS)
        ids = await _hand_off(conn, "t1")  # two events in one transaction: counted 0, 1
        assert [i - (ids[0] >> SEQ_BITS << SEQ_BITS) for i in ids] == [0, 1]
        await _guarded(conn, "t1")

        await _migrate(engine, False, BEFORE)
        assert await _definitions(conn) == before
        later = await _hand_off(conn, "t2")
        assert later[0] > ids[-1] and later[1] == later[0] + 1
        await _guarded(conn, "t2")
    finally:
        await conn.close()
