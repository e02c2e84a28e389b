"""Database-side guards generated from the protocol table.

The trigger refuses any state change the table does not list, a task created anywhere but in
the initial state, and a version that does not rise by exactly one per change. CHECK constraints
hold the per-state invariants. Migrations embed the SQL generated here; a test proves the
database refuses exactly what the table refuses. Its text is frozen by the migration that embeds
it; `baton.store.lifecycle_guard` generates the same kind of guard for any lifecycle.
"""

from __future__ import annotations

from enum import Enum

from baton.protocol.handoff import HANDOFF, Actor, MoveName, TaskState, Verification, WaitingOn
from baton.protocol.machine import Machine

TRIGGER_FUNCTION = "baton_guard_task_change"


def _values(enum: type[Enum]) -> str:
    return ", ".join(f"'{member.value}'" for member in enum)


def transition_function_sql(machine: Machine[TaskState, MoveName, Actor] = HANDOFF) -> str:
    # Each allowed change as one text key in a constant array: the check is then a simple
    # expression, which PL/pgSQL evaluates without a plan. `NOT IN (VALUES …)` ran a query
    # through SPI on every update of a task, a twentieth of a move's CPU in PostgreSQL.
    changes = dict.fromkeys(f"{m.source.value} -> {m.target.value}" for m in machine.moves)
    allowed = ",\n        ".join(f"'{change}'" for change in changes)
    return f"""
CREATE OR REPLACE FUNCTION {TRIGGER_FUNCTION}() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF NEW.state <> '{machine.initial.value}' OR NEW.version <> 1 THEN
            RAISE EXCEPTION 'baton: a task starts in {machine.initial.value} at version 1'
                USING ERRCODE = 'check_violation';
        END IF;
        RETURN NEW;
    END IF;
    IF NEW.version <> OLD.version + 1 THEN
        RAISE EXCEPTION 'baton: version must rise by one (% -> %)', OLD.version, NEW.version
            USING ERRCODE = 'check_violation';
    END IF;
    IF NEW.state IS DISTINCT FROM OLD.state
        AND NOT ((OLD.state || ' -> ' || NEW.state) = ANY (ARRAY[
        {allowed}
    ])) THEN
        RAISE EXCEPTION 'baton: the protocol has no move % -> %', OLD.state, NEW.state
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END
$$;
""".strip()


TRIGGER_SQL = f"""
CREATE TRIGGER tasks_guard BEFORE INSERT OR UPDATE ON tasks
FOR EACH ROW EXECUTE FUNCTION {TRIGGER_FUNCTION}();
""".strip()


def check_constraints() -> dict[str, str]:
    """Named CHECK constraints on `tasks`, built from the protocol's enums."""
    return {
        "tasks_state_known": f"state IN ({_values(TaskState)})",
        "tasks_waiting_on_known": f"waiting_on IS NULL OR waiting_on IN ({_values(WaitingOn)})",
        "tasks_waiting_on_iff_waiting": "(state = 'waiting') = (waiting_on IS NOT NULL)",
        "tasks_completed_has_result": "state <> 'completed' OR result IS NOT NULL",
        "tasks_verification_known": f"verification IN ({_values(Verification)})",
    }
