"""The guard generated from a lifecycle refuses in PostgreSQL exactly what the lifecycle refuses.

Each lifecycle gets scratch tables in the test database: one row per position (every combination
of axis values, lawful or not) with the generated trigger on it. Every row is then moved to every
position, each attempt in a subtransaction that is rolled back, and the pairs the trigger let
through must be exactly the positions that stay put plus the explored transitions.
"""

from __future__ import annotations

import secrets
from typing import Any

import pytest
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from baton.protocol.handoff import HANDOFF
from baton.protocol.machine import Machine, Position
from baton.protocol.pipeline import PIPELINE
from baton.store.lifecycle_guard import lifecycle_guard

LIFECYCLES = [HANDOFF, PIPELINE]
AnyMachine = Machine[Any, Any, Any]


def _axes(machine: AnyMachine) -> list[str]:
    return [machine.primary, *(a.name for a in machine.attributes)]


def _literal(value: Any) -> str:
    return "NULL" if value is None else f"'{value.value}'"


async def _positions_table(conn: AsyncConnection, name: str, machine: AnyMachine) -> None:
    """`name` holds every position once, numbered in `machine.positions()` order."""
    cols = ", ".join(f"{a} text" for a in _axes(machine))
    await conn.exec_driver_sql(f"CREATE TABLE {name} (id int PRIMARY KEY, {cols})")
    rows = ", ".join(
        f"({i}, {', '.join(_literal(v) for _, v in p.values)})"
        for i, p in enumerate(machine.positions())
    )
    await conn.exec_driver_sql(f"INSERT INTO {name} VALUES {rows}")


async def _accepted_moves(engine: AsyncEngine, machine: AnyMachine) -> set[tuple[int, int]]:
    table = f"scratch_{machine.name}_{secrets.token_hex(3)}"
    axes = _axes(machine)
    guard = lifecycle_guard(machine, table=table)
    sets = ", ".join(f"{a} = n.{a}" for a in axes)
    async with engine.begin() as conn:
        await _positions_table(conn, f"{table}_to", machine)
        await conn.exec_driver_sql(
            f"CREATE TABLE {table} AS SELECT *, 1 AS version FROM {table}_to"
        )
        await conn.exec_driver_sql(f"ALTER TABLE {table} ADD PRIMARY KEY (id)")
        await conn.exec_driver_sql(guard.function)
        await conn.exec_driver_sql(guard.trigger)
        await conn.exec_driver_sql(f"CREATE TABLE {table}_ok (old int, new int)")
        # A refused move raises check_violation; an accepted one is undone by our own error.
        await conn.exec_driver_sql(
            f"""
            DO $$
            DECLARE o int; n record;
            BEGIN
                FOR o IN SELECT id FROM {table} LOOP
                    FOR n IN SELECT * FROM {table}_to LOOP
                        BEGIN
                            UPDATE {table} SET {sets}, version = version + 1 WHERE id = o;
                            RAISE SQLSTATE 'BT000';
                        EXCEPTION
                            WHEN check_violation THEN NULL;
                            WHEN SQLSTATE 'BT000' THEN INSERT INTO {table}_ok VALUES (o, n.id);
                        END;
                    END LOOP;
                END LOOP;
            END $$;
            """
        )
        rows = (await conn.exec_driver_sql(f"SELECT old, new FROM {table}_ok")).all()
        for suffix in ("", "_to", "_ok"):
            await conn.exec_driver_sql(f"DROP TABLE {table}{suffix}")
        await conn.exec_driver_sql(f"DROP FUNCTION {guard.function_name}()")
    return {(old, new) for old, new in rows}


def _expected(machine: AnyMachine) -> set[tuple[int, int]]:
    index = {p: i for i, p in enumerate(machine.positions())}
    stay = {(i, i) for i in index.values()}
    return stay | {(index[t.source], index[t.target]) for t in machine.transitions()}


@pytest.mark.parametrize("machine", LIFECYCLES, ids=lambda m: m.name)
async def test_trigger_accepts_exactly_the_explored_transitions(
    engine: AsyncEngine, machine: AnyMachine
) -> None:
    accepted = await _accepted_moves(engine, machine)
    assert accepted == _expected(machine)


async def test_for_handoff_the_trigger_allows_exactly_the_table_state_pairs(
    engine: AsyncEngine,
) -> None:
    positions: list[Position[Any]] = list(HANDOFF.positions())
    accepted = await _accepted_moves(engine, HANDOFF)
    pairs = {(positions[a].state, positions[b].state) for a, b in accepted}
    assert {(a, b) for a, b in pairs if a != b} == HANDOFF.pairs()


@pytest.mark.parametrize("machine", LIFECYCLES, ids=lambda m: m.name)
async def test_rows_start_at_the_initial_position_and_versions_rise_by_one(
    engine: AsyncEngine, machine: AnyMachine
) -> None:
    table = f"scratch_{machine.name}_{secrets.token_hex(3)}"
    guard = lifecycle_guard(machine, table=table)
    start = machine.positions().index(machine.initial_position)
    async with engine.begin() as conn:
        await _positions_table(conn, f"{table}_to", machine)
        await conn.exec_driver_sql(
            f"CREATE TABLE {table} AS SELECT *, 1 AS version FROM {table}_to WHERE false"
        )
        await conn.exec_driver_sql(guard.function)
        await conn.exec_driver_sql(guard.trigger)
    attempts = [
        (f"INSERT INTO {table} SELECT *, 1 FROM {table}_to WHERE id = {i}", i == start)
        for i in range(len(machine.positions()))
    ]
    attempts += [
        (f"INSERT INTO {table} SELECT *, 2 FROM {table}_to WHERE id = {start}", False),
        (f"UPDATE {table} SET version = version", False),
        (f"UPDATE {table} SET version = version + 2", False),
        (f"UPDATE {table} SET version = version - 1", False),
        (f"UPDATE {table} SET version = version + 1", True),
    ]
    # A jump the table has no single move for is refused, naming both positions.
    first = {t.target for t in machine.transitions() if t.source == machine.initial_position}
    jump = next(p for p in machine.reachable() if p not in first | {machine.initial_position})
    sets = ", ".join(f"{axis} = {_literal(value)}" for axis, value in jump.values)
    refused = f"UPDATE {table} SET {sets}, version = version + 1"
    async with engine.begin() as conn:
        for sql, allowed in attempts:
            if allowed:
                await conn.exec_driver_sql(sql)
                continue
            with pytest.raises(IntegrityError, match=r"starts at|version must rise"):
                async with conn.begin_nested():
                    await conn.exec_driver_sql(sql)
        with pytest.raises(IntegrityError, match=r"protocol has no move \(.*\) -> \(.*\)"):
            async with conn.begin_nested():
                await conn.exec_driver_sql(refused)
        await conn.exec_driver_sql(f"DROP TABLE {table}, {table}_to")
        await conn.exec_driver_sql(f"DROP FUNCTION {guard.function_name}()")


@pytest.mark.parametrize("machine", LIFECYCLES, ids=lambda m: m.name)
async def test_check_constraints_allow_exactly_the_positions_the_invariants_allow(
    engine: AsyncEngine, machine: AnyMachine
) -> None:
    table = f"scratch_{machine.name}_{secrets.token_hex(3)}"
    checks = lifecycle_guard(machine, table=table).checks
    positions = machine.positions()
    async with engine.begin() as conn:
        await _positions_table(conn, table, machine)
        for name, expression in checks.items():
            rows = await conn.exec_driver_sql(f"SELECT id FROM {table} WHERE {expression}")
            passing = {i for (i,) in rows}
            invariant = next((i for i in machine.invariants if name == f"{table}_{i.name}"), None)
            if invariant is None:  # a `_known` check: every declared value passes
                assert passing == set(range(len(positions))), name
            else:
                assert passing == {
                    i for i, p in enumerate(positions) if invariant not in machine.broken(p)
                }, name
        # As real constraints: a bogus value and a position that breaks an invariant are refused.
        await conn.exec_driver_sql(f"DELETE FROM {table} WHERE id > 0")
        for name, expression in checks.items():
            await conn.exec_driver_sql(
                f"ALTER TABLE {table} ADD CONSTRAINT {name} CHECK ({expression}) NOT VALID"
            )
        bogus = ", ".join("'bogus'" for _ in _axes(machine))
        with pytest.raises(IntegrityError, match="_known"):
            async with conn.begin_nested():
                await conn.exec_driver_sql(f"INSERT INTO {table} VALUES (-1, {bogus})")
        broken = next(p for p in positions if machine.broken(p))
        values = ", ".join(_literal(v) for _, v in broken.values)
        with pytest.raises(IntegrityError, match=machine.broken(broken)[0].name):
            async with conn.begin_nested():
                await conn.exec_driver_sql(f"INSERT INTO {table} VALUES (-2, {values})")
        await conn.exec_driver_sql(f"DROP TABLE {table}")
