"""The database refuses what the protocol table refuses, even from raw SQL."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from baton.protocol.handoff import HANDOFF, TaskState
from baton.store.guard import check_constraints, transition_function_sql
from tests.helpers import World

MIGRATIONS = Path(__file__).resolve().parents[2] / "migrations" / "versions"
PAIRS = list(itertools.product(TaskState, TaskState))


async def _force_state(engine: AsyncEngine, task_id: str, state: TaskState) -> None:
    """Write `state` with raw SQL, keeping the other invariants satisfied."""
    waiting_on = "'human'" if state is TaskState.waiting else "NULL"
    async with engine.begin() as conn:
        await conn.execute(
            text(
                f"UPDATE tasks SET state = :state, waiting_on = {waiting_on}, "
                "result = COALESCE(result, '{}'::jsonb), version = version + 1 WHERE id = :id"
            ),
            {"state": state.value, "id": task_id},
        )


@pytest.mark.parametrize(
    ("source", "target"), PAIRS, ids=[f"{a.value}->{b.value}" for a, b in PAIRS]
)
async def test_raw_sql_state_change_is_refused_unless_the_table_lists_it(
    engine: AsyncEngine, world: World, source: TaskState, target: TaskState
) -> None:
    task = await world.task_in(source)
    allowed = source == target or HANDOFF.move_between(source, target) is not None
    if allowed:
        await _force_state(engine, task.id, target)
    else:
        with pytest.raises(IntegrityError, match="the protocol has no move"):
            await _force_state(engine, task.id, target)
    async with engine.connect() as conn:
        state = (
            await conn.execute(text("SELECT state FROM tasks WHERE id = :id"), {"id": task.id})
        ).scalar_one()
    assert state == (target if allowed else source).value


async def test_version_must_rise_by_exactly_one(engine: AsyncEngine, world: World) -> None:
    task = await world.task_in(TaskState.routed)
    for bump in ("version", "version + 2", "version - 1"):
        with pytest.raises(IntegrityError, match="version must rise by one"):
            async with engine.begin() as conn:
                await conn.execute(
                    text(f"UPDATE tasks SET version = {bump} WHERE id = :id"), {"id": task.id}
                )


async def test_a_task_cannot_be_inserted_past_its_initial_state(
    engine: AsyncEngine, world: World
) -> None:
    task = await world.task_in(TaskState.routed)
    with pytest.raises(IntegrityError, match="starts in requested"):
        async with engine.begin() as conn:
            await conn.execute(
                text(
                    "INSERT INTO tasks (id, project, state, requester, assignee, "
                    "requester_owner, assignee_owner, deliverable_type, depends_on, packet, "
                    "verification, version, input_digest, created_at, updated_at) "
                    "SELECT 'copy-' || id, project, 'routed', requester, assignee, "
                    "requester_owner, assignee_owner, deliverable_type, depends_on, packet, "
                    "verification, 1, input_digest, now(), now() FROM tasks WHERE id = :id"
                ),
                {"id": task.id},
            )


@pytest.mark.parametrize(
    ("name", "sql"),
    [
        (
            "tasks_waiting_on_iff_waiting",
            "UPDATE tasks SET waiting_on = NULL, version = version + 1",
        ),
        (
            "tasks_waiting_on_iff_waiting",
            "UPDATE tasks SET waiting_on = 'human', state = 'working', version = version + 1",
        ),
        ("tasks_completed_has_result", "UPDATE tasks SET result = NULL, version = version + 1"),
        (
            "tasks_verification_known",
            "UPDATE tasks SET verification = 'MAGIC', version = version + 1",
        ),
    ],
)
async def test_check_constraints_hold_the_per_state_invariants(
    engine: AsyncEngine, world: World, name: str, sql: str
) -> None:
    state = {
        "tasks_completed_has_result": TaskState.completed,
        "tasks_verification_known": TaskState.routed,
    }.get(name, TaskState.waiting)
    task = await world.task_in(state)
    with pytest.raises(IntegrityError, match=name):
        async with engine.begin() as conn:
            await conn.execute(text(f"{sql} WHERE id = :id"), {"id": task.id})


async def test_events_are_append_only(engine: AsyncEngine, world: World) -> None:
    task = await world.task_in(TaskState.routed)
    for sql in (
        "UPDATE task_events SET actor = 'mallory' WHERE task_id = :id",
        "DELETE FROM task_events WHERE task_id = :id",
    ):
        with pytest.raises(IntegrityError, match="append-only"):
            async with engine.begin() as conn:
                await conn.execute(text(sql), {"id": task.id})


def test_the_migrated_guard_is_the_one_generated_from_the_table() -> None:
    """The newest migration that defines the guard embeds exactly today's generated SQL, and
    the newest that defines the CHECK constraints every one generated from the protocol's
    enums."""
    sources = [p.read_text() for p in sorted(MIGRATIONS.glob("*.py"))]
    defining = [s for s in sources if "FUNCTION baton_guard_task_change()" in s]
    assert defining, "no migration defines the guard"
    assert transition_function_sql() in defining[-1], (
        "the protocol table changed: add a migration that replaces baton_guard_task_change() "
        "with baton.store.guard.transition_function_sql()"
    )
    checking = [s for s in sources if 'name="tasks_state_known"' in s]
    assert checking, "no migration defines the CHECK constraints"
    for name, expression in check_constraints().items():
        assert re.search(re.escape(expression) + r'", name="' + name, checking[-1]), name
