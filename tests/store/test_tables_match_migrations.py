"""The SQLModel tables and the migrated database describe the same schema."""

from __future__ import annotations

from typing import Any

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlmodel import SQLModel

import baton.store.tables  # noqa: F401  (registers the tables on SQLModel.metadata)


def _differences(conn: Connection) -> list[Any]:
    return list(compare_metadata(MigrationContext.configure(conn), SQLModel.metadata))


async def test_migrations_build_exactly_the_tables_and_indexes_the_models_declare(
    engine: AsyncEngine,
) -> None:
    async with engine.connect() as conn:
        differences = await conn.run_sync(_differences)
    assert differences == []


async def test_the_dependents_index_keeps_no_pending_list(engine: AsyncEngine) -> None:
    # A pending list is scanned whole by every look-up until a vacuum merges it.
    async with engine.connect() as conn:
        options = await conn.scalar(
            text("SELECT reloptions FROM pg_class WHERE relname = 'tasks_depends_on_idx'")
        )
    assert options == ["fastupdate=off"]
