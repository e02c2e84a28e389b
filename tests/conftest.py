"""Shared fixtures: a fresh, migrated PostgreSQL database per test session.

BATON_TEST_DATABASE_URL names a server to create the database on; without it an embedded
PostgreSQL is started under a temporary directory. Tests keep out of each other's way by using
unique owner names (see `world`), so nothing is truncated between them.
"""

from __future__ import annotations

import os
import secrets
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import asyncpg  # type: ignore[import-untyped]
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from baton.service import TaskService
from baton.store import migrate
from baton.store.db import create_engine, libpq_url
from baton.store.embedded import create_database, start_embedded
from tests.helpers import World


@pytest.fixture(scope="session")
def server_url() -> Iterator[str]:
    """A PostgreSQL server to create test databases on."""
    url = os.environ.get("BATON_TEST_DATABASE_URL")
    if url:
        yield url
        return
    with tempfile.TemporaryDirectory(prefix="baton-test-pg-", dir="/tmp") as tmp:
        yield start_embedded(Path(tmp))


@pytest.fixture(scope="session")
async def database_url(server_url: str) -> AsyncIterator[str]:
    name = f"baton_test_{os.getpid()}_{secrets.token_hex(3)}"
    url = await create_database(server_url, name)
    yield url
    conn = await asyncpg.connect(libpq_url(server_url))
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await conn.close()


@pytest.fixture(scope="session")
async def engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    engine = create_engine(database_url)
    await migrate.upgrade(engine)
    yield engine
    await engine.dispose()


@pytest.fixture(scope="session")
def service(engine: AsyncEngine) -> TaskService:
    return TaskService(engine)


@pytest.fixture
def world(service: TaskService) -> World:
    return World(service)
