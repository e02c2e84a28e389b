"""A database of the module's own: a sweep removes every finished task and run of the database
it runs on, and raises the logs' floors, which would refuse the cursors of other tests sharing
the session's database."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from baton.services.retention import Retention, Swept
from baton.services.runs import RunService
from baton.services.tasks import TaskService
from baton.store import migrate
from baton.store.db import Database, create_engine
from tests.helpers import World, fresh_database

DAY = timedelta(days=1)


@pytest.fixture(scope="module")
async def own_url(server_url: str) -> AsyncIterator[str]:
    async with fresh_database(server_url, "baton_retention") as url:
        engine = create_engine(url)
        await migrate.upgrade(engine)
        await engine.dispose()
        yield url


@pytest.fixture(scope="module")
async def own_db(own_url: str) -> AsyncIterator[Database]:
    db = await Database.connect(own_url, acquire_timeout=30)
    yield db
    await db.close()


@dataclass
class Place:
    """The module's database and its services."""

    url: str
    db: Database
    tasks: TaskService
    runs: RunService

    def world(self) -> World:
        return World(self.tasks)

    async def age(self, table: str, ids: list[str], by: timedelta) -> None:
        """Make rows of `table` (and their events) look `by` older, as if written then (with
        the guards off: they allow moves only)."""
        events, subject = (
            ("task_events", "task_id") if table == "tasks" else ("run_events", "run_id")
        )
        async with self.db.transaction() as conn:
            await conn.execute("SET LOCAL session_replication_role = replica")
            await conn.execute(
                f"UPDATE {table} SET updated_at = updated_at - $2::interval, "
                "created_at = created_at - $2::interval WHERE id = ANY($1::text[])",
                ids,
                by,
            )
            await conn.execute(
                f"UPDATE {events} SET at = at - $2::interval WHERE {subject} = ANY($1::text[])",
                ids,
                by,
            )

    async def sweep(self, keep: timedelta = 30 * DAY, **options: object) -> Swept:
        retention = Retention(self.db, keep.total_seconds(), **options)  # type: ignore[arg-type]
        for _ in range(100):  # None: a server on this database sweeps at this moment
            swept = await retention.sweep(datetime.now(UTC))
            if swept is not None:
                return swept
            await asyncio.sleep(0.1)
        raise AssertionError("another sweeper kept the lease")


@pytest.fixture(scope="module")
def place(own_url: str, own_db: Database) -> Place:
    return Place(own_url, own_db, TaskService(own_db), RunService(own_db))
