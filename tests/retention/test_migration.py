"""Migration 0015 both ways on a database that holds events: the logs stay append-only but for
retention's own transactions, and the downgrade takes even that back."""

from __future__ import annotations

import asyncpg  # type: ignore[import-untyped]
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from baton.store.db import libpq_url
from tests.store.test_event_ids_migration import _hand_off, _migrate, scratch  # noqa: F401

BEFORE = "0014"
AT = "0015"


async def _delete(conn: asyncpg.Connection, event: int, *, removing: bool) -> None:
    async with conn.transaction():
        if removing:
            await conn.execute("SELECT set_config('baton.retention', 'removing', true)")
        await conn.execute("DELETE FROM task_events WHERE id = $1", event)


async def test_events_are_deleted_only_by_retention_and_only_after_the_upgrade(
    scratch: tuple[str, AsyncEngine],  # noqa: F811
) -> None:
    url, engine = scratch
    await _migrate(engine, True, BEFORE)
    conn = await asyncpg.connect(libpq_url(url))
    try:
        events = await _hand_off(conn, "t1")
        with pytest.raises(asyncpg.CheckViolationError, match="append-only"):
            await _delete(conn, events[0], removing=True)

        await _migrate(engine, True, AT)
        floors = await conn.fetch("SELECT log, floor FROM retention_floors ORDER BY log")
        assert [tuple(r) for r in floors] == [("run_events", 0), ("task_events", 0)]
        with pytest.raises(asyncpg.CheckViolationError, match="append-only"):
            await _delete(conn, events[0], removing=False)
        with pytest.raises(asyncpg.CheckViolationError, match="append-only"):
            await conn.execute("UPDATE task_events SET reason = 'x' WHERE id = $1", events[0])
        await _delete(conn, events[1], removing=True)

        await _migrate(engine, False, BEFORE)
        assert await conn.fetchval("SELECT to_regclass('retention_floors')") is None
        with pytest.raises(asyncpg.CheckViolationError, match="append-only"):
            await _delete(conn, events[0], removing=True)
        await _migrate(engine, True, "head")
    finally:
        await conn.close()
