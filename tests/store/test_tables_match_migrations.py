"""The SQLModel tables and the migrated database describe the same schema."""

from __future__ import annotations

from typing import Any

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
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
