"""`bench.retention` on a few thousand events: the seed's shape, one day removed exactly, a new
day written after the seeded one, and the report's tables. The load (wrk) is not run here."""

from __future__ import annotations

import argparse
from collections.abc import AsyncIterator

import asyncpg  # type: ignore[import-untyped, unused-ignore]
import pytest

from baton.store import migrate
from baton.store.db import Database, libpq_url
from bench import retention as bench
from tests.helpers import fresh_database

EVENTS, DAYS = 3000, 3


@pytest.fixture(scope="module")
async def url(server_url: str) -> AsyncIterator[str]:
    async with fresh_database(server_url, "baton_bench_retention") as found:
        await migrate.upgrade_url(found)
        yield found


async def test_a_seeded_day_is_removed_exactly_and_the_report_says_so(url: str) -> None:
    conn = await asyncpg.connect(libpq_url(url))
    try:
        seeded = await bench.seed(conn, EVENTS, DAYS)
        assert abs(seeded.events - EVENTS) < 10
        # The newest hundredth open, and one in a thousand of the rest.
        assert seeded.recent == seeded.tasks // bench.RECENT_SHARE
        older = seeded.tasks - seeded.recent
        assert seeded.open_tasks == seeded.recent + older // bench.ABANDONED_EVERY
        states = dict(await conn.fetch("SELECT state, count(*) FROM tasks GROUP BY state"))
        assert states == {
            "working": seeded.open_tasks,
            "completed": seeded.tasks - seeded.open_tasks,
        }
        # Ids follow time: the oldest day's events have the smallest ids.
        assert await conn.fetchval(
            "SELECT bool_and(e.at < $1) FROM (SELECT at FROM task_events ORDER BY id LIMIT 100) e",
            seeded.cutoff(1),
        )
        due = await conn.fetch(
            "SELECT id FROM tasks WHERE state = 'completed' AND updated_at < $1",
            seeded.cutoff(1),
        )
        before = await bench.sizes(conn)
    finally:
        await conn.close()
    assert 0 < len(due) < seeded.tasks // 2

    db = await Database.connect(url, min_size=1, max_size=2)
    args = argparse.Namespace(batch=50, pace=0.0)
    try:
        swept = await bench._retention(seeded, db, url, 1, args).sweep()
    finally:
        await db.close()
    assert swept is not None and swept.subjects["task"] == len(due)
    conn = await asyncpg.connect(libpq_url(url))
    try:
        left = await conn.fetchval(
            "SELECT count(*) FROM tasks WHERE id = ANY($1::text[])", [r["id"] for r in due]
        )
        written = await bench.refill(conn, seeded, 1)
        after = await bench.sizes(conn)
    finally:
        await conn.close()
    assert left == 0
    assert (
        written > 0
        and after.rows["task_events"]
        == before.rows["task_events"] - (swept.events["task"]) + written
    )

    found = bench.Sitting(seeded, settings=[("server_version", "test")])
    found.moves = [
        bench.Moves("moves", 100.0, 5.0, 10.0, 1000, 10.0),
        bench.Moves("moves while removing day 1", 90.0, 6.0, 12.0, 900, 10.0),
        bench.Moves("moves", 100.0, 5.0, 8.0, 1000, 10.0),
        bench.Moves("moves while removing day 1", 95.0, 6.0, 12.0, 950, 10.0, partial=True),
    ]
    found.removals = [bench.Removal(1, swept.subjects["task"], swept.events["task"], 1.5, 0.5)]
    found.sizes = [("seeded", before), ("a day's new work written", after)]
    report = bench.report(found)
    assert "| moves while removing day 1 | 10 | 90 | 6.0 | 12.0 | 0.90 | 1.20 |" in report
    assert "| moves while removing day 1 (ended within) | 10 | 95 |" in report
    # The paired windows leave out the one the removal ended within.
    assert "| moves while removing ÷ moves alone just before | 1 | 0.90 | 1.20 | 1.20 |" in report
    assert f"| day 1 | {swept.subjects['task']:,} | {swept.events['task']:,} |" in report
    assert "| seeded |" in report and "| a day's new work written |" in report
