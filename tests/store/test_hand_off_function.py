"""The hand-off function: generated from the store's layout, embedded by a migration, and held
to the guard like every other write."""

from __future__ import annotations

from pathlib import Path

import asyncpg
import pytest

from baton.access.gate import GateDecision
from baton.protocol.handoff import MoveName, TaskState, WaitingOn
from baton.services.tasks import gate_move
from baton.store import tasks as store
from baton.store.db import Database
from tests.helpers import World, packet

MIGRATIONS = Path(__file__).resolve().parents[2] / "migrations" / "versions"


def test_the_migrated_function_is_the_one_the_store_generates() -> None:
    defining = [
        p.read_text()
        for p in sorted(MIGRATIONS.glob("*.py"))
        if store.HAND_OFF_FUNCTION in p.read_text()
    ]
    assert defining, "no migration defines the hand-off function"
    assert store.hand_off_function_sql() in defining[-1], (
        "the task layout changed: add a migration that replaces "
        f"{store.HAND_OFF_FUNCTION}() with baton.store.tasks.hand_off_function_sql()"
    )


def _rules(world: World, version: int = 0) -> tuple[str, int]:
    """The assignee owner's gate rules at `version` (0: an owner that never had a rule)."""
    return (world.asg_owner, version)


def _new(world: World, suffix: str) -> store.NewTask:
    return store.NewTask(
        id=f"{world.tag}-{suffix}",
        project=world.project,
        requester=world.requester,
        assignee=world.assignee,
        packet=packet(),
        verification="AUTO",
        input_digest="d",
    )


async def test_a_held_hand_off_writes_both_events_with_the_task_as_each_left_it(
    db: Database, world: World
) -> None:
    async with db.connection() as conn:
        created, held = await store.create(
            conn,
            _new(world, "held"),
            world.requester,
            gate_move(GateDecision.ASK),
            "system",
            _rules(world),
        )
    assert (created.kind, created.to_state, created.actor) == (
        "created",
        TaskState.requested,
        world.requester,
    )
    assert (created.task.version, created.task.waiting_on) == (1, None)
    assert (held.kind, held.move, held.from_state, held.to_state, held.actor) == (
        "moved",
        MoveName.HOLD,
        TaskState.requested,
        TaskState.waiting,
        "system",
    )
    assert (held.task.version, held.task.waiting_on) == (2, WaitingOn.owner_approval)
    assert held.id > created.id


async def test_without_a_gate_move_the_task_stays_where_it_starts(
    db: Database, world: World
) -> None:
    async with db.connection() as conn:
        (created,) = await store.create(
            conn, _new(world, "external"), world.requester, None, "system", _rules(world)
        )
        stored = await store.load(conn, created.task_id)
    assert stored is not None and stored.state is TaskState.requested


async def test_an_existing_id_writes_nothing(db: Database, world: World) -> None:
    new = _new(world, "twice")
    async with db.connection() as conn:
        allow, deny = gate_move(GateDecision.ALLOW), gate_move(GateDecision.DENY)
        first = await store.create(conn, new, world.requester, allow, "s", _rules(world))
        again = await store.create(conn, new, world.requester, deny, "s", _rules(world))
        stored = await store.load(conn, new.id)
    assert [e.kind for e in first] == ["created", "moved"]
    assert again == []
    assert stored is not None and stored.state is TaskState.routed


@pytest.mark.parametrize(
    ("state", "to", "why"),
    [
        # Not a move from the initial position: the guard refuses it.
        (TaskState.requested.value, TaskState.completed.value, "no move"),
        # Not the initial position.
        (TaskState.routed.value, TaskState.accepted.value, "starts in"),
    ],
)
async def test_the_guard_refuses_what_the_table_does_not_list(
    db: Database, world: World, state: str, to: str, why: str
) -> None:
    async with db.connection() as conn:
        with pytest.raises(asyncpg.CheckViolationError, match=why):
            await conn.fetch(
                f"SELECT * FROM {store.HAND_OFF_FUNCTION}($1, $2, $3, $4, $5, 'code', '{{}}', "
                "$6, 'AUTO', 'd', $4, 'ROUTE', $7, NULL, 'system', $8, 0)",
                f"{world.tag}-{why.replace(' ', '-')}",
                world.project,
                state,
                world.requester,
                world.assignee,
                packet(),
                to,
                world.asg_owner,
            )
        assert await store.load(conn, f"{world.tag}-{why.replace(' ', '-')}") is None


async def _version(db: Database, owner: str) -> int:
    version = await db.fetchval("SELECT version FROM gate_rule_versions WHERE owner = $1", owner)
    return int(version or 0)


async def test_every_change_of_an_owners_rules_counts(db: Database, world: World) -> None:
    """Whoever changes the rules, and however: the trigger counts inserts, updates and
    deletes, for both owners when a rule moves from one to another."""
    other = f"o{world.tag}"
    assert await _version(db, world.asg_owner) == 0
    rule_id = await db.fetchval(
        "INSERT INTO gate_rules (owner, requester, project, deliverable_types, decision, "
        "priority) VALUES ($1, '*', '*', '{}', 'DENY', 1) RETURNING id",
        world.asg_owner,
    )
    assert await _version(db, world.asg_owner) == 1
    await db.execute("UPDATE gate_rules SET priority = 2 WHERE id = $1", rule_id)
    assert await _version(db, world.asg_owner) == 2
    await db.execute("UPDATE gate_rules SET owner = $2 WHERE id = $1", rule_id, other)
    assert (await _version(db, world.asg_owner), await _version(db, other)) == (3, 1)
    await db.execute("DELETE FROM gate_rules WHERE id = $1", rule_id)
    assert (await _version(db, world.asg_owner), await _version(db, other)) == (3, 2)


async def test_a_hand_off_decided_by_stale_rules_writes_nothing(db: Database, world: World) -> None:
    await world.decide(GateDecision.DENY)  # the owner's rules are now at version 1
    new = _new(world, "stale")
    async with db.connection() as conn:
        with pytest.raises(store.RulesChanged):
            await store.create(
                conn, new, world.requester, gate_move(GateDecision.ALLOW), "system", _rules(world)
            )
        assert await store.load(conn, new.id) is None
        events = await store.create(
            conn, new, world.requester, gate_move(GateDecision.DENY), "system", _rules(world, 1)
        )
    assert events[-1].to_state is TaskState.rejected
