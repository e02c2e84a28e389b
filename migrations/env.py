"""Alembic environment: runs migrations over the async engine.

The URL comes from the config (`baton migrate`, `baton serve` and the tests set it) or,
when run as plain `alembic`, from BATON_DATABASE_URL.
"""

from __future__ import annotations

import asyncio
import os

from alembic import context
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import create_async_engine
from sqlmodel import SQLModel

import baton.store.tables  # noqa: F401  (registers the tables on SQLModel.metadata)
from baton.store.db import sqlalchemy_url

config = context.config
target_metadata = SQLModel.metadata


def _url() -> str:
    url = config.get_main_option("sqlalchemy.url") or os.environ.get("BATON_DATABASE_URL")
    if not url:
        raise RuntimeError("set BATON_DATABASE_URL or sqlalchemy.url")
    return sqlalchemy_url(url)


def _run(connection: Connection) -> None:
    context.configure(connection=connection, target_metadata=target_metadata)
    with context.begin_transaction():
        context.run_migrations()


async def _run_async() -> None:
    engine = create_async_engine(_url())
    async with engine.connect() as connection:
        await connection.run_sync(_run)
    await engine.dispose()


if context.is_offline_mode():
    context.configure(url=_url(), target_metadata=target_metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()
else:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
    else:
        asyncio.run(_run_async())
