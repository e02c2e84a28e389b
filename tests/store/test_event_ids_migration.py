"""Migration 0009 both ways on a database that holds events: ids keep increasing across it, so
old events stay readable in their order and old cursors stay valid."""

from __future__ import annotations

import os
import secrets
from collections.abc import AsyncIterator

import asyncpg  # type: ignore[import-untyped]
import pytest
from alembic import command
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

from baton.store.db import create_engine, libpq_url
from baton.store.embedded import create_database
from baton.store.eventlog import SEQ_BITS
from baton.store.migrate import alembic_config

BEFORE = "0008"


@pytest.fixture
async def scratch(server_url: str) -> AsyncIterator[tuple[str, AsyncEngine]]:
    """A database of its own (migrations are run on it both ways)."""
    name = f"baton_test_{os.getpid()}_m{secrets.token_hex(3)}"
    url = await create_database(server_url, name)
    engine = create_engine(url)
    yield url, engine
    await engine.dispose()
    conn = await asyncpg.connect(libpq_url(server_url))
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await conn.close()


async def _migrate(engine: AsyncEngine, upgrade: bool, revision: str) -> None:
    def run(connection: Connection) -> None:
        config = alembic_config()
        config.attributes["connection"] = connection
        (command.upgrade if upgrade else command.downgrade)(config, revision)

    async with engine.begin() as connection:
        await connection.run_sync(run)


async def _hand_off(conn: asyncpg.Connection, task_id: str) -> list[int]:
    """A task and its two events (created, and the gate's hold), through the hand-off
    function as the revision at hand defines it; the events' ids."""
    rows = await conn.fetch(
        "SELECT event_id FROM baton_hand_off($1, 'p', 'requested', 'a/r', 'b/a', 'code', "
        "'{}'::text[], '{}'::jsonb, 'AUTO', 'd', 'a/r', 'HOLD', 'waiting', 'owner_approval', "
        "'system', 'b', 0)",
        task_id,
    )
    return [int(r["event_id"]) for r in rows]


async def test_ids_keep_increasing_through_the_upgrade_and_the_downgrade(
    scratch: tuple[str, AsyncEngine],
) -> None:
    url, engine = scratch
    await _migrate(engine, True, BEFORE)
    conn = await asyncpg.connect(libpq_url(url))
    try:
        old = await _hand_off(conn, "old")
        assert old == sorted(old) and old[-1] < 1 << SEQ_BITS  # a counter's ids

        await _migrate(engine, True, "head")
        new = await _hand_off(conn, "new")
        xid = new[0] >> SEQ_BITS
        assert new == [xid << SEQ_BITS, (xid << SEQ_BITS) + 1]  # one transaction, numbered
        assert old[-1] < new[0]

        await _migrate(engine, False, BEFORE)
        again = await _hand_off(conn, "again")
        assert new[-1] < again[0] < again[1]  # the identity starts after every id drawn

        await _migrate(engine, True, "head")
        last = await _hand_off(conn, "last")
        assert again[-1] < last[0]
        ids = [r[0] for r in await conn.fetch("SELECT id FROM task_events ORDER BY id")]
        assert ids == [*old, *new, *again, *last]
    finally:
        await conn.close()
