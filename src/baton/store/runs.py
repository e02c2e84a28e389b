"""The run store: pipeline runs and their events, written through the guarded change of
`baton.store.lifecycle`; the work queue's claim and leases; and the reads.

A claimed run holds a lease in `run_leases` (its id, who holds it, until when): a heartbeat
extends it without an event, and any event that takes a run out of `in_progress` drops it in the
same statement. A claim without an id takes the caller's owner's oldest claimable run, skipping
rows another claim holds (`FOR UPDATE SKIP LOCKED`), so two daemons never get the same run.

The lease fences the claimed run: a runner event on a run in progress, and a heartbeat, write
only while the caller holds the live lease (and it is the one named, when a lease id is given),
checked in the guarded statement itself. An expired lease is lost, even before the sweeper moves
its run. Every statement that writes a lease locks the run's row first, so they queue behind each
other in one order.

Every statement that picks a run by id picks only a run the caller may see: a run it may not see
is, to the statement and to the caller, a run that does not exist (nothing locked, nothing read).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from baton.access.principals import Principal, PrincipalKind
from baton.protocol.machine import Position
from baton.protocol.pipeline import EVENTS, PIPELINE, RunActor, RunEvent, RunPhase, RunStatus
from baton.store.db import Connection
from baton.store.lifecycle import (
    Layout,
    appending,
    change_statement,
    check_event_record,
    event_pages,
)
from baton.store.records import RunEventRecord, RunRecord
from baton.store.sql import Params
from baton.store.tasks import decode_cursor, storable_time

# The class of the per-run advisory locks that keep one run's events in version order (see
# `baton.store.lifecycle`).
RUN_APPEND_LOCK = 7412003

RUNS = Layout(
    machine=PIPELINE,
    table="runs",
    events="run_events",
    subject="run_id",
    columns=("status", "phase", "checkpoint"),
    name="event",
    before="from_status",
    after="to_status",
    copies=(
        "phase",
        "checkpoint",
        "questions",
        "answers",
        "pull_request_url",
        "failure_reason",
    ),
    extras=("details",),
    lock=RUN_APPEND_LOCK,
    null_when_empty=("details",),
)
check_event_record(RUNS, RunEventRecord, "run")

CLAIMABLE = (RunStatus.backlog, RunStatus.waiting_for_agent)
CLAIMED = RunStatus.in_progress

# The runner's events on a claimed run: only the holder of its live lease makes them (the
# owner's events, such as an interrupt, and the sweeper's are not fenced; admin is fenced only
# when it names a lease). A rule the table cannot express (it knows no leases), kept here.
FENCED: frozenset[RunEvent] = frozenset(
    m.name for m in EVENTS if m.actor is RunActor.RUNNER and m.source is CLAIMED
)

# The run as it was right after event `e`: its fixed columns, and what `e` left the rest at.
_RUN_AT_EVENT = (
    "r.id, r.owner, r.project, r.task_id, r.title, e.to_status AS status, e.phase, "
    "e.checkpoint, e.questions, e.answers, e.pull_request_url, e.failure_reason, "
    "r.created_by, e.version, r.created_at, e.at AS updated_at"
)
EVENTS_WITH_RUNS = (
    "SELECT e.id AS event_id, e.kind AS event_kind, e.event AS event_name, "
    "e.from_status AS event_from, e.actor AS event_actor, e.details AS event_details, "
    f"{_RUN_AT_EVENT} FROM run_events e JOIN runs r ON r.id = e.run_id"
)

# Where a run starts: the table's initial position, as SQL literals.
_START = ", ".join(f"'{value.value}'" for _, value in PIPELINE.initial_position.values if value)
_INSERT = f"""
    WITH changed AS (
        INSERT INTO runs (id, owner, project, task_id, title, status, phase, checkpoint,
            created_by, version, created_at, updated_at)
        VALUES ($1, $2, $3, $4, $5, {_START}, $6, 1, now(), now())
        RETURNING *, NULL::text AS from_value
    ),""" + appending(RUNS, "'created'", "NULL", "$7")

# Every event that takes a run out of `in_progress` drops its lease with it.
_DROP_LEASE = (
    "unleased AS (DELETE FROM run_leases WHERE run_id IN "
    f"(SELECT id FROM changed WHERE status <> '{CLAIMED.value}'))"
)


@dataclass(frozen=True)
class Lease:
    """A claimed run's lease. `live`: it had not run out when it was read (the database's
    clock decides, as in the statements that check it)."""

    id: str
    holder: str
    expires_at: datetime
    live: bool = True

    def held_by(self, principal: Principal, lease_id: str | None) -> bool:
        """Whether `principal` (naming `lease_id`, if any) holds this lease: the rule of
        `fence_sql`, in Python, for explaining a refusal."""
        holder = principal.is_admin or self.holder == principal.handle
        return self.live and holder and (lease_id is None or self.id == lease_id)


def fenced(principal: Principal, lease_id: str | None) -> bool:
    """Whether the lease fences this caller at all: admin that names no lease is not."""
    return not (principal.is_admin and lease_id is None)


def fence_sql(principal: Principal, lease_id: str | None, p: Params, table: str) -> str:
    """SQL that holds when `principal` holds the live lease of run row `table` (the lease
    `lease_id`, when given).

    `FOR SHARE` makes the check read the lease as last committed: the statement may have
    waited for the run's row lock while the lease it began with ran out, was dropped by the
    sweeper or replaced by another claim; a plain read would still see that old lease and let
    a late event through. Lease writers hold the run's row lock, which this statement holds by
    then, so the lease row is never locked in the other order."""
    conditions = [f"l.run_id = {table}.id", "l.expires_at > now()"]
    if not principal.is_admin:
        conditions.append(f"l.holder = {p(principal.handle)}")
    if lease_id is not None:
        conditions.append(f"l.id = {p(lease_id)}")
    return f"EXISTS (SELECT 1 FROM run_leases l WHERE {' AND '.join(conditions)} FOR SHARE)"


@dataclass(frozen=True)
class NewRun:
    id: str
    owner: str
    project: str
    task_id: str | None
    title: str
    created_by: str


async def insert(conn: Connection, run: NewRun, actor: str) -> RunEventRecord:
    row = await conn.fetchrow(
        _INSERT, run.id, run.owner, run.project, run.task_id, run.title, run.created_by, actor
    )
    assert row is not None
    return RunEventRecord.from_row(row)


@dataclass(frozen=True)
class RunChange:
    """One guarded event: the positions it may start from and where each goes, who may make
    it, what else it records on the run, and its arguments for the log."""

    event: RunEvent
    pairs: tuple[tuple[Position[RunStatus], Position[RunStatus]], ...]
    actor: RunActor | None  # None: the server itself
    sets: dict[str, Any] = field(default_factory=dict)  # run column -> value
    details: dict[str, Any] | None = None


def _guarded(
    p: Params,
    change: RunChange,
    principal: Principal,
    select: str,
    subject: str | None,
    *,
    skip_locked: bool = False,
    expected_version: int | None = None,
    lease_id: str | None = None,
    also: Sequence[str] = (),
) -> str:
    sets = [f"{column} = {p(value)}" for column, value in change.sets.items()]
    guards = [] if change.actor is None else [run_role_sql(principal, change.actor, p, "old")]
    if change.event in FENCED and fenced(principal, lease_id):
        fence = fence_sql(principal, lease_id, p, "old")
        guards.append(f"(old.status <> '{CLAIMED.value}' OR {fence})")
    return change_statement(
        RUNS,
        p,
        pairs=change.pairs,
        select=select,
        subject=subject,
        skip_locked=skip_locked,
        sets=sets,
        guards=guards,
        expected_version=expected_version,
        name=f"{p(change.event.value)}::text",
        actor=p(principal.handle),
        extras={"details": f"{p(change.details)}::jsonb"},
        also=[_DROP_LEASE, *also],
    )


async def change(
    conn: Connection,
    run_id: str,
    change: RunChange,
    principal: Principal,
    *,
    expected_version: int | None = None,
    lease_id: str | None = None,
) -> RunEventRecord | None:
    """Apply `change` to run `run_id` if every guard holds now; None when one does not (or
    the caller may not see the run)."""
    p = Params()
    key = p(run_id)
    select = f"id = {key} AND {visible_sql(principal, p, 'runs')}"
    sql = _guarded(
        p,
        change,
        principal,
        select,
        f"{key}::text",
        expected_version=expected_version,
        lease_id=lease_id,
    )
    row = await conn.fetchrow(sql, *p.values)
    return RunEventRecord.from_row(row) if row is not None else None


def lease_expiry(claimed: RunRecord, lease_seconds: float) -> datetime:
    """When the lease a claim took runs out: the claim's statement sets both from one clock
    reading (`now()`), so this is exactly the stored expiry."""
    return claimed.updated_at + timedelta(seconds=lease_seconds)


def _leasing(p: Params, lease_id: str, holder: str, seconds: float) -> str:
    return (
        "leased AS (INSERT INTO run_leases (run_id, id, holder, expires_at) "
        f"SELECT id, {p(lease_id)}, {p(holder)}, now() + {p(seconds)} * interval '1 second' "
        "FROM changed ON CONFLICT (run_id) DO UPDATE SET id = EXCLUDED.id, "
        "holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at)"
    )


async def claim(
    conn: Connection,
    change: RunChange,
    principal: Principal,
    *,
    lease_id: str,
    lease_seconds: float,
    run_id: str | None = None,
    owner: str | None = None,
    project: str | None = None,
    expected_version: int | None = None,
) -> RunEventRecord | None:
    """Claim run `run_id`, or else `owner`'s oldest claimable run (of `project`), with lease
    `lease_id` for the caller; None when there is none to claim."""
    p = Params()
    subject: str | None = None
    if run_id is not None:
        subject = f"{p(run_id)}::text"
        select, skip = f"id = {subject} AND {visible_sql(principal, p, 'runs')}", False
    else:
        statuses = p([s.value for s in CLAIMABLE])
        select = f"owner = {p(owner)} AND status = ANY({statuses}::text[])"
        if project is not None:
            select += f" AND project = {p(project)}"
        select += " ORDER BY created_at, id LIMIT 1"
        skip = True
    sql = _guarded(
        p,
        change,
        principal,
        select,
        subject,
        skip_locked=skip,
        expected_version=expected_version,
        also=[_leasing(p, lease_id, principal.handle, lease_seconds)],
    )
    row = await conn.fetchrow(sql, *p.values)
    return RunEventRecord.from_row(row) if row is not None else None


async def heartbeat(
    conn: Connection,
    run_id: str,
    principal: Principal,
    lease_seconds: float,
    lease_id: str | None = None,
) -> Lease | None:
    """Extend the live lease on a run in progress, for its holder (or the run's owner, or
    admin), when it is lease `lease_id` if given; the lease as extended, or None when there is
    no such lease (an expired one is lost: it is never extended). The run row is locked first,
    so a heartbeat and the sweeper never pass each other; the lease row is the statement's
    target, so one changed meanwhile is checked again as committed."""
    p = Params()
    holder = p(principal.handle)
    may = "TRUE" if principal.is_admin else f"l.holder = {holder}"
    if principal.kind is PrincipalKind.OWNER:
        may = f"(l.holder = {holder} OR r.owner = {holder})"
    if lease_id is not None:
        may += f" AND l.id = {p(lease_id)}"
    sql = f"""
    WITH r AS (
        SELECT id, owner, status FROM runs
        WHERE id = {p(run_id)} AND {visible_sql(principal, p, "runs")} FOR UPDATE
    )
    UPDATE run_leases l SET expires_at = now() + {p(lease_seconds)} * interval '1 second'
    FROM r WHERE l.run_id = r.id AND r.status = '{CLAIMED.value}' AND l.expires_at > now()
        AND {may}
    RETURNING l.id, l.holder, l.expires_at
    """
    row = await conn.fetchrow(sql, *p.values)
    return Lease(row["id"], row["holder"], row["expires_at"]) if row is not None else None


_LEASES = (
    "SELECT run_id, id, holder, expires_at, expires_at > now() AS live FROM run_leases "
    "WHERE run_id = ANY($1::text[])"
)


async def lease_of(conn: Connection, run_ids: Sequence[str]) -> dict[str, Lease]:
    """The leases of those of `run_ids` that are claimed, by run."""
    rows = await conn.fetch(_LEASES, list(run_ids))
    return {r["run_id"]: Lease(r["id"], r["holder"], r["expires_at"], r["live"]) for r in rows}


async def expired(conn: Connection, limit: int) -> list[str]:
    """Runs whose lease ran out, oldest expiry first."""
    rows = await conn.fetch(
        "SELECT run_id FROM run_leases WHERE expires_at < now() ORDER BY expires_at LIMIT $1",
        limit,
    )
    return [r["run_id"] for r in rows]


async def offline(
    conn: Connection, run_id: str, change: RunChange, principal: Principal
) -> RunEventRecord | None:
    """The sweeper's event: only while the run's lease has run out, skipping a run another
    transaction holds (a heartbeat, or another process's sweeper)."""
    p = Params()
    key = p(run_id)
    select = (
        f"id = {key} AND EXISTS (SELECT 1 FROM run_leases l "
        "WHERE l.run_id = runs.id AND l.expires_at < now())"
    )
    sql = _guarded(p, change, principal, select, f"{key}::text", skip_locked=True)
    row = await conn.fetchrow(sql, *p.values)
    return RunEventRecord.from_row(row) if row is not None else None


def run_role_sql(principal: Principal, actor: RunActor, p: Params, table: str) -> str:
    """SQL that holds when `principal` may make an event of role `actor` on run row `table`;
    the same rule as `Principal.may_drive`."""
    if principal.is_admin:
        return "TRUE"
    if actor is RunActor.SYSTEM:
        return "FALSE"
    if actor is RunActor.OWNER and principal.kind is not PrincipalKind.OWNER:
        return "FALSE"
    return f"{table}.owner = {p(principal.owner)}"


# --- reading ------------------------------------------------------------------------------


def visible_sql(principal: Principal, p: Params, table: str = "r") -> str:
    """A run is seen by its owner, that owner's agents, and admin."""
    if principal.is_admin:
        return "TRUE"
    return f"{table}.owner = {p(principal.owner)}"


async def load(conn: Connection, run_id: str) -> RunRecord | None:
    row = await conn.fetchrow("SELECT * FROM runs WHERE id = $1", run_id)
    return RunRecord.from_mapping(row) if row is not None else None


async def load_visible(conn: Connection, principal: Principal, run_id: str) -> RunRecord | None:
    """Run `run_id` if `principal` may see it. One statement whether the run is missing or
    not visible, so neither answer nor cost says which."""
    p = Params()
    sql = f"SELECT * FROM runs r WHERE r.id = {p(run_id)} AND {visible_sql(principal, p)}"
    row = await conn.fetchrow(sql, *p.values)
    return RunRecord.from_mapping(row) if row is not None else None


@dataclass(frozen=True)
class RunQuery:
    projects: Sequence[str] = ()
    statuses: Sequence[RunStatus] = ()
    phases: Sequence[RunPhase] = ()
    task_ids: Sequence[str] = ()
    updated_after: datetime | None = None

    def conditions(self, p: Params, table: str = "r") -> list[str]:
        out: list[str] = []
        for column, values in (
            ("project", list(self.projects)),
            ("status", [s.value for s in self.statuses]),
            ("phase", [s.value for s in self.phases]),
            ("task_id", list(self.task_ids)),
        ):
            if len(values) == 1:
                out.append(f"{table}.{column} = {p(values[0])}")
            elif values:
                out.append(f"{table}.{column} = ANY({p(values)}::text[])")
        if self.updated_after is not None:
            when = storable_time(self.updated_after, "filter.updatedAfter")
            out.append(f"{table}.updated_at > {p(when)}")
        return out


_NEWEST = "ORDER BY r.updated_at DESC, r.id DESC"


async def page(
    conn: Connection, principal: Principal, query: RunQuery, first: int, after: str | None
) -> tuple[list[RunRecord], bool]:
    """Newest `updated_at` first (cursors as for tasks); the page and whether more follow."""
    p = Params()
    where = [visible_sql(principal, p), *query.conditions(p)]
    if after is not None:
        when, run_id = decode_cursor(after)
        where.append(f"(r.updated_at, r.id) < ({p(when)}, {p(run_id)})")
    sql = f"SELECT * FROM runs r WHERE {' AND '.join(where)} {_NEWEST} LIMIT {p(first + 1)}"
    rows = [RunRecord.from_mapping(r) for r in await conn.fetch(sql, *p.values)]
    return rows[:first], len(rows) > first


async def count(conn: Connection, principal: Principal, query: RunQuery) -> int:
    p = Params()
    where = [visible_sql(principal, p), *query.conditions(p)]
    sql = f"SELECT count(*) FROM runs r WHERE {' AND '.join(where)}"
    return int(await conn.fetchval(sql, *p.values))


async def of_tasks(
    conn: Connection, principal: Principal, task_ids: Sequence[str], first: int
) -> dict[str, list[RunRecord]]:
    """For each of `task_ids`, the first `first` visible runs linked to it, oldest first."""
    found: dict[str, list[RunRecord]] = {i: [] for i in task_ids}
    p = Params()
    wanted = p(list(found))  # each id once, however often it was asked for
    sql = f"""
    SELECT r.* FROM unnest({wanted}::text[]) AS w(id)
    CROSS JOIN LATERAL (
        SELECT * FROM runs r WHERE r.task_id = w.id AND {visible_sql(principal, p)}
        ORDER BY r.created_at, r.id LIMIT {p(first)}
    ) AS r
    """
    for row in await conn.fetch(sql, *p.values):
        found[row["task_id"]].append(RunRecord.from_mapping(row))
    return found


_EVENTS_OF_MANY = f"""
SELECT {_RUN_AT_EVENT}, e.event_id, e.event_kind, e.event_name, e.event_from, e.event_actor,
    e.event_details
FROM unnest($1::text::text[]) AS wanted(id)
CROSS JOIN LATERAL (
    SELECT {RUNS.returned}, run_id, to_status, phase, checkpoint, questions, answers,
        pull_request_url, failure_reason, version, at
    FROM run_events WHERE run_id = wanted.id AND id > $2 ORDER BY id LIMIT $3
) AS e
JOIN runs r ON r.id = e.run_id
ORDER BY e.run_id, e.event_id
"""


async def events_of_many(
    conn: Connection, run_ids: Sequence[str], first: int, after: int | None
) -> dict[str, tuple[list[RunEventRecord], bool]]:
    """For each run, its events after `after`, oldest first, `first` at most; and whether
    more follow. One query, whatever the number of runs."""
    return await event_pages(conn, _EVENTS_OF_MANY, run_ids, first, after, RunEventRecord.from_row)
