"""Several server processes on one database deliver each other's events, and a broker or
database restart loses nothing for a subscriber."""

from __future__ import annotations

import asyncio
import secrets
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from baton.access.principals import ADMIN
from baton.store import migrate
from baton.store.db import create_engine
from baton.store.embedded import create_database, start_embedded
from tests.helpers import agent, mint
from tests.live.client import TASK_EVENTS, HTTPClient, WSClient, hand_off_via, move_mutation
from tests.live.cluster import (
    Cluster,
    RedisProcess,
    restart_embedded_postgres,
    stop_embedded_postgres,
)

# Long enough that delivery within a test can only come from a broadcast wake-up.
NO_POLLING = {"BATON_POLL_SECONDS": "120"}


@pytest.fixture(scope="module")
def pg_dir() -> Iterator[Path]:
    # Not under pytest's temporary root: pytest keeps that private (0700), and the embedded
    # server runs as another system user that must reach its data directory.
    with tempfile.TemporaryDirectory(prefix="baton-own-pg-", dir="/tmp") as tmp:
        yield Path(tmp)
        stop_embedded_postgres(Path(tmp))


@pytest.fixture(scope="module")
async def own_database(pg_dir: Path) -> AsyncIterator[tuple[str, AsyncEngine]]:
    """A database on an embedded PostgreSQL of this module's own, which tests restart."""
    server = await asyncio.to_thread(start_embedded, pg_dir)
    url = await create_database(server, f"scale_{secrets.token_hex(3)}")
    engine = create_engine(url)
    await migrate.upgrade(engine)
    yield url, engine
    await engine.dispose()


class Scenario:
    """A subscriber on server A; writes through server B; the committed log as the oracle."""

    def __init__(self, cluster: Cluster, url: str, engine: AsyncEngine) -> None:
        self.cluster = cluster
        self.url = url
        self.engine = engine
        self.tag = secrets.token_hex(3)
        self.project = f"s{self.tag}"
        self.requester = f"o{self.tag}/r"
        self.assignee = f"o{self.tag}/a"

    async def open(self) -> None:
        token = await mint(self.url, ADMIN)
        self.writer = HTTPClient(self.cluster.urls[1], token)
        watcher = await mint(self.url, agent(self.assignee))
        self.ws = await WSClient.open(self.cluster.urls[0], watcher, "graphql-transport-ws")
        await self.ws.subscribe(TASK_EVENTS, {"filter": {"projects": [self.project]}, "after": "0"})

    async def close(self) -> None:
        await self.ws.close()
        await self.writer.aclose()

    async def hand_off_and_accept(self, retry_for: float = 0) -> None:
        """One task through two moves (three events), retrying while the database is down."""
        deadline = time.monotonic() + retry_for
        while True:
            try:
                answer = await hand_off_via(
                    self.writer, self.project, self.requester, self.assignee
                )
                break
            except (AssertionError, OSError):
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.2)
        accepted = await self.writer(move_mutation("acceptTask"), id=answer["task"]["id"])
        assert accepted["acceptTask"]["__typename"] == "MoveSuccess"

    async def committed(self) -> list[int]:
        async with self.engine.connect() as conn:
            rows = await conn.execute(
                text(
                    "SELECT e.id FROM task_events e JOIN tasks t ON t.id = e.task_id "
                    "WHERE t.project = :p ORDER BY e.id"
                ),
                {"p": self.project},
            )
            return [int(r[0]) for r in rows]

    async def received(self, count: int) -> list[int]:
        events: list[dict[str, Any]] = await self.ws.collect(count, wait=30)
        return [int(e["taskEvents"]["id"]) for e in events]


@pytest.fixture
async def cluster_for(own_database: tuple[str, AsyncEngine], tmp_path: Path) -> AsyncIterator[Any]:
    started: list[tuple[Cluster, Scenario]] = []
    url, engine = own_database

    async def make(broadcast_url: str | None) -> Scenario:
        env = {"BATON_DATABASE_URL": url, **NO_POLLING}
        if broadcast_url is not None:
            env["BATON_BROADCAST_URL"] = broadcast_url
        cluster = await asyncio.to_thread(Cluster.start, 2, env, tmp_path)
        scenario = Scenario(cluster, url, engine)
        started.append((cluster, scenario))
        await scenario.open()
        return scenario

    yield make
    for cluster, scenario in started:
        await scenario.close()
        await asyncio.to_thread(cluster.stop)


@pytest.mark.parametrize("backend", ["postgres", "redis"])
async def test_a_subscriber_on_one_process_sees_moves_made_through_another(
    cluster_for: Any, backend: str, request: pytest.FixtureRequest
) -> None:
    broadcast = request.getfixturevalue("redis").url if backend == "redis" else None
    scenario: Scenario = await cluster_for(broadcast)
    for _ in range(3):
        await scenario.hand_off_and_accept()
    expected = await scenario.committed()
    assert len(expected) == 9
    assert await scenario.received(len(expected)) == expected


async def test_a_postgres_restart_loses_nothing_for_a_subscriber(
    cluster_for: Any, pg_dir: Path
) -> None:
    scenario: Scenario = await cluster_for(None)
    await scenario.hand_off_and_accept()
    before = await scenario.received(3)
    await asyncio.to_thread(restart_embedded_postgres, pg_dir)
    for _ in range(3):
        await scenario.hand_off_and_accept(retry_for=30)
    expected = await scenario.committed()
    assert before == expected[:3]
    assert before + await scenario.received(len(expected) - 3) == expected


async def test_a_redis_restart_loses_nothing_for_a_subscriber(
    cluster_for: Any, redis: RedisProcess
) -> None:
    scenario: Scenario = await cluster_for(redis.url)
    await scenario.hand_off_and_accept()
    before = await scenario.received(3)
    redis.stop()
    await scenario.hand_off_and_accept()  # committed while the broker is down
    redis.start()
    await scenario.hand_off_and_accept(retry_for=10)
    expected = await scenario.committed()
    assert before + await scenario.received(len(expected) - 3) == expected
