"""The task store: the guarded move path and the event log.

Every change is one transaction: a guarded `UPDATE … WHERE id AND state AND version`, its event
row, commit. Event ids are drawn under a transaction-level advisory lock, so they follow commit
order and a reader that has seen id N has seen every event committed before it.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, cast

from sqlalchemy import (
    ColumnElement,
    Table,
    Text,
    and_,
    bindparam,
    false,
    func,
    or_,
    select,
    text,
    true,
    tuple_,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlalchemy.ext.asyncio import AsyncConnection

from baton.access.principals import Principal, PrincipalKind
from baton.errors import InvalidInput
from baton.protocol.handoff import MoveName, TaskState, WaitingOn
from baton.protocol.task_object import check_task_id
from baton.store.records import EventRecord, TaskRecord
from baton.store.tables import TaskEventRow, TaskRow

TASKS = cast(Table, TaskRow.__table__)  # type: ignore[attr-defined]  # set by SQLModel's metaclass
EVENTS = cast(Table, TaskEventRow.__table__)  # type: ignore[attr-defined]  # likewise

# Serialises event appends so that event ids follow commit order (see the module docstring).
EVENT_APPEND_LOCK = 7412002

_LOCK = text(f"SELECT pg_advisory_xact_lock({EVENT_APPEND_LOCK})")


def _sql(sql: str, *json_params: str) -> Any:
    statement = text(sql)
    for name in json_params:
        statement = statement.bindparams(bindparam(name, type_=JSONB))
    return statement


_INSERT = _sql(
    """
    INSERT INTO tasks (id, project, state, waiting_on, requester, assignee, requester_owner,
        assignee_owner, deliverable_type, depends_on, packet, result, latest_checkpoint,
        verification, version, input_digest, created_at, updated_at)
    VALUES (:id, :project, :state, NULL, :requester, :assignee, split_part(:requester, '/', 1),
        split_part(:assignee, '/', 1), :deliverable_type, :depends_on, :packet, NULL, NULL,
        :verification, 1, :input_digest, now(), now())
    ON CONFLICT (id) DO NOTHING
    RETURNING id
    """,
    "packet",
).bindparams(bindparam("depends_on", type_=ARRAY(Text)))

_CREATED = text(
    """
    INSERT INTO task_events (task_id, kind, move, from_state, to_state, actor, reason, version,
        task, at)
    SELECT id, 'created', NULL, NULL, state, :actor, NULL, version, to_jsonb(t), updated_at
    FROM tasks t WHERE id = :id
    RETURNING *
    """
)


def _change_sql(sets: str, kind: str, *json_params: str) -> Any:
    return _sql(
        f"""
        WITH changed AS (
            UPDATE tasks SET {sets}, version = version + 1, updated_at = now()
            WHERE id = :id AND state = :from_state AND version = :version
            RETURNING *
        )
        INSERT INTO task_events (task_id, kind, move, from_state, to_state, actor, reason,
            version, task, at)
        SELECT id, '{kind}', :move, :from_state, state, :actor, :reason, version,
            to_jsonb(changed), updated_at
        FROM changed
        RETURNING *
        """,
        *json_params,
    )


_MOVE = _change_sql("state = :to_state, waiting_on = :waiting_on", "moved")
_MOVE_SETTING_RESULT = _change_sql(
    "state = :to_state, waiting_on = :waiting_on, result = :result", "moved", "result"
)
_MOVE_CLEARING_RESULT = _change_sql(
    "state = :to_state, waiting_on = :waiting_on, result = NULL", "moved"
)
_CHECKPOINT = _change_sql("latest_checkpoint = :checkpoint", "checkpoint_saved", "checkpoint")


async def load(conn: AsyncConnection, task_id: str) -> TaskRecord | None:
    row = (await conn.execute(select(TASKS).where(TASKS.c.id == task_id))).mappings().first()
    return TaskRecord.from_mapping(row) if row is not None else None


@dataclass(frozen=True)
class NewTask:
    id: str
    project: str
    requester: str
    assignee: str
    packet: dict[str, Any]
    verification: str
    input_digest: str


async def insert(conn: AsyncConnection, task: NewTask, actor: str) -> EventRecord | None:
    """Create the task in its initial state with its `created` event; None if the id exists."""
    inserted = (
        await conn.execute(
            _INSERT,
            {
                "id": task.id,
                "project": task.project,
                "state": TaskState.requested.value,
                "requester": task.requester,
                "assignee": task.assignee,
                "deliverable_type": task.packet["deliverable_type"],
                "depends_on": list(task.packet["depends_on"]),
                "packet": task.packet,
                "verification": task.verification,
                "input_digest": task.input_digest,
            },
        )
    ).first()
    if inserted is None:
        return None
    await conn.execute(_LOCK)
    row = (await conn.execute(_CREATED, {"id": task.id, "actor": actor})).mappings().one()
    return EventRecord.from_mapping(row)


async def move(
    conn: AsyncConnection,
    task: TaskRecord,
    name: MoveName,
    to_state: TaskState,
    *,
    actor: str,
    waiting_on: WaitingOn | None = None,
    result: dict[str, Any] | None = None,
    clear_result: bool = False,
    reason: str | None = None,
) -> EventRecord | None:
    """Apply one checked move; None when the task changed since `task` was read (a lost race)."""
    params: dict[str, Any] = {
        "id": task.id,
        "from_state": task.state.value,
        "version": task.version,
        "to_state": to_state.value,
        "waiting_on": waiting_on.value if waiting_on else None,
        "move": name.value,
        "actor": actor,
        "reason": reason,
    }
    statement = _MOVE
    if result is not None:
        statement, params["result"] = _MOVE_SETTING_RESULT, result
    elif clear_result:
        statement = _MOVE_CLEARING_RESULT
    await conn.execute(_LOCK)
    row = (await conn.execute(statement, params)).mappings().first()
    return EventRecord.from_mapping(row) if row is not None else None


async def save_checkpoint(
    conn: AsyncConnection, task: TaskRecord, checkpoint: dict[str, Any], *, actor: str
) -> EventRecord | None:
    await conn.execute(_LOCK)
    params = {
        "id": task.id,
        "from_state": task.state.value,
        "version": task.version,
        "checkpoint": checkpoint,
        "move": None,
        "actor": actor,
        "reason": None,
    }
    row = (await conn.execute(_CHECKPOINT, params)).mappings().first()
    return EventRecord.from_mapping(row) if row is not None else None


# --- reading ------------------------------------------------------------------------------


def visible_to(principal: Principal) -> ColumnElement[bool]:
    if principal.kind is PrincipalKind.ADMIN:
        return true()
    if principal.kind is PrincipalKind.AGENT:
        return or_(TASKS.c.requester == principal.handle, TASKS.c.assignee == principal.handle)
    return or_(
        TASKS.c.requester_owner == principal.handle, TASKS.c.assignee_owner == principal.handle
    )


@dataclass(frozen=True)
class TaskQuery:
    projects: Sequence[str] = ()
    states: Sequence[TaskState] = ()
    requester: str | None = None
    assignee: str | None = None
    waiting_on: Sequence[WaitingOn] = ()
    deliverable_types: Sequence[str] = ()
    updated_after: datetime | None = None
    ids: Sequence[str] | None = field(default=None)

    def where(self, principal: Principal) -> ColumnElement[bool]:
        c = TASKS.c
        clauses: list[ColumnElement[bool]] = [visible_to(principal)]
        if self.projects:
            clauses.append(c.project.in_(list(self.projects)))
        if self.states:
            clauses.append(c.state.in_([s.value for s in self.states]))
        if self.requester is not None:
            clauses.append(c.requester == self.requester)
        if self.assignee is not None:
            clauses.append(c.assignee == self.assignee)
        if self.waiting_on:
            clauses.append(c.waiting_on.in_([w.value for w in self.waiting_on]))
        if self.deliverable_types:
            clauses.append(c.deliverable_type.in_(list(self.deliverable_types)))
        if self.updated_after is not None:
            clauses.append(c.updated_at > storable_time(self.updated_after, "filter.updatedAfter"))
        if self.ids is not None:
            clauses.append(c.id.in_(list(self.ids)) if self.ids else false())
        return and_(*clauses)


def encode_cursor(task: TaskRecord) -> str:
    raw = f"{task.updated_at.isoformat()}|{task.id}"
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


async def page(
    conn: AsyncConnection, principal: Principal, query: TaskQuery, first: int, after: str | None
) -> tuple[list[TaskRecord], bool]:
    """Newest `updated_at` first; returns the page and whether more follow."""
    where = query.where(principal)
    if after is not None:
        when, task_id = decode_cursor(after)
        where = and_(where, tuple_(TASKS.c.updated_at, TASKS.c.id) < tuple_(when, task_id))
    statement = (
        select(TASKS)
        .where(where)
        .order_by(TASKS.c.updated_at.desc(), TASKS.c.id.desc())
        .limit(first + 1)
    )
    rows = [TaskRecord.from_mapping(r) for r in (await conn.execute(statement)).mappings()]
    return rows[:first], len(rows) > first


async def count(conn: AsyncConnection, principal: Principal, query: TaskQuery) -> int:
    statement = select(func.count()).select_from(TASKS).where(query.where(principal))
    return int((await conn.execute(statement)).scalar_one())


_EVENTS_OF_MANY = text(
    """
    SELECT e.* FROM unnest(CAST(:ids AS text[])) AS wanted(id)
    CROSS JOIN LATERAL (
        SELECT * FROM task_events
        WHERE task_id = wanted.id AND id > :after ORDER BY id LIMIT :limit
    ) AS e
    """
)


async def events_of_many(
    conn: AsyncConnection, task_ids: Sequence[str], first: int, after: int | None
) -> dict[str, tuple[list[EventRecord], bool]]:
    """For each task, its events after `after`, oldest first, `first` at most; and whether
    more follow. One query, whatever the number of tasks."""
    pages: dict[str, list[EventRecord]] = {task_id: [] for task_id in task_ids}
    if task_ids:
        rows = await conn.execute(
            _EVENTS_OF_MANY,
            {"ids": list(pages), "after": after or 0, "limit": first + 1},
        )
        for row in rows.mappings():
            pages[row["task_id"]].append(EventRecord.from_mapping(row))
    return {task_id: (rows[:first], len(rows) > first) for task_id, rows in pages.items()}


async def dependents_of(
    conn: AsyncConnection, principal: Principal, ids: Sequence[str]
) -> list[TaskRecord]:
    """Visible tasks whose packet depends on any of `ids`."""
    statement = select(TASKS).where(
        and_(visible_to(principal), TASKS.c.depends_on.overlap(list(ids)))
    )
    return [TaskRecord.from_mapping(r) for r in (await conn.execute(statement)).mappings()]


async def visible_by_ids(
    conn: AsyncConnection, principal: Principal, ids: Sequence[str]
) -> list[TaskRecord]:
    statement = select(TASKS).where(and_(visible_to(principal), TASKS.c.id.in_(list(ids))))
    return [TaskRecord.from_mapping(r) for r in (await conn.execute(statement)).mappings()]
