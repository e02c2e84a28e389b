"""The event logs' order: ids drawn without a shared lock, read only where they are final.

An event's id is its writing transaction's id (`pg_current_xact_id()`, xid8) shifted left by
`SEQ_BITS`, plus the event's number within that transaction: the column default
`baton_event_id()` (migration 0009) computes it, counting in a transaction-local setting. Ids
are unique and increase within a transaction; across transactions they follow the order in which
the transactions got their ids, not the order in which they commit, so a reader must not pass an
id that a running transaction may still write below.

The horizon is the oldest transaction of this database still running when the reading statement
took its snapshot (`pg_snapshot_xip`, less the transactions `pg_stat_get_activity` and
`pg_prepared_xacts` place in another database of the cluster, which cannot write here), or the
snapshot's `xmax` when none runs. Every transaction of this database below it has ended, and any
later one gets a larger id. So the events with ids below `READABLE_BELOW` are final — all
committed ones are visible to the statement and no other will ever appear there — and a reader
that moves its cursor only over them never skips an event that commits later. A transaction the
activity view does not place (it ended since the snapshot, or is hidden from this role) counts
as this database's: the horizon can only come out lower, never past a running writer. A long
transaction in this database (one that holds a transaction id) delays what readers may pass,
never what they see in the end; one in another database of the cluster does not delay them.

One subject's events stay in version order: its writers take the row lock (and the subject's
advisory lock, `Layout.subject_lock`) before their first write, so each gets its transaction id
after the previous writer committed. A subject's own events may therefore be read without the
horizon (`Task.events`), and show a write as soon as it commits.

Events written before migration 0009 keep their ids (1, 2, … in commit order), all below the
first id it draws; old cursors stay valid.

The floor: retention removes finished work with its events (`baton.store.retention`); every
removed event's id is at most its log's floor, which only rises. A cursor below the floor may
have removed events after it. The newest id a reader may pass is never below the floor: an
empty log whose events were all removed still starts new readers above them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from baton.store.db import Connection

# Events one transaction may append: 1,048,576 (a move appends one to three; a bulk load of more
# splits into transactions).
SEQ_BITS = 20

# Transactions running in other databases of the cluster: they cannot write this database's logs.
_ELSEWHERE = (
    "SELECT a.backend_xid FROM pg_stat_get_activity(NULL::integer) a "
    "WHERE a.backend_xid IS NOT NULL "
    "AND a.datid <> (SELECT oid FROM pg_database WHERE datname = current_database()) "
    "UNION ALL SELECT p.transaction FROM pg_prepared_xacts p "
    "WHERE p.database <> current_database()"
)
# Ids below this are final (see the module docstring); an SQL expression, one per statement.
# NOT IN over a hashed list: the activity is read once, however many transactions run.
READABLE_BELOW = (
    "(coalesce((SELECT min(x) FROM pg_snapshot_xip(pg_current_snapshot()) AS x "
    f"WHERE x::xid NOT IN ({_ELSEWHERE})), pg_snapshot_xmax(pg_current_snapshot()))"
    f"::text::bigint << {SEQ_BITS})"
)


# One row per log: its floor (migration 0015).
FLOORS = "retention_floors"


def floor_sql(table: str) -> str:
    """SQL for the floor of event log `table` (0 when nothing was ever removed from it)."""
    return f"coalesce((SELECT floor FROM {FLOORS} WHERE log = '{table}'), 0)"


async def floor(conn: Connection, table: str) -> int:
    """Every event removed from log `table` has an id at most this."""
    return int(await conn.fetchval(f"SELECT {floor_sql(table)}"))


def newest_readable_sql(table: str) -> str:
    """SQL for the newest id in event log `table` that a reader may pass (its floor, 0, if
    none): every event up to it is committed, and none that commits later will have a smaller
    id. (A removed event's transaction ended long before: its id is below the horizon.)"""
    return (
        f"(SELECT greatest(coalesce(max(id), 0), {floor_sql(table)}) FROM {table} "
        f"WHERE id < {READABLE_BELOW})"
    )


async def newest_readable(conn: Connection, table: str) -> int:
    return int(await conn.fetchval(f"SELECT {newest_readable_sql(table)}"))


def writer_of(event_id: int) -> int:
    """The transaction id (xid8) that wrote event `event_id` (0 for an event written before
    migration 0009)."""
    return event_id >> SEQ_BITS
