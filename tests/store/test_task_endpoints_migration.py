"""Migration 0013 (endpoints scoped to a task) both ways on a database that holds endpoints:
an owner's endpoints keep working through it, the scoped ones go with the downgrade, and the
rules it adds hold."""

from __future__ import annotations

import asyncpg  # type: ignore[import-untyped]
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from baton.store.db import libpq_url
from tests.store.test_event_ids_migration import _hand_off, _migrate, scratch  # noqa: F401

BEFORE = "0012"
AT = "0013"

INSERT = """
INSERT INTO webhook_endpoints (id, owner, url, description, task_filter, secret, enabled,
    task_cursor, run_cursor, failures, created_at, updated_at{extra_columns})
VALUES ($1, 'o', 'https://example.com/', '', '{{}}'::jsonb, 'plain:s', true, 0, 0, 0, now(),
    now(){extra_values})
"""


async def _endpoint(conn: asyncpg.Connection, id: str, **extra: object) -> None:
    names = "".join(f", {name}" for name in extra)
    values = "".join(f", ${n}" for n in range(2, len(extra) + 2))
    sql = INSERT.format(extra_columns=names, extra_values=values)
    await conn.execute(sql, id, *extra.values())


async def _indexes(conn: asyncpg.Connection) -> dict[str, str]:
    rows = await conn.fetch(
        "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'webhook_endpoints'"
    )
    return {r["indexname"]: r["indexdef"] for r in rows}


async def test_owners_endpoints_survive_both_ways_and_scoped_ones_go_with_the_downgrade(
    scratch: tuple[str, AsyncEngine],  # noqa: F811
) -> None:
    url, engine = scratch
    await _migrate(engine, True, BEFORE)
    conn = await asyncpg.connect(libpq_url(url))
    try:
        before = await _indexes(conn)
        await _endpoint(conn, "wh_old")
        await _hand_off(conn, "t1")

        await _migrate(engine, True, AT)
        row = await conn.fetchrow(
            "SELECT task_id, payload_format FROM webhook_endpoints WHERE id = 'wh_old'"
        )
        assert dict(row) == {"task_id": None, "payload_format": "standard"}
        await _endpoint(conn, "wh_scoped", task_id="t1", config_id="c", payload_format="a2a")
        # One config of an id per task and owner; a scoped endpoint names its config and
        # takes task events only; formats are the known ones.
        for id, extra in [
            ("wh_twin", {"task_id": "t1", "config_id": "c"}),
            ("wh_nameless", {"task_id": "t1"}),
            ("wh_unscoped_name", {"config_id": "c"}),
            ("wh_runs", {"task_id": "t1", "config_id": "r", "run_filter": "{}"}),
            ("wh_format", {"payload_format": "xml"}),
            ("wh_no_task", {"task_id": "missing", "config_id": "c"}),
        ]:
            with pytest.raises(asyncpg.IntegrityConstraintViolationError):
                await _endpoint(conn, id, **extra)
        assert await conn.fetchval("SELECT count(*) FROM webhook_endpoints") == 2

        await _migrate(engine, False, BEFORE)
        ids = [r["id"] for r in await conn.fetch("SELECT id FROM webhook_endpoints")]
        assert ids == ["wh_old"]
        assert await _indexes(conn) == before
        columns = {
            r["column_name"]
            for r in await conn.fetch(
                "SELECT column_name FROM information_schema.columns "
                "WHERE table_name = 'webhook_endpoints'"
            )
        }
        assert not columns & {"task_id", "config_id", "token", "payload_format"}

        await _migrate(engine, True, AT)
        await _endpoint(conn, "wh_again", task_id="t1", config_id="c", payload_format="a2a")
    finally:
        await conn.close()
