"""The task store: tasks and their events, written through the guarded change of
`baton.store.lifecycle`, and the reads.

A change is one statement; it runs on its own (autocommit) unless an operation makes several
changes at once (a hand-off and its gate decision, a result and what a passing one leads to).
"""

from __future__ import annotations

import base64
import binascii
import functools
import itertools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Protocol

import asyncpg

from baton.access.principals import ROLES, Principal, PrincipalKind, Reach
from baton.budget import spend
from baton.errors import InvalidInput
from baton.metrics import DB_STATEMENTS
from baton.protocol.handoff import HANDOFF, Actor, MoveName, TaskState, WaitingOn
from baton.protocol.machine import Position
from baton.protocol.task_object import check_task_id
from baton.store import task_contexts
from baton.store.db import Connection
from baton.store.lifecycle import (
    Layout,
    change_statement,
    check_event_record,
    event_pages,
    event_row,
)
from baton.store.records import LAZY_JSON, EventRecord, TaskRecord
from baton.store.sql import Params
from baton.store.together import Lanes, Together

# The class of the per-task advisory locks that keep one task's events in version order (see
# `baton.store.lifecycle`). Event appends share no lock.
EVENT_APPEND_LOCK = 7412002

# The columns a `TaskRecord` is made of, and no others: a row's `depends_on` array, owners and
# deliverable type (kept for the indexes) would be decoded for nothing.
RECORD_COLUMNS = (
    "id, project, state, waiting_on, requester, assignee, packet, result, latest_checkpoint, "
    "verification, version, input_digest, created_at, updated_at"
)


@dataclass(frozen=True)
class TaskReads:
    """What a read of tasks takes: the JSON columns (packet, result, checkpoint: most of a
    row's bytes) or not, the `depends_on` array or not, and, when the JSON is left out, which
    scalar columns (None: all; `id` always, rows are keyed by it). A reader that answers no
    JSON field leaves the JSON out (`TaskRecord.from_scalar_row`, `TaskRecord.reader_of`)."""

    json: bool = True
    depends_on: bool = False
    scalars: frozenset[str] | None = None
    # With the JSON left out: the packet's keys to read all the same (an object of only
    # those; the result and checkpoint stay unread), or None for no packet at all.
    packet_keys: frozenset[str] | None = None

    def scalar_columns(self) -> frozenset[str]:
        """The scalar columns this read takes."""
        if self.json or self.scalars is None:
            return SCALAR_COLUMNS
        return self.scalars | _KEYS

    def columns(self) -> tuple[str, ...]:
        """The record's columns this read takes, in `RECORD_COLUMNS` order."""
        scalars = self.scalar_columns()
        return tuple(c for c in _RECORD if (c in LAZY_JSON and self.json) or c in scalars)

    def taking(self, *columns: str) -> TaskReads:
        """This read, taking the scalar `columns` too."""
        if self.scalars is None:
            return self
        return replace(self, scalars=self.scalars | frozenset(columns))

    def full(self) -> TaskReads:
        """This read with every scalar column (and all of the JSON if it takes any)."""
        return TaskReads(self.json or self.packet_keys is not None, self.depends_on)


ALL = TaskReads()
SCALARS = TaskReads(json=False)
_RECORD = tuple(RECORD_COLUMNS.split(", "))
_KEYS = frozenset({"id"})
SCALAR_COLUMNS = frozenset(c for c in _RECORD if c not in LAZY_JSON)


def _selected(table: str, reads: TaskReads) -> list[tuple[str, str, str]]:
    """Each column `reads` takes: its expression over `table`, its name in the row, and the
    stored column it is made from."""
    selected = [
        (f"{table}.{c}::text", f"{c}_text", c) if c in LAZY_JSON else (f"{table}.{c}", c, c)
        for c in reads.columns()
    ]
    if reads.depends_on:
        selected.append((f"{table}.depends_on", "depends_on", "depends_on"))
    keys = reads.packet_keys
    if not reads.json and keys is not None:
        strings = _packet_strings(keys)
        if strings is not None:
            # Each one's text as it is: no JSON written here to be decoded there.
            for key in sorted(strings):
                selected.append((f"{table}.packet->>'{key}'", f"packet_{key}", "packet"))
        else:
            selected.append((_packet_object(table, keys), "packet_text", "packet"))
    return selected


# The packet's keys whose values are strings (the task object's schema holds them so).
STRING_PACKET_KEYS = frozenset({"task", "deliverable_type", "context"})


def _packet_strings(keys: frozenset[str] | None) -> frozenset[str] | None:
    """`keys`, when a read of only them takes each as text in a column of its own."""
    return keys if keys and keys <= STRING_PACKET_KEYS else None


def _packet_object(table: str, keys: frozenset[str]) -> str:
    """SQL for the JSON text of an object of the packet's `keys` (null where one is missing),
    written out from each value's own text: `jsonb_build_object(…)::text` made a new jsonb
    per row only to print it, a fifth of PostgreSQL's CPU for a page of 50."""
    if not keys:
        return "'{}'"
    parts = []
    for n, key in enumerate(sorted(keys)):
        if not _PACKET_KEY.fullmatch(key):
            raise ValueError(f"not a packet key: {key!r}")
        opening = "{" if n == 0 else ", "
        parts.append(f"'{opening}\"{key}\": ' || coalesce(({table}.packet->'{key}')::text, 'null')")
    return " || ".join(parts) + " || '}'"


_PACKET_KEY = re.compile(r"[a-z_][a-z0-9_]*")


@functools.cache
def _columns(table: str, reads: TaskReads = ALL) -> str:
    """The columns of `table` that `reads` takes, JSON as text (for
    `TaskRecord.from_text_row`)."""
    return ", ".join(
        expression if expression == f"{table}.{name}" else f"{expression} AS {name}"
        for expression, name, _ in _selected(table, reads)
    )


@functools.cache
def _sources(table: str, reads: TaskReads) -> str:
    """The stored columns of `table` that `_columns(…, reads)` is made from: what a subquery
    passes on for an outer query to select from with `_columns`."""
    return ", ".join(dict.fromkeys(f"{table}.{source}" for _, _, source in _selected(table, reads)))


TASKS = Layout(
    machine=HANDOFF,
    table="tasks",
    events="task_events",
    subject="task_id",
    columns=("state", "waiting_on"),
    name="move",
    before="from_state",
    after="to_state",
    copies=("waiting_on", "result", "latest_checkpoint"),
    extras=("reason",),
    lock=EVENT_APPEND_LOCK,
    # The record's columns, JSON as text (`TaskRecord.from_text_row`): a move's answer rarely
    # reads the packet, and asyncpg decoded it (and the checkpoint, the result) for every move.
    row_returned=_columns("changed"),
)
check_event_record(TASKS, EventRecord, "task")


def _records(rows: Sequence[Any], reads: TaskReads = ALL) -> list[TaskRecord]:
    """Records of rows read with `_columns(…, reads)`. Their JSON came as text, which the
    connection's decoder did not meter: it is spent from the request's budget here, as it
    would be there."""
    if reads.json:
        _spend_text(rows)
        records = [TaskRecord.from_text_row(r) for r in rows]
    elif reads.scalars is None and reads.packet_keys is None:
        records = [TaskRecord.from_scalar_row(r) for r in rows]
    else:
        keys = reads.packet_keys
        strings = _packet_strings(keys)
        if strings is not None:
            _spend_text(rows, tuple(f"packet_{key}" for key in sorted(strings)))
        elif keys is not None:
            _spend_text(rows, ("packet_text",))
        read = TaskRecord.reader_of(
            reads.scalar_columns(), packet=keys is not None, packet_strings=strings
        )
        records = [read(r) for r in rows]
    if reads.depends_on:
        for row, record in zip(rows, records, strict=True):
            record.keep_depends_on(row["depends_on"])
    return records


def _spend_text(rows: Sequence[Any], columns: Sequence[str] | None = None) -> None:
    size = 0
    for row in rows:
        for name in columns or _TEXT_COLUMNS:
            text = row[name]
            if text is not None:
                size += len(text)
    spend(0, size)


_TEXT_COLUMNS = tuple(f"{c}_text" for c in LAZY_JSON)


# The task as it was right after event `e`: its fixed columns, and what `e` left the rest at.
_TASK_AT_EVENT = (
    "t.id, t.project, e.to_state AS state, e.waiting_on, t.requester, t.assignee, t.packet, "
    "e.result, e.latest_checkpoint, t.verification, e.version, t.input_digest, t.created_at, "
    "e.at AS updated_at"
)
EVENTS_WITH_TASKS = (
    "SELECT e.id AS event_id, e.kind AS event_kind, e.move AS event_name, "
    "e.from_state AS event_from, e.actor AS event_actor, e.reason AS event_reason, "
    f"{_TASK_AT_EVENT} FROM task_events e JOIN tasks t ON t.id = e.task_id"
)

# What `baton_hand_off` returns: one row per event, as `EVENTS_WITH_TASKS` reads them.
_EVENT_ROW_TYPES = (
    ("event_id", "bigint"),
    ("event_kind", "text"),
    ("event_name", "text"),
    ("event_from", "text"),
    ("event_actor", "text"),
    ("event_reason", "text"),
    ("id", "text"),
    ("project", "text"),
    ("state", "text"),
    ("waiting_on", "text"),
    ("requester", "text"),
    ("assignee", "text"),
    ("packet", "jsonb"),
    ("result", "jsonb"),
    ("latest_checkpoint", "jsonb"),
    ("verification", "text"),
    ("version", "integer"),
    ("input_digest", "text"),
    ("created_at", "timestamptz"),
    ("updated_at", "timestamptz"),
)
HAND_OFF_FUNCTION = "baton_hand_off"
# What `baton_hand_off` raises when the gate rules it was given a version of have changed since.
RULES_CHANGED = "BT001"


class RulesChanged(Exception):
    """The assignee owner's gate rules changed after the caller read them: nothing was written;
    decide again on the rules as they are now."""


def hand_off_function_sql() -> str:
    """The server-side function that creates a task and makes the gate's move on it, as one
    statement: the task row, its `created` event, then (when `move` is given) the change to
    the position given and its `moved` event; it returns the events with the task as each left
    it, or nothing when the id exists. The guard trigger still checks the row starts at the
    initial position and that the change is one the table lists; which position that is, is the
    caller's to say, read off the table. One round trip. The task is new, so no other
    transaction can have written its events before this one: it needs no task lock.

    The caller decided the gate's move by the assignee owner's rules at `rules_version` (see
    `gate_rule_versions`); if they have changed since, nothing is written and the function
    raises SQLSTATE `RULES_CHANGED`, so rules a server keeps are never acted on once stale.
    A migration embeds what this returns."""
    created_columns, created_values = event_row(
        TASKS, "made", "'created'", "NULL", "NULL", "creator"
    )
    moved_columns, moved_values = event_row(
        TASKS, "made", "'moved'", "gate_move", "gate_from", "mover"
    )
    returns = ",\n    ".join(f"{name} {kind}" for name, kind in _EVENT_ROW_TYPES)
    return f"""
CREATE OR REPLACE FUNCTION {HAND_OFF_FUNCTION}(
    new_id text, new_project text, new_state text, new_requester text, new_assignee text,
    new_deliverable_type text, new_depends_on text[], new_packet jsonb, new_verification text,
    new_input_digest text, creator text, gate_move text, gate_state text,
    gate_waiting_on text, mover text, rules_owner text, rules_version bigint)
RETURNS TABLE (
    {returns})
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    made tasks;
    gate_from text;
BEGIN
    IF coalesce((SELECT v.version FROM gate_rule_versions v WHERE v.owner = rules_owner), 0)
        <> rules_version THEN
        RAISE EXCEPTION 'baton: the gate rules of % changed', rules_owner
            USING ERRCODE = '{RULES_CHANGED}';
    END IF;
    INSERT INTO tasks (id, project, state, waiting_on, requester, assignee, requester_owner,
        assignee_owner, deliverable_type, depends_on, packet, result, latest_checkpoint,
        verification, version, input_digest, created_at, updated_at)
    VALUES (new_id, new_project, new_state, NULL, new_requester, new_assignee,
        split_part(new_requester, '/', 1), split_part(new_assignee, '/', 1),
        new_deliverable_type, new_depends_on, new_packet, NULL, NULL, new_verification, 1,
        new_input_digest, now(), now())
    ON CONFLICT (id) DO NOTHING
    RETURNING * INTO made;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    INSERT INTO {TASKS.events} ({created_columns})
    VALUES ({created_values});
    IF gate_move IS NOT NULL THEN
        gate_from := made.state;
        UPDATE tasks SET state = gate_state, waiting_on = gate_waiting_on,
            version = tasks.version + 1, updated_at = now()
        WHERE tasks.id = made.id
        RETURNING * INTO made;
        INSERT INTO {TASKS.events} ({moved_columns})
        VALUES ({moved_values});
    END IF;
    RETURN QUERY {EVENTS_WITH_TASKS} WHERE e.task_id = made.id ORDER BY e.id;
END
$$;
""".strip()


@dataclass(frozen=True)
class NewTask:
    id: str
    project: str
    requester: str
    assignee: str
    packet: dict[str, Any]
    verification: str
    input_digest: str


@dataclass(frozen=True)
class GateMove:
    """The move the gate makes on a new task, and the position it leads to."""

    move: MoveName
    to: Position[TaskState]


async def create(
    conn: Connection,
    task: NewTask,
    actor: str,
    gate: GateMove | None,
    mover: str,
    rules: tuple[str, int],
    context: task_contexts.GivenContext | None = None,
) -> list[EventRecord]:
    """Create the task in its initial state with its `created` event and, when `gate` is
    given, make the gate's move (by `mover`) in the same statement; no events if the id
    exists. `rules` is the owner and version of the gate rules `gate` was decided by;
    `RulesChanged` when they are no longer current. `context`: the A2A context to keep beside
    a new task, in the same statement."""
    to = gate.to.as_dict() if gate is not None else {}
    sql = (
        f"SELECT * FROM {HAND_OFF_FUNCTION}"
        "($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)"
    )
    kept: tuple[str | None, ...] = ()
    if context is not None:
        sql = task_contexts.keeping(sql, "$1", "$18", "$19")
        kept = (context.context_id, context.message_id)
    try:
        rows = await conn.fetch(
            sql,
            task.id,
            task.project,
            HANDOFF.initial.value,
            task.requester,
            task.assignee,
            task.packet["deliverable_type"],
            list(task.packet["depends_on"]),
            task.packet,
            task.verification,
            task.input_digest,
            actor,
            gate.move.value if gate is not None else None,
            _value(to.get("state")),
            _value(to.get("waiting_on")),
            mover,
            *rules,
            *kept,
            writes=True,
        )
    except asyncpg.PostgresError as exc:
        if exc.sqlstate == RULES_CHANGED:
            raise RulesChanged(rules[0]) from exc
        raise
    return [EventRecord.from_row(row) for row in rows]


def _value(value: Any) -> str | None:
    return None if value is None else str(value.value)


# --- changes ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Change:
    """One guarded change of a task: the positions it may start from and where each goes, who
    may make it, and what else it sets."""

    kind: str  # moved | checkpoint_saved
    pairs: tuple[tuple[Position[TaskState], Position[TaskState]], ...]
    move: MoveName | None = None
    actor: Actor | None = None  # who may make it; None: the server itself (the gate)
    clears_result: bool = False
    result: dict[str, Any] | None = None  # set; `returned_by` is added from the caller
    checkpoint: dict[str, Any] | None = None


async def change(
    conn: Connection,
    task_id: str,
    change: Change,
    principal: Principal,
    *,
    expected_version: int | None,
    reason: str | None = None,
) -> EventRecord | None:
    """Apply `change` if every guard holds now; None when one does not (nothing written).
    A task the caller may not see is not even locked: to the statement it does not exist, so
    the refusal costs what one on a missing id costs."""
    sql, args = change_sql(task_id, change, principal, expected_version, reason)
    row = await conn.fetchrow(sql, *args)
    return EventRecord.from_row(row, text=True) if row is not None else None


async def change_together(
    together: Together,
    task_id: str,
    change: Change,
    principal: Principal,
    *,
    expected_version: int | None,
    reason: str | None = None,
) -> EventRecord | None:
    """`change` as its own transaction, or with the changes of its kind that wait beside it
    (`baton.store.together`): the same guards, the same outcome."""
    sql, args = change_sql(task_id, change, principal, expected_version, reason)
    row = await together.fetchrow(sql, args, task_id, principal)
    return EventRecord.from_row(row, text=True) if row is not None else None


def lock_visible(principal: Principal, ids: Sequence[str]) -> tuple[str, list[Any]]:
    """SQL that takes, in id order, the advisory lock of each task of `ids` that `principal`
    may see (what `change` takes first, for several changes in one transaction)."""
    p = Params()
    sql = (
        f"SELECT count({TASKS.subject_lock('s.id')}) FROM (SELECT t.id FROM tasks t"
        f" WHERE t.id = ANY({p.texts(ids)}) AND ({visible_sql(principal, p)}) ORDER BY t.id) s"
    )
    return sql, p.values


def change_sql(
    task_id: str,
    change: Change,
    principal: Principal,
    expected_version: int | None,
    reason: str | None,
) -> tuple[str, list[Any]]:
    """The statement of `change` on `task_id`, and its parameters."""
    p = Params()
    key = p(task_id)
    select = f"id = {key} AND ({visible_sql(principal, p, 'tasks')})"
    sets = []
    if change.clears_result:
        sets.append("result = NULL")
    if change.result is not None:
        returned_by = principal.handle if principal.kind is PrincipalKind.AGENT else None
        sets.append(
            f"result = {p(change.result)}::jsonb || jsonb_build_object("
            f"'returned_by', COALESCE({p(returned_by)}::text, old.assignee))"
        )
    if change.checkpoint is not None:
        sets.append(f"latest_checkpoint = {p(change.checkpoint)}::jsonb")
    guards = [] if change.actor is None else [role_sql(principal, change.actor, p, "old")]
    move = f"{p(change.move.value if change.move else None)}::text"
    sql = change_statement(
        TASKS,
        p,
        pairs=change.pairs,
        select=select,
        subject=f"{key}::text",
        sets=sets,
        guards=guards,
        expected_version=expected_version,
        kind=f"'{change.kind}'",
        name=move,
        actor=p(principal.handle),
        extras={"reason": p(reason)},
    )
    return sql, p.values


def role_sql(principal: Principal, actor: Actor, p: Params, table: str) -> str:
    """SQL that holds when `principal` fills role `actor` on the task row `table`; the same
    rule as `Principal.may_act_as`, from the same table (`ROLES`)."""
    if principal.kind is PrincipalKind.ADMIN:
        return "TRUE"
    role = ROLES[actor]
    if principal.kind is PrincipalKind.OWNER:
        return f"{table}.{role.side.value}_owner = {p(principal.handle)}"
    if role.reach is Reach.OWNS:
        return "FALSE"  # an agent owns no one
    me = p(principal.handle)
    sql = f"{table}.{role.side.value} = {me}"
    if role.not_the is not None:
        sql += f" AND {table}.{role.not_the.value} <> {me}"
    return sql


# --- reading ------------------------------------------------------------------------------


async def load(conn: Connection, task_id: str) -> TaskRecord | None:
    row = await conn.fetchrow(f"SELECT {RECORD_COLUMNS} FROM tasks WHERE id = $1", task_id)
    return TaskRecord.from_mapping(row) if row is not None else None


async def load_visible(
    conn: Connection, principal: Principal, task_id: str, reads: TaskReads = ALL
) -> TaskRecord | None:
    """Task `task_id` if `principal` may see it, with what `reads` takes of it. One statement
    whether the task is missing or not visible, so neither the answer nor its cost says
    which."""
    p = Params()
    sql = (
        f"SELECT {_columns('t', reads)} FROM tasks t"
        f" WHERE t.id = {p(task_id)} AND ({visible_sql(principal, p)})"
    )
    row = await conn.fetchrow(sql, *p.values)
    return _records([row], reads)[0] if row is not None else None


def _sides(principal: Principal, p: Params, table: str = "t") -> list[str]:
    """What `principal` may see, as disjoint conditions that each match an index ordered by
    recency: the tasks on its requester side, then those on its assignee side only.

    An owner's assignee side is its cross-owner tasks, written `assignee_owner <>
    requester_owner` (the same rows as `requester_owner <> owner` there) because that is the
    predicate of the partial indexes that hold them. An agent's sides lead with its handle."""
    if principal.kind is PrincipalKind.ADMIN:
        return ["TRUE"]
    if principal.kind is PrincipalKind.OWNER:
        owner = p(principal.handle)
        return [
            f"{table}.requester_owner = {owner}",
            f"{table}.assignee_owner = {owner}"
            f" AND {table}.assignee_owner <> {table}.requester_owner",
        ]
    agent = p(principal.handle)
    return [
        f"{table}.requester = {agent}",
        f"{table}.assignee = {agent} AND {table}.requester <> {agent}",
    ]


def visible_sql(principal: Principal, p: Params, table: str = "t") -> str:
    return " OR ".join(f"({side})" for side in _sides(principal, p, table))


def _any(column: str, values: Sequence[str], p: Params) -> str:
    """`column = $n` for one value (an index can then keep its order), else `= ANY`."""
    if len(values) == 1:
        return f"{column} = {p(values[0])}"
    return f"{column} = ANY({p(list(values))}::text[])"


@dataclass(frozen=True)
class TaskQuery:
    projects: Sequence[str] = ()
    states: Sequence[TaskState] = ()
    requester: str | None = None
    assignee: str | None = None
    waiting_on: Sequence[WaitingOn] = ()
    deliverable_types: Sequence[str] = ()
    updated_after: datetime | None = None
    # The A2A context the task was handed off in (`baton.store.task_contexts`).
    context_id: str | None = None

    def conditions(self, p: Params, table: str = "t") -> list[str]:
        out: list[str] = []
        if self.projects:
            out.append(_any(f"{table}.project", self.projects, p))
        if self.states:
            out.append(_any(f"{table}.state", [s.value for s in self.states], p))
        if self.requester is not None:
            out.append(f"{table}.requester = {p(self.requester)}")
        if self.assignee is not None:
            out.append(f"{table}.assignee = {p(self.assignee)}")
        if self.waiting_on:
            out.append(_any(f"{table}.waiting_on", [w.value for w in self.waiting_on], p))
        if self.deliverable_types:
            out.append(_any(f"{table}.deliverable_type", self.deliverable_types, p))
        if self.updated_after is not None:
            when = storable_time(self.updated_after, "filter.updatedAfter")
            out.append(f"{table}.updated_at > {p(when)}")
        if self.context_id is not None:
            out.append(
                "EXISTS (SELECT 1 FROM a2a_task_contexts c "
                f"WHERE c.task_id = {table}.id AND c.context_id = {p(self.context_id)})"
            )
        return out


class Listed(Protocol):
    """What a listing's cursor is made of: recency, then id."""

    @property
    def id(self) -> str: ...

    @property
    def updated_at(self) -> datetime: ...


def encode_cursor(row: Listed) -> str:
    raw = f"{row.updated_at.isoformat()}|{row.id}"
    return base64.urlsafe_b64encode(raw.encode()).decode()


def storable_time(when: datetime, field: str) -> datetime:
    """`when` in UTC (naive means UTC), or InvalidInput when it falls off the calendar."""
    try:
        return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)
    except (OverflowError, ValueError) as exc:
        raise InvalidInput(field, "is outside the supported date range") from exc


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    try:
        when, task_id = base64.urlsafe_b64decode(cursor.encode()).decode().split("|", 1)
        check_task_id(task_id, "after")
        return storable_time(datetime.fromisoformat(when), "after"), task_id
    except (ValueError, binascii.Error, UnicodeDecodeError) as exc:
        raise InvalidInput("after", "is not a cursor this server issued") from exc


_NEWEST = "ORDER BY updated_at DESC, id DESC"


async def page(
    conn: Connection,
    principal: Principal,
    query: TaskQuery,
    first: int,
    after: str | None,
    reads: TaskReads = ALL,
) -> tuple[list[TaskRecord], bool]:
    """Newest `updated_at` first; returns the page and whether more follow.

    Each side of what the caller may see is its own ordered, limited scan (an owner's
    requester side and assignee side each have an index that keeps the order), merged."""
    sql, args = page_sql(principal, query, first, after, reads)
    rows = _records(await conn.fetch(sql, *args), reads)
    return rows[:first], len(rows) > first


async def page_together(
    pages: Lanes[PageKind, PageRows],
    principal: Principal,
    query: TaskQuery,
    first: int,
    after: str | None,
    reads: TaskReads = ALL,
) -> tuple[list[TaskRecord], bool]:
    """`page`, alone or in one statement with the pages of its text that wait beside it
    (`baton.store.together`); rows and JSON are spent from this request's budget either way."""
    sql, args = page_sql(principal, query, first, after, reads)
    fetched = await pages.run((principal, sql), str(next(_PAGE_SERIAL)), args)
    assert fetched is not None, "every waiting page gets its rows"
    found, together = fetched
    if together:
        spend(len(found))  # read outside this request: counted here
    rows = _records(found, reads)
    return rows[:first], len(rows) > first


# Rows of a page, and whether they were read together with other pages.
PageRows = tuple[list[asyncpg.Record], bool]
# Pages go together by reader and statement text: one reader's slow pages never hold up
# another's.
PageKind = tuple[Principal, str]
_PAGE_SERIAL = itertools.count()
# Python values a batch of pages can carry, as arrays of one PostgreSQL type per parameter.
_ARRAY_OF = {str: "text", int: "int8", datetime: "timestamptz", bool: "bool"}
_PARAMETER = re.compile(r"\$(\d+)")


async def page_one(conn: Connection, key: PageKind, _: str, args: Any) -> PageRows:
    return await conn.fetch(key[1], *args), False


async def page_many(
    conn: Connection, key: PageKind, items: Sequence[tuple[str, Any]]
) -> dict[str, PageRows]:
    """The pages of one statement text, each with its own parameters, as one statement: the
    parameters as arrays, `unnest`ed side by side, and the statement run once for each of
    their rows (`LATERAL`), numbered. A parameter of another type (None, a list) reads each
    page alone."""
    sql = key[1]
    batch = [args for _, args in items]
    types = [_ARRAY_OF.get(type(value)) for value in batch[0]]
    same = all([_ARRAY_OF.get(type(value)) for value in args] == types for args in batch[1:])
    if None in types or not same:
        DB_STATEMENTS.inc(len(items))
        return {subject: (await conn.raw.fetch(sql, *args), True) for subject, args in items}
    columns = "".join(f", page_p{n}" for n in range(1, len(types) + 1))
    arrays = "".join(f", ${n + 1}::{kind}[]" for n, kind in enumerate(types, start=1))
    inner = _PARAMETER.sub(lambda m: f"b.page_p{m.group(1)}", sql)
    together = (
        f"SELECT x.*, b.page_n FROM unnest($1::int8[]{arrays}) AS b(page_n{columns})"
        f" CROSS JOIN LATERAL ({inner}) x"
    )
    values = [list(range(len(batch))), *([args[n] for args in batch] for n in range(len(types)))]
    DB_STATEMENTS.inc()
    rows: list[list[asyncpg.Record]] = [[] for _ in batch]
    for row in await conn.raw.fetch(together, *values):
        rows[row["page_n"]].append(row)
    return {subject: (found, True) for (subject, _), found in zip(items, rows, strict=True)}


def page_sql(
    principal: Principal,
    query: TaskQuery,
    first: int,
    after: str | None,
    reads: TaskReads = ALL,
) -> tuple[str, list[Any]]:
    """The statement of a page, and its parameters."""
    p = Params()
    filters = query.conditions(p)
    if after is not None:
        when, task_id = decode_cursor(after)
        filters.append(f"(t.updated_at, t.id) < ({p(when)}, {p(task_id)})")
    limit = p(first + 1)
    # Each branch passes on the stored columns (and what the merge orders by); the page's
    # JSON is made as text only for the rows that are kept, not for every row a branch
    # scanned and sorted.
    inner = _sources("t", reads.taking("updated_at"))
    branches = [
        f"(SELECT {inner} FROM tasks t WHERE {' AND '.join([side, *filters])} {_NEWEST}"
        f" LIMIT {limit})"
        for side in _sides(principal, p)
    ]
    sql = (
        f"SELECT {_columns('v', reads)} FROM ({' UNION ALL '.join(branches)}) v {_NEWEST}"
        f" LIMIT {limit}"
    )
    return sql, p.values


async def count(conn: Connection, principal: Principal, query: TaskQuery) -> int:
    p = Params()
    filters = query.conditions(p)
    counts = [
        f"(SELECT count(*) FROM tasks t WHERE {' AND '.join([side, *filters])})"
        for side in _sides(principal, p)
    ]
    return int(await conn.fetchval(f"SELECT {' + '.join(counts)}", *p.values))


# A read of one task by id: who reads, and what of the row (`Lanes` of reads).
ReadKind = tuple[Principal, TaskReads]


async def read_one(conn: Connection, key: ReadKind, task_id: str, _: object) -> TaskRecord | None:
    return await load_visible(conn, key[0], task_id, key[1])


async def read_many(
    conn: Connection, key: ReadKind, items: Sequence[tuple[str, object]]
) -> dict[str, TaskRecord]:
    """`read_one` of each item's task, in one statement (an id may come twice)."""
    rows = await visible_by_ids(conn, key[0], [task_id for task_id, _ in items], key[1])
    return {row.id: row for row in rows}


async def visible_by_ids(
    conn: Connection, principal: Principal, ids: Sequence[str], reads: TaskReads = ALL
) -> list[TaskRecord]:
    p = Params()
    wanted = p.texts(ids)
    sql = (
        f"SELECT {_columns('t', reads)} FROM tasks t WHERE t.id = ANY({wanted})"
        f" AND ({visible_sql(principal, p)})"
    )
    return _records(await conn.fetch(sql, *p.values), reads)


async def dependents_of(
    conn: Connection, principal: Principal, ids: Sequence[str], limit: int
) -> list[TaskRecord]:
    """Visible tasks whose packet depends on any of `ids`, `limit` at most, by id."""
    p = Params()
    sql = (
        f"SELECT {_columns('t')} FROM tasks t WHERE t.depends_on && {p.texts(ids)}"
        f" AND ({visible_sql(principal, p)}) ORDER BY t.id LIMIT {p(limit)}"
    )
    return _records(await conn.fetch(sql, *p.values))


async def dependents_per_task(
    conn: Connection, principal: Principal, ids: Sequence[str], first: int, reads: TaskReads = ALL
) -> dict[str, list[TaskRecord]]:
    """For each of `ids`, the first `first` visible tasks (by id) that depend on it."""
    found: dict[str, list[TaskRecord]] = {i: [] for i in ids}
    p = Params()
    wanted = p.texts(list(found))  # each id once, however often it was asked for
    # `OFFSET 0` keeps the visibility test out of the index scan: the dependents of one id are
    # few and found by the GIN index alone, while ANDing them with an owner's index bitmap
    # (thousands of rows) cost PostgreSQL a millisecond per id.
    sql = f"""
    SELECT w.id AS dependency, d.* FROM unnest({wanted}) AS w(id)
    CROSS JOIN LATERAL (
        SELECT {_columns("t", reads)}
        FROM (SELECT * FROM tasks WHERE depends_on @> ARRAY[w.id] OFFSET 0) AS t
        WHERE {visible_sql(principal, p)}
        ORDER BY t.id LIMIT {p(first)}
    ) AS d
    """
    rows = await conn.fetch(sql, *p.values)
    for row, record in zip(rows, _records(rows, reads), strict=True):
        found[row["dependency"]].append(record)
    return found


def _task_at_event(reads: TaskReads) -> str:
    """`_TASK_AT_EVENT` as `reads` takes it, with the JSON as text (see `_columns`): a page of
    events rarely asks for the task at each of them."""
    json = (
        "t.packet::text AS packet_text, e.result::text AS result_text, "
        "e.latest_checkpoint::text AS latest_checkpoint_text, "
        if reads.json
        else ""
    )
    depends_on = ", t.depends_on" if reads.depends_on else ""
    return (
        "t.id, t.project, e.to_state AS state, e.waiting_on, t.requester, t.assignee, "
        f"{json}t.verification, e.version, t.input_digest, t.created_at, e.at AS updated_at"
        f"{depends_on}"
    )


@functools.cache
def _events_of_many(reads: TaskReads | None) -> tuple[str, Callable[[Any], EventRecord]]:
    """The statement of `events_of_many` for `reads` (of the task at each event, all of its
    scalars; None: none of it), and how its rows become records."""
    if reads is not None:
        reads = reads.full()
    if reads is None:  # the event's own columns, and the task's columns it copies
        task, join = "e.task_id AS id, e.to_state AS state, e.version, e.at AS updated_at", ""
    else:
        task, join = _task_at_event(reads), "JOIN tasks t ON t.id = e.task_id"
    sql = f"""
    SELECT {task}, e.event_id, e.event_kind, e.event_name, e.event_from, e.event_actor,
        e.event_reason
    FROM unnest($1::text::text[]) AS wanted(id)
    CROSS JOIN LATERAL (
        SELECT {TASKS.returned}, task_id, to_state, waiting_on, result, latest_checkpoint,
            version, at
        FROM task_events WHERE task_id = wanted.id AND id > $2 ORDER BY id LIMIT $3
    ) AS e
    {join}
    ORDER BY e.task_id, e.event_id
    """
    if reads is None:
        return sql, EventRecord.from_bare_row
    json, depends_on = reads.json, reads.depends_on

    def parse(row: Any) -> EventRecord:
        event = EventRecord.from_row(row, text=True, json=json)
        if depends_on:
            event.task.keep_depends_on(row["depends_on"])
        return event

    return sql, parse


async def events_of_many(
    conn: Connection,
    task_ids: Sequence[str],
    first: int,
    after: int | None,
    reads: TaskReads | None = ALL,
    *,
    peek: bool = True,
) -> dict[str, tuple[list[EventRecord], bool]]:
    """For each task, its events after `after`, oldest first, `first` at most; and whether
    more follow (only with `peek`), each with the task as `reads` takes it (None: not at all,
    the records' `task` is not read). One query, whatever the number of tasks."""
    sql, parse = _events_of_many(reads)
    loaded = _spend_text if reads is not None and reads.json else None
    return await event_pages(conn, sql, task_ids, first, after, parse, loaded, peek=peek)
