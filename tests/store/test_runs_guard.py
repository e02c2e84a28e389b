"""The runs table refuses what the pipeline table refuses, even from raw SQL."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from baton.access.principals import ADMIN
from baton.protocol.pipeline import PIPELINE, RunStatus
from baton.services.runs import RunService
from baton.store.db import Database
from baton.store.lifecycle_guard import lifecycle_guard
from tests.runs_helpers import Runs

MIGRATIONS = Path(__file__).resolve().parents[2] / "migrations" / "versions"
GUARD = lifecycle_guard(PIPELINE, table="runs")


@pytest.fixture
def runs(db: Database) -> Runs:
    return Runs(RunService(db))


def test_the_migrated_runs_guard_is_the_one_generated_from_the_table() -> None:
    defining = [
        p.read_text()
        for p in sorted(MIGRATIONS.glob("*.py"))
        if GUARD.function_name in p.read_text()
    ]
    assert defining, "no migration defines the runs guard"
    newest = defining[-1]
    assert GUARD.function in newest, (
        "the pipeline table changed: add a migration that replaces "
        f"{GUARD.function_name}() with lifecycle_guard(PIPELINE, table='runs').function"
    )
    for name, expression in GUARD.checks.items():
        assert re.search(re.escape(expression) + r'",\s*name="' + name, newest), name


async def _update(engine: AsyncEngine, run_id: str, sets: str) -> None:
    async with engine.begin() as conn:
        await conn.execute(
            text(f"UPDATE runs SET {sets}, version = version + 1 WHERE id = :id"), {"id": run_id}
        )


@pytest.mark.parametrize(
    ("start", "sets", "why"),
    [
        # Skipping the table: straight from the backlog to done.
        (
            RunStatus.backlog,
            "status = 'completed', phase = 'done', checkpoint = 'notified'",
            "no move",
        ),
        # Claiming without the phase the table gives.
        (RunStatus.backlog, "status = 'in_progress', phase = 'testing'", "no move"),
        # A checkpoint going back without a rerun.
        (RunStatus.in_review, "checkpoint = 'plans_complete'", "no move|check"),
        # Breaking the invariants outright.
        (RunStatus.in_progress, "status = 'in_review'", "no move|check"),
        (RunStatus.backlog, "phase = 'planning'", "no move|check"),
        (RunStatus.in_progress, "status = 'completed'", "no move|check"),
    ],
)
async def test_raw_sql_that_skips_the_table_or_breaks_an_invariant_is_refused(
    engine: AsyncEngine, runs: Runs, start: RunStatus, sets: str, why: str
) -> None:
    run = await runs.run_in(start)
    with pytest.raises(IntegrityError, match=why):
        await _update(engine, run.id, sets)
    assert await runs.service.get(ADMIN, run.id) == run


async def test_raw_sql_that_follows_the_table_is_let_through(
    engine: AsyncEngine, runs: Runs
) -> None:
    run = await runs.run_in(RunStatus.backlog)
    await _update(engine, run.id, "status = 'in_progress', phase = 'planning'")
    assert (await runs.service.get(ADMIN, run.id)).status is RunStatus.in_progress


async def test_a_run_cannot_start_past_the_initial_position(engine: AsyncEngine) -> None:
    with pytest.raises(IntegrityError, match="starts at"):
        async with engine.begin() as conn:
            await conn.execute(
                text(
                    "INSERT INTO runs (id, owner, project, title, status, phase, checkpoint, "
                    "created_by, version, created_at, updated_at) VALUES ('rx', 'o', 'p', 't', "
                    "'in_progress', 'planning', 'none', 'o', 1, now(), now())"
                )
            )


async def test_run_events_are_append_only(engine: AsyncEngine, runs: Runs) -> None:
    run = await runs.run_in(RunStatus.in_progress)
    for sql in (
        "UPDATE run_events SET actor = 'someone' WHERE run_id = :id",
        "DELETE FROM run_events WHERE run_id = :id",
    ):
        with pytest.raises(IntegrityError, match="append-only"):
            async with engine.begin() as conn:
                await conn.execute(text(sql), {"id": run.id})
