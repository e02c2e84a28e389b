"""Removing finished work from the database, a small batch at a time; and the logs' floors.

A task or a run that reached a terminal state (its machine's table says which) before a cutoff
is deleted with its events, the webhook deliveries of those events, and whatever else hangs off
it (a run's lease; a task's scoped webhook endpoints, by their foreign key's cascade). Open work
is never touched, however old; nor is a finished task that a run still names or that an open
task depends on (`packet.dependsOn`): it goes once they have gone or finished.

Each batch is one statement in one short transaction: the subjects are picked in the order of
`updated_at` (when they became terminal: a terminal row changes no more) through a partial index
that holds terminal rows only, locked `FOR UPDATE SKIP LOCKED` (a row someone holds is left for
the next sweep), and deleted with everything of theirs. The transaction sets its own
`lock_timeout` and `statement_timeout`, so a batch that would wait on anyone gives up instead of
making others queue behind it. Deleting takes no lock a move of open work waits on: moves lock
their own (open) rows and append new events; a finished row refuses every move.

**Floors.** Every removed event's id is at most its log's floor (`retention_floors`), raised in
the transaction that deletes, so a reader that sees the deletion sees the floor too. A cursor
below the floor may have had removed events after it: replaying from it would skip them
silently, so readers refuse it (`baton.errors.CursorExpired`). Checked after reading, the floor
is race-free: if it is still at or below the cursor then, nothing after the cursor had been
removed when the read ran.

**One sweeper at a time.** A process sweeps while it holds the lease in `retention_sweeper`,
which it takes and renews only inside transactions that hold the transaction-level advisory
lock `SWEEP_LOCK`, tried, never waited for (so it works through a transaction pooler, which
cannot keep a session-level lock). Between batches no lock is held; the lease says who sweeps.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from baton.store.eventlog import FLOORS
from baton.store.lifecycle import Layout
from baton.store.runs import RUNS
from baton.store.tasks import TASKS

if TYPE_CHECKING:
    from baton.store.db import Connection, Database

# The class of the transaction-level lock under which the sweeper's lease is taken and renewed.
SWEEP_LOCK = 7412020
# A batch's transaction waits at most this for a lock, and runs at most this long.
LOCK_TIMEOUT_MS = 100
STATEMENT_TIMEOUT_MS = 5000

LAYOUTS = (RUNS, TASKS)  # runs first: a removed run no longer keeps its task


def terminal_values(layout: Layout) -> tuple[str, ...]:
    """The values of the primary column of `layout`'s rows that end their lifecycle."""
    return tuple(str(info.state.value) for info in layout.machine.states if info.terminal)


def finished_sql(layout: Layout, table: str | None = None) -> str:
    """SQL that holds for a row of `layout` in a terminal state (the finished-rows index's
    predicate, so the planner can use it)."""
    column = layout.columns[0] if table is None else f"{table}.{layout.columns[0]}"
    values = ", ".join(f"'{value}'" for value in terminal_values(layout))
    return f"{column} IN ({values})"


@dataclass(frozen=True)
class Removed:
    """What one batch removed, and where the next batch of the same sweep starts."""

    subjects: int
    events: int
    deliveries: int
    floor: int
    # The last subject the batch picked (its `updated_at`, id): the next batch starts after it.
    position: tuple[datetime, str] | None


def _keeps(layout: Layout) -> list[str]:
    """What keeps a finished row of `layout` (aliased `s`) that is old enough."""
    if layout is not TASKS:
        return []
    return [
        # A run names it (the run's foreign key), whether or not that run is finished.
        "NOT EXISTS (SELECT 1 FROM runs r WHERE r.task_id = s.id)",
        # An open task depends on it: its dependencies stay readable while it is open.
        "NOT EXISTS (SELECT 1 FROM tasks o WHERE o.depends_on @> ARRAY[s.id] "
        f"AND NOT {finished_sql(TASKS, 'o')})",
    ]


def _batch_sql(layout: Layout, after: bool) -> str:
    """The statement that removes up to $2 finished subjects of `layout` last changed before $1
    (and after the position $3, $4 when `after`), with everything of theirs, and raises the
    log's floor."""
    conditions = [finished_sql(layout, "s"), "s.updated_at < $1", *_keeps(layout)]
    if after:
        conditions.append("(s.updated_at, s.id) > ($3::timestamptz, $4::text)")
    log = "task" if layout is TASKS else "run"
    extra = (
        "leases AS (DELETE FROM run_leases l USING doomed d WHERE l.run_id = d.id),"
        if layout is RUNS
        else ""
    )
    return f"""
    WITH doomed AS (
        SELECT s.id, s.updated_at FROM {layout.table} s
        WHERE {" AND ".join(conditions)}
        ORDER BY s.updated_at, s.id
        LIMIT $2
        FOR UPDATE OF s SKIP LOCKED
    ),
    events AS (
        DELETE FROM {layout.events} e USING doomed d WHERE e.{layout.subject} = d.id
        RETURNING e.id
    ),
    deliveries AS (
        DELETE FROM webhook_deliveries w USING events e
        WHERE w.kind = 'event' AND w.log = '{log}' AND w.event_id = e.id
        RETURNING 1
    ),
    {extra}
    gone AS (
        DELETE FROM {layout.table} s USING doomed d WHERE s.id = d.id RETURNING s.id
    ),
    last AS (
        SELECT updated_at, id FROM doomed ORDER BY updated_at DESC, id DESC LIMIT 1
    ),
    counted AS (
        SELECT (SELECT count(*) FROM gone) AS subjects, (SELECT count(*) FROM events) AS events,
            (SELECT count(*) FROM deliveries) AS deliveries,
            coalesce((SELECT max(id) FROM events), 0) AS newest
    ),
    floored AS (
        UPDATE {FLOORS} f SET floor = greatest(f.floor, c.newest),
            removed_subjects = f.removed_subjects + c.subjects,
            removed_events = f.removed_events + c.events,
            swept_at = CASE WHEN c.subjects > 0 THEN now() ELSE f.swept_at END
        FROM counted c WHERE f.log = '{layout.events}'
        RETURNING f.floor
    )
    SELECT c.subjects, c.events, c.deliveries, (SELECT floor FROM floored) AS floor,
        l.updated_at AS last_at, l.id AS last_id
    FROM counted c LEFT JOIN last l ON TRUE
    """


_BATCH = {
    (layout.table, after): _batch_sql(layout, after)
    for layout in LAYOUTS
    for after in (False, True)
}


async def remove_batch(
    conn: Connection,
    layout: Layout,
    cutoff: datetime,
    limit: int,
    after: tuple[datetime, str] | None = None,
) -> Removed:
    """Remove up to `limit` subjects of `layout` that finished before `cutoff` (after the
    position `after`, in (updated_at, id) order), in the caller's transaction."""
    args: tuple[object, ...] = (cutoff, limit) if after is None else (cutoff, limit, *after)
    row = await conn.fetchrow(_BATCH[(layout.table, after is not None)], *args)
    assert row is not None
    position = (row["last_at"], row["last_id"]) if row["last_id"] is not None else after
    return Removed(row["subjects"], row["events"], row["deliveries"], row["floor"], position)


async def bound(conn: Connection) -> bool:
    """Bound this transaction's waits and run time, let it delete events (the logs refuse it
    otherwise: migration 0015), and try the sweep lock: whether it is held (by this
    transaction, until it ends). Settings local to the transaction: nothing of them outlives
    it on the connection, pooled or behind a transaction pooler."""
    return bool(
        await conn.fetchval(
            "SELECT set_config('lock_timeout', $1, true) IS NOT NULL "
            "AND set_config('statement_timeout', $2, true) IS NOT NULL "
            "AND set_config('baton.retention', 'removing', true) IS NOT NULL "
            f"AND pg_try_advisory_xact_lock({SWEEP_LOCK})",
            f"{LOCK_TIMEOUT_MS}ms",
            f"{STATEMENT_TIMEOUT_MS}ms",
        )
    )


async def hold(conn: Connection, holder: str, seconds: float) -> bool:
    """In a transaction that holds the sweep lock (`bound`): take or renew the sweeper's lease
    for `holder` for `seconds`, unless another holder's lease is live. Whether `holder` holds
    it now."""
    held = await conn.fetchval(
        """
        UPDATE retention_sweeper SET holder = $1,
            held_until = now() + make_interval(secs => $2)
        WHERE holder IS NULL OR holder = $1 OR held_until < now()
        RETURNING TRUE
        """,
        holder,
        seconds,
    )
    return bool(held)


async def claim(db: Database, holder: str, seconds: float) -> bool:
    """Take (or renew) the sweeper's lease for `holder`, in a transaction of its own; False
    when another process holds it, or holds the sweep lock at this moment."""
    async with db.transaction() as conn:
        return await bound(conn) and await hold(conn, holder, seconds)


async def release(db: Database, holder: str) -> None:
    """Give up the lease, if `holder` has it."""
    await db.execute(
        "UPDATE retention_sweeper SET holder = NULL, held_until = NULL WHERE holder = $1", holder
    )


async def floors(conn: Connection) -> dict[str, int]:
    """Each log's floor, by the log's table name."""
    rows = await conn.fetch(f"SELECT log, floor FROM {FLOORS}")
    return {row["log"]: int(row["floor"]) for row in rows}
