"""The guarded change of any lifecycle's row, as one statement, and its event.

A lifecycle's table lists, for a move and its steering arguments, every (from, to) change of
the position it makes (`Machine.changes`). The statement locks the row, matches its position
against that list, checks the expected version and the caller's role, writes the new position
(and whatever else the operation sets), takes the log's append lock and inserts the event,
returning event and row together. Nothing is written when a guard fails; the service then reads
the row to say why. Tasks and runs both change this way; `Layout` says where each one lives.

Event ids come from the writing transaction's id (see `baton.store.eventlog`): no lock is shared
by all writers. One subject's events must still follow its versions, so the statement takes the
subject's own transaction-level advisory lock before anything else: its transaction id is then
assigned (by its first write, the row lock) only after the subject's previous writer committed,
and is larger than that writer's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from enum import Enum
from typing import TYPE_CHECKING, Any, TypeVar

from baton.protocol.machine import Machine, Position
from baton.store.sql import Params, text_array

if TYPE_CHECKING:
    from baton.store.db import Connection

R = TypeVar("R")


async def event_pages(
    conn: Connection,
    sql: str,
    subject_ids: Sequence[str],
    first: int,
    after: int | None,
    parse: Callable[[Mapping[str, Any]], R],
    loaded: Callable[[Sequence[Mapping[str, Any]]], None] | None = None,
    *,
    peek: bool = True,
) -> dict[str, tuple[list[R], bool]]:
    """For each subject, its events after `after`, oldest first, `first` at most; and whether
    more follow. One query (`sql`: ids as a `text_array`, after, limit; rows carry the
    subject's `id`), whatever the number of subjects. Each subject's row past its page only
    says that more follow and is not parsed; `loaded` is told of every row read (to spend
    what it holds). Without `peek` that row is not read and "more follow" is always False:
    for a caller that does not answer it."""
    pages: dict[str, list[Mapping[str, Any]]] = {subject: [] for subject in subject_ids}
    if pages:
        rows = await conn.fetch(
            sql, text_array(list(pages)), after or 0, first + 1 if peek else first
        )
        if loaded is not None:
            loaded(rows)
        for row in rows:
            pages[row["id"]].append(row)
    return {
        subject: ([parse(row) for row in rows[:first]], len(rows) > first)
        for subject, rows in pages.items()
    }


@dataclass(frozen=True)
class Layout:
    """Where a lifecycle's rows and events live."""

    machine: Machine[Any, Any, Any]
    table: str  # the rows: tasks, runs
    events: str  # their log: task_events, run_events
    subject: str  # the log's column naming the row: task_id, run_id
    columns: tuple[str, ...]  # the row's column for each axis, in position order
    name: str  # the log's column for the move's name
    before: str  # the log's column for the primary axis before the change
    after: str  # ... and after it
    copies: tuple[str, ...]  # row columns the log keeps as they were after the change
    extras: tuple[str, ...]  # the log's own columns, given per change (a reason, details)
    lock: int  # the class of the subjects' advisory locks (the subject's hash is the key)
    # What a change returns of the row after it (`changed`), beside the event's columns.
    row_returned: str = "changed.*"
    # Extras that every door answers as null on an event when they are empty (a run's
    # `details` are `{}` when a change gave none).
    null_when_empty: tuple[str, ...] = ()

    def extra_reader(self, column: str) -> Callable[[Any], Any] | None:
        """How the extra `column` reads on an event, when not as it is stored."""
        return _null_if_empty if column in self.null_when_empty else None

    def subject_lock(self, key: str, *, wait: bool = True) -> str:
        """SQL that takes the subject `key`'s (an SQL expression) transaction-level lock and
        holds (is true), or with `wait=False` holds only if the lock was free. Taking no
        transaction id itself, it goes before a statement's first write."""
        if wait:
            return f"pg_advisory_xact_lock({self.lock}, hashtext({key}))::text = ''"
        return f"pg_try_advisory_xact_lock({self.lock}, hashtext({key}))"

    @property
    def returned(self) -> str:
        """The event's own columns, as the statements return them (`event_*`)."""
        own = [
            "id AS event_id",
            "kind AS event_kind",
            f"{self.name} AS event_name",
            f"{self.before} AS event_from",
            "actor AS event_actor",
            *(f"{extra} AS event_{extra}" for extra in self.extras),
        ]
        return ", ".join(own)


def _null_if_empty(value: Any) -> Any:
    return value if value else None


def check_event_record(layout: Layout, record: type, noun: str) -> None:
    """An event record's fields follow its layout, in the order `baton.store.records.
    event_builder` fills them; raised at import time when they do not."""
    names = [f.name for f in fields(record)]
    expected = [
        "id",
        "kind",
        layout.subject,
        layout.name,
        layout.before,
        layout.after,
        "actor",
        *layout.extras,
        "version",
        "at",
        noun,
    ]
    if names != expected:
        raise TypeError(f"{record.__name__} has fields {names}; its layout needs {expected}")


def _literal(value: Enum | None) -> str:
    return "NULL::text" if value is None else f"'{value.value}'::text"


def _values(pairs: Sequence[tuple[Position[Any], Position[Any]]]) -> str:
    rows = ["(" + ", ".join(_literal(v) for _, v in (*a.values, *b.values)) + ")" for a, b in pairs]
    return ", ".join(rows)


def event_row(
    layout: Layout,
    row: str,
    kind: str,
    name: str,
    before: str,
    actor: str,
    extras: dict[str, str] | None = None,
) -> tuple[str, str]:
    """The log's columns, and their values for an event that left the row `row` (an alias
    whose columns are the row after the change) as it is: what every append writes. Arguments
    are SQL expressions (literals, $n, or names)."""
    given = extras or {}
    columns = [
        layout.subject,
        "kind",
        layout.name,
        layout.before,
        layout.after,
        "actor",
        *layout.extras,
        *layout.copies,
        "version",
        "at",
    ]
    values = [
        f"{row}.id",
        kind,
        name,
        before,
        f"{row}.{layout.columns[0]}",
        actor,
        *(given.get(extra, "NULL") for extra in layout.extras),
        *(f"{row}.{copy}" for copy in layout.copies),
        f"{row}.version",
        f"{row}.updated_at",
    ]
    return ", ".join(columns), ", ".join(values)


def appending(
    layout: Layout, kind: str, name: str, actor: str, extras: dict[str, str] | None = None
) -> str:
    """The tail of a change statement, after CTE `changed` (the row after the change, plus
    `from_value`, the primary axis before it): append the event (its id is the column's
    default, `baton_event_id()`), return the event's columns and the row's. Arguments are SQL
    expressions (literals or $n)."""
    columns, values = event_row(layout, "c", kind, name, "c.from_value", actor, extras)
    return f"""
    event AS (
        INSERT INTO {layout.events} ({columns})
        SELECT {values}
        FROM changed c
        RETURNING {layout.returned}
    )
    SELECT event.*, {layout.row_returned} FROM event, changed
    """


def change_statement(
    layout: Layout,
    p: Params,
    *,
    pairs: Sequence[tuple[Position[Any], Position[Any]]],
    select: str,
    subject: str | None,
    skip_locked: bool = False,
    sets: Sequence[str] = (),
    guards: Sequence[str] = (),
    expected_version: int | None = None,
    kind: str = "'moved'",
    name: str = "NULL",
    actor: str = "NULL",
    extras: dict[str, str] | None = None,
    also: Sequence[str] = (),
) -> str:
    """One statement that changes the row `select` picks (a WHERE over the table, which may end
    in ORDER BY … LIMIT; with `skip_locked`, rows another transaction holds are passed over)
    from one position of `pairs` to its partner, if the `guards` (over `old`, the locked row)
    and `expected_version` hold. `also` are further named statements over `changed` that run
    with it (`name AS (…)`), in the same transaction.

    `subject` (an SQL expression, the row's id) names the row when it is known beforehand: its
    advisory lock is then taken before the row lock (tried, with `skip_locked`), so that this
    statement's transaction id follows that of the row's previous writer (see the module
    docstring). A statement that picks its row (`subject=None`, a claim of the oldest run)
    relies on PostgreSQL assigning the transaction id of a row lock only once the lock is
    granted: it must be its transaction's first write, as every change is.

    The text depends only on the arguments' SQL (values travel as parameters), so it is built
    once per shape and kept (`_STATEMENTS`); only `expected_version`'s value is added to `p`."""
    versioned = expected_version is not None
    key = (
        id(layout),
        id(pairs),
        select,
        subject,
        skip_locked,
        tuple(sets),
        tuple(guards),
        p.start + len(p.values) if versioned else None,
        kind,
        name,
        actor,
        tuple(extras.items()) if extras else (),
        tuple(also),
    )
    version = p(expected_version) if versioned else None
    kept = _STATEMENTS.get(key)
    if kept is not None and kept[0] is layout and kept[1] is pairs:
        return kept[2]
    sql = _change_sql(
        layout,
        pairs,
        select,
        subject,
        skip_locked,
        sets,
        guards,
        version,
        kind,
        name,
        actor,
        extras,
        also,
    )
    if len(_STATEMENTS) >= MAX_STATEMENTS:
        _STATEMENTS.clear()
    # Holding `layout` and `pairs` keeps their ids from naming another object while kept.
    _STATEMENTS[key] = (layout, pairs, sql)
    return sql


# Statement texts by shape. Shapes are few (a lifecycle's moves times the callers' kinds of
# principal and options); a caller that put values in the text would fill it, so it is bounded.
MAX_STATEMENTS = 512
_STATEMENTS: dict[tuple[Any, ...], tuple[Layout, object, str]] = {}


def _change_sql(
    layout: Layout,
    pairs: Sequence[tuple[Position[Any], Position[Any]]],
    select: str,
    subject: str | None,
    skip_locked: bool,
    sets: Sequence[str],
    guards: Sequence[str],
    version: str | None,
    kind: str,
    name: str,
    actor: str,
    extras: dict[str, str] | None,
    also: Sequence[str],
) -> str:
    axes = len(layout.columns)
    before = [f"f{i}" for i in range(axes)]
    after = [f"t{i}" for i in range(axes)]
    matches = [
        f"old.{c} IS NOT DISTINCT FROM m.{f}" for c, f in zip(layout.columns, before, strict=True)
    ]
    writes = [f"{c} = m.{t}" for c, t in zip(layout.columns, after, strict=True)]
    if version is not None:
        guards = [*guards, f"old.version = {version}"]
    if not pairs:
        matches = ["FALSE"]  # no position allows it: nothing changes, the service says why
    lock = "FOR UPDATE SKIP LOCKED" if skip_locked else "FOR UPDATE"
    if subject is not None:
        # After the row's own conditions: a row the caller may not see is not even locked.
        select = f"({select}) AND {layout.subject_lock(subject, wait=not skip_locked)}"
    return f"""
    WITH old AS (SELECT * FROM {layout.table} WHERE {select} {lock}),
    moves ({", ".join(before + after)}) AS (VALUES {_values(pairs) or _nothing(axes)}),
    changed AS (
        UPDATE {layout.table} r SET {", ".join([*writes, *sets])},
            version = r.version + 1, updated_at = now()
        FROM old, moves m
        WHERE r.id = old.id AND {" AND ".join([*matches, *guards])}
        RETURNING r.*, old.{layout.columns[0]} AS from_value
    ),{"".join(f"{statement}," for statement in also)}""" + appending(
        layout, kind, name, actor, extras
    )


def _nothing(axes: int) -> str:
    return "(" + ", ".join(["NULL::text"] * (2 * axes)) + ")"
