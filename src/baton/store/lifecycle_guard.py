"""The database guard of any lifecycle, generated from its table. Pure: it returns SQL text.

The trigger refuses every change of the position columns that the lifecycle's exploration does
not list as a transition, a row inserted anywhere but at the initial position, and a version that
does not rise by exactly one per change. CHECK constraints hold the known values of each axis and
the declared invariants. A migration embeds what this returns; the handoff's own guard, which
predates it, stays in `baton.store.guard`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from baton.protocol.logic import Column, Value
from baton.protocol.machine import Machine, Position

Columns = Mapping[str, str]


@dataclass(frozen=True)
class LifecycleGuard:
    function: str  # CREATE OR REPLACE FUNCTION …
    trigger: str  # CREATE TRIGGER …
    checks: dict[str, str]  # constraint name -> CHECK expression
    function_name: str
    trigger_name: str


def _literal(value: Value) -> str:
    return "NULL" if value is None else f"'{value.value}'"


def _row(position: Position[Any]) -> str:
    return ", ".join(_literal(value) for _, value in position.values)


def _axes(machine: Machine[Any, Any, Any]) -> list[str]:
    return [machine.primary, *(a.name for a in machine.attributes)]


def lifecycle_guard(
    machine: Machine[Any, Any, Any],
    *,
    table: str,
    columns: Columns | None = None,
    version: str = "version",
) -> LifecycleGuard:
    """The guard for `table`, whose columns hold the lifecycle's axes (`columns` maps an axis to
    its column where the names differ)."""
    names = columns or {}
    axes = _axes(machine)

    def col(axis: str) -> str:
        return names.get(axis, axis)

    function_name = f"baton_guard_{table}_change"
    trigger_name = f"{table}_guard"
    return LifecycleGuard(
        function=_function_sql(machine, function_name, [col(a) for a in axes], version),
        trigger=(
            f"CREATE TRIGGER {trigger_name} BEFORE INSERT OR UPDATE ON {table}\n"
            f"FOR EACH ROW EXECUTE FUNCTION {function_name}();"
        ),
        checks=_checks(machine, table, col),
        function_name=function_name,
        trigger_name=trigger_name,
    )


def _row_text(position: Position[Any]) -> str:
    """How PostgreSQL prints the position's row: `(waiting,human)`, NULL as nothing."""
    values = ["" if v is None else str(v.value) for _, v in position.values]
    if not all(re.fullmatch(r"[a-z0-9_]*", v) for v in values):
        raise ValueError(f"{position}: a value PostgreSQL would quote in a row's text")
    return f"({','.join(values)})"


def _function_sql(machine: Machine[Any, Any, Any], name: str, cols: list[str], version: str) -> str:
    def row(prefix: str) -> str:
        # As text, so the guard works whether the columns are text or enum types.
        return f"ROW({', '.join(f'{prefix}.{c}::text' for c in cols)})"

    start = machine.initial_position
    said = ", ".join(f"{k} {'null' if v is None else v.value}" for k, v in start.values)
    # Each allowed change as one text key, so the check is one lookup in a constant array.
    changes = sorted(
        {f"{_row_text(t.source)} -> {_row_text(t.target)}" for t in machine.transitions()}
    )
    allowed = ",\n            ".join(f"'{c}'" for c in changes)
    return f"""
CREATE OR REPLACE FUNCTION {name}() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    change text;
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF {row("NEW")} IS DISTINCT FROM ROW({_row(start)})
            OR NEW.{version} IS DISTINCT FROM 1 THEN
            RAISE EXCEPTION 'baton: a {machine.name} row starts at {said}, version 1'
                USING ERRCODE = 'check_violation';
        END IF;
        RETURN NEW;
    END IF;
    IF NEW.{version} IS DISTINCT FROM OLD.{version} + 1 THEN
        RAISE EXCEPTION 'baton: version must rise by one (% -> %)', OLD.{version}, NEW.{version}
            USING ERRCODE = 'check_violation';
    END IF;
    IF {row("NEW")} IS DISTINCT FROM {row("OLD")} THEN
        change := {row("OLD")}::text || ' -> ' || {row("NEW")}::text;
        IF NOT change = ANY (ARRAY[
            {allowed}
        ]) THEN
            RAISE EXCEPTION 'baton: the {machine.name} protocol has no move %', change
                USING ERRCODE = 'check_violation';
        END IF;
    END IF;
    RETURN NEW;
END
$$;
""".strip()


def _checks(machine: Machine[Any, Any, Any], table: str, col: Column) -> dict[str, str]:
    checks: dict[str, str] = {}
    primary = ", ".join(_literal(info.state) for info in machine.states)
    checks[f"{table}_{machine.primary}_known"] = f"{col(machine.primary)} IN ({primary})"
    for axis in machine.attributes:
        known = f"{col(axis.name)} IN ({', '.join(_literal(i.value) for i in axis.values)})"
        if axis.nullable:
            known = f"{col(axis.name)} IS NULL OR {known}"
        checks[f"{table}_{axis.name}_known"] = known
    nullable = frozenset(a.name for a in machine.attributes if a.nullable)
    for invariant in machine.invariants:
        checks[f"{table}_{invariant.name}"] = invariant.condition.sql(col, nullable)
    return checks
