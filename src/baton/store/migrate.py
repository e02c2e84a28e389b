"""Applying and inspecting Alembic migrations from code."""

from __future__ import annotations

from pathlib import Path

import asyncpg
from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

from baton.store.db import Database, create_engine, probe_pooler


def migrations_dir() -> Path:
    """`migrations/` at the repo root, or its copy inside an installed wheel."""
    here = Path(__file__).resolve().parent.parent
    for candidate in (here / "migrations", here.parent.parent / "migrations"):
        if (candidate / "env.py").is_file():
            return candidate
    raise FileNotFoundError("cannot find the migrations directory")


def alembic_config(url: str | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(migrations_dir()))
    if url is not None:
        config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def head_revision() -> str | None:
    return ScriptDirectory.from_config(alembic_config()).get_current_head()


async def upgrade_url(url: str, *, pooled: bool | None = None) -> None:
    """Bring the database at `url` to head (over a short-lived SQLAlchemy engine: Alembic's).

    `pooled`: `url` goes through a transaction pooler (None: ask it). The upgrade runs in one
    transaction, so one server session, which a pooler keeps for it; only the statement names
    must be the engine's own (`create_engine`). A direct URL is still the better place for it:
    a pooler's `query_timeout` or `idle_transaction_timeout` may cut a long migration short."""
    if pooled is None:
        pooled = await probe_pooler(url)
    engine = create_engine(url, pooled=pooled)
    try:
        await upgrade(engine)
    finally:
        await engine.dispose()


async def upgrade(engine: AsyncEngine) -> None:
    """Bring the database to head on one of the engine's connections."""

    def run(connection: Connection) -> None:
        config = alembic_config()
        config.attributes["connection"] = connection
        command.upgrade(config, "head")

    async with engine.begin() as connection:
        # One migrator at a time when several servers start together.
        await connection.exec_driver_sql("SELECT pg_advisory_xact_lock(7412001)")
        await connection.run_sync(run)


async def current_revision(db: Database) -> str | None:
    try:
        revision = await db.fetchval("SELECT version_num FROM alembic_version")
    except asyncpg.UndefinedTableError:
        return None
    return str(revision) if revision is not None else None
