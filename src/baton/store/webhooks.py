"""The webhook store: endpoints, their outbox cursors and leases, and their deliveries.

An endpoint's `task_cursor` / `run_cursor` are event ids in the two logs: everything after them
that matches the endpoint's filter is still to be sent. The delivery worker claims endpoints
with work due (`FOR UPDATE SKIP LOCKED`, then a lease on the row), sends, and writes what
happened in one statement that holds only while its lease does (`record_all`): a process that
lost its lease (it stalled past the expiry, another took over) writes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from baton.store.db import Connection, Database
from baton.store.eventlog import floor_sql, newest_readable, newest_readable_sql

MAX_ENDPOINTS = 20  # per owner, unscoped
MAX_TASK_ENDPOINTS = 100  # per owner, scoped to a task and still live (not ended or disabled)
MAX_ENDPOINTS_PER_TASK = 10  # per task and owner, live or not
MAX_PENDING_MANUAL = 10  # pings and redeliveries waiting per endpoint (one turn sends them all)
KEPT_DELIVERIES = 1000  # per endpoint, newest kept (older rows are pruned)
LOG_TABLES = {"task": "task_events", "run": "run_events"}


# Why a task-scoped endpoint stopped for good: its task's final event was delivered, or the
# task had ended when the endpoint was made.
TASK_ENDED = "the task ended"


class PayloadFormat(StrEnum):
    """How an endpoint's messages are written (`baton.webhooks.formats`)."""

    STANDARD = "standard"  # Standard Webhooks: the subscription's data, signed
    A2A = "a2a"  # A2A's StreamResponse, with the config's token and authentication


class DeliveryKind(StrEnum):
    EVENT = "event"
    PING = "ping"
    REDELIVERY = "redelivery"


class Recorded(StrEnum):
    """What became of a batch's write (`record_all`)."""

    COUNTED = "counted"  # written, and the endpoint's state with it
    CHANGED = "changed"  # written to its history only: the owner changed the endpoint meanwhile
    LOST = "lost"  # nothing written: the lease was lost, or the endpoint deleted


class DeliveryStatus(StrEnum):
    PENDING = "pending"
    DELIVERED = "delivered"
    FAILED = "failed"


def readable_through_sql(log: str) -> str:
    """SQL for the newest event id of `log` that a reader may pass: every event up to it is
    committed, and none committed later can have a smaller id (`baton.store.eventlog`)."""
    return newest_readable_sql(LOG_TABLES[log])


async def readable_through(conn: Connection, log: str) -> int:
    return await newest_readable(conn, LOG_TABLES[log])


@dataclass(frozen=True)
class EndpointRecord:
    id: str
    owner: str
    url: str
    description: str
    task_filter: dict[str, Any] | None
    run_filter: dict[str, Any] | None
    secret: str  # sealed
    previous_secret: str | None  # sealed
    previous_secret_until: datetime | None
    enabled: bool
    disabled_reason: str | None
    disabled_at: datetime | None
    task_cursor: int
    run_cursor: int
    failures: int
    next_attempt_at: datetime | None
    lease_holder: str | None
    lease_until: datetime | None
    created_at: datetime
    updated_at: datetime
    allow_private: bool | None
    task_id: str | None = None
    config_id: str | None = None
    token: str | None = None  # sealed
    auth_scheme: str | None = None
    auth_credentials: str | None = None  # sealed
    payload_format: PayloadFormat = PayloadFormat.STANDARD

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> EndpointRecord:
        values = {name: row[name] for name in _ENDPOINT_FIELDS}
        values["payload_format"] = PayloadFormat(values["payload_format"])
        return cls(**values)

    @property
    def scoped(self) -> bool:
        """Scoped to one task (an A2A push notification config), not an owner's endpoint."""
        return self.task_id is not None

    @property
    def ended(self) -> bool:
        """A task-scoped endpoint whose task ended: it sends nothing more."""
        return not self.enabled and self.disabled_reason == TASK_ENDED


_ENDPOINT_FIELDS = tuple(EndpointRecord.__dataclass_fields__)
ENDPOINT_COLUMNS = ", ".join(_ENDPOINT_FIELDS)


@dataclass(frozen=True)
class DeliveryRecord:
    id: int
    endpoint_id: str
    kind: DeliveryKind
    log: str | None
    event_id: int | None
    message_id: str
    status: DeliveryStatus
    attempts: int
    response_status: int | None
    response_body: str | None
    duration_ms: int | None
    last_error: str | None
    next_attempt_at: datetime | None
    attempted_by: str | None
    created_at: datetime
    updated_at: datetime
    delivered_at: datetime | None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> DeliveryRecord:
        values = {name: row[name] for name in _DELIVERY_FIELDS}
        values["kind"] = DeliveryKind(values["kind"])
        values["status"] = DeliveryStatus(values["status"])
        return cls(**values)


_DELIVERY_FIELDS = tuple(DeliveryRecord.__dataclass_fields__)
DELIVERY_COLUMNS = ", ".join(_DELIVERY_FIELDS)


# --- endpoints -------------------------------------------------------------------------------


async def insert_endpoint(
    conn: Connection,
    *,
    id: str,
    owner: str,
    url: str,
    description: str,
    task_filter: dict[str, Any] | None,
    run_filter: dict[str, Any] | None,
    secret: str,
    allow_private: bool,
) -> EndpointRecord | None:
    """Add an endpoint whose cursors start at the logs' ends (it gets events committed from
    now on); None when the owner already has `MAX_ENDPOINTS`."""
    await lock_owner(conn, owner)
    held = await conn.fetchval(
        "SELECT count(*) FROM webhook_endpoints WHERE owner = $1 AND task_id IS NULL", owner
    )
    if held >= MAX_ENDPOINTS:
        return None
    row = await conn.fetchrow(
        "INSERT INTO webhook_endpoints (id, owner, url, description, task_filter, run_filter, "
        "secret, enabled, task_cursor, run_cursor, failures, created_at, updated_at, "
        f"allow_private) VALUES ($1, $2, $3, $4, $5, $6, $7, TRUE, {readable_through_sql('task')}, "
        f"{readable_through_sql('run')}, 0, now(), now(), $8) RETURNING {ENDPOINT_COLUMNS}",
        id,
        owner,
        url,
        description,
        task_filter,
        run_filter,
        secret,
        allow_private,
    )
    assert row is not None
    return EndpointRecord.from_row(row)


async def lock_owner(conn: Connection, owner: str) -> None:
    """One owner's additions at a time (until the transaction ends), so its caps hold under
    concurrency."""
    await conn.execute("SELECT pg_advisory_xact_lock(7412008, hashtext($1))", owner)


async def endpoint(conn: Connection, id: str, *, lock: bool = False) -> EndpointRecord | None:
    sql = f"SELECT {ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE id = $1"
    row = await conn.fetchrow(sql + (" FOR UPDATE" if lock else ""), id)
    return EndpointRecord.from_row(row) if row is not None else None


async def endpoints(
    db: Database, owner: str | None, first: int, after: str | None
) -> list[EndpointRecord]:
    """Unscoped endpoints by id (an owner's, or everyone's for `owner=None`), after id
    `after`."""
    rows = await db.fetch(
        f"SELECT {ENDPOINT_COLUMNS} FROM webhook_endpoints "
        "WHERE task_id IS NULL AND ($1::text IS NULL OR owner = $1) "
        "AND ($2::text IS NULL OR id > $2) ORDER BY id LIMIT $3",
        owner,
        after,
        first,
    )
    return [EndpointRecord.from_row(r) for r in rows]


# --- endpoints scoped to a task --------------------------------------------------------------


async def insert_task_endpoint(
    conn: Connection,
    *,
    id: str,
    owner: str,
    task_id: str,
    config_id: str,
    url: str,
    secret: str,
    token: str | None,
    auth_scheme: str | None,
    auth_credentials: str | None,
    payload_format: PayloadFormat,
    allow_private: bool,
    task_cursor: int,
    run_cursor: int,
    ended: bool,
) -> EndpointRecord:
    """Add an endpoint taking task `task_id`'s events after `task_cursor`; made `ended` (it
    sends nothing) for a task that has ended. The caller holds the owner's lock and has
    counted its endpoints."""
    row = await conn.fetchrow(
        "INSERT INTO webhook_endpoints (id, owner, url, description, task_filter, secret, "
        "enabled, disabled_reason, disabled_at, task_cursor, run_cursor, failures, created_at, "
        "updated_at, allow_private, task_id, config_id, token, auth_scheme, auth_credentials, "
        "payload_format) VALUES ($1, $2, $3, '', $4, $5, NOT $6, "
        "CASE WHEN $6 THEN $7 END, CASE WHEN $6 THEN now() END, $8, $9, 0, now(), now(), $10, "
        f"$11, $12, $13, $14, $15, $16) RETURNING {ENDPOINT_COLUMNS}",
        id,
        owner,
        url,
        {"taskIds": [task_id]},
        secret,
        ended,
        TASK_ENDED,
        task_cursor,
        run_cursor,
        allow_private,
        task_id,
        config_id,
        token,
        auth_scheme,
        auth_credentials,
        payload_format.value,
    )
    assert row is not None
    return EndpointRecord.from_row(row)


async def task_endpoint_counts(conn: Connection, owner: str, task_id: str) -> tuple[int, int]:
    """The owner's live task-scoped endpoints, and its endpoints on `task_id` (live or not)."""
    row = await conn.fetchrow(
        "SELECT (SELECT count(*) FROM webhook_endpoints WHERE owner = $1 "
        "AND task_id IS NOT NULL AND enabled) AS live, (SELECT count(*) FROM webhook_endpoints "
        "WHERE task_id = $2 AND owner = $1) AS on_task",
        owner,
        task_id,
    )
    assert row is not None
    return int(row["live"]), int(row["on_task"])


async def task_endpoints(
    conn: Connection,
    task_id: str,
    owner: str | None,
    *,
    config_id: str | None = None,
    first: int = MAX_ENDPOINTS_PER_TASK,
    after: str | None = None,
    lock: bool = False,
) -> list[EndpointRecord]:
    """Endpoints scoped to `task_id`, by id after `after`: an owner's (everyone's for
    `owner=None`), those named `config_id` if given."""
    sql = (
        f"SELECT {ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE task_id = $1 "
        "AND ($2::text IS NULL OR owner = $2) AND ($3::text IS NULL OR config_id = $3) "
        "AND ($4::text IS NULL OR id > $4) ORDER BY id LIMIT $5"
    )
    rows = await conn.fetch(
        sql + (" FOR UPDATE" if lock else ""), task_id, owner, config_id, after, first
    )
    return [EndpointRecord.from_row(r) for r in rows]


async def update_endpoint(conn: Connection, id: str, changes: Mapping[str, Any]) -> EndpointRecord:
    """Set the named columns (the caller names only known ones) and `updated_at`."""
    sets = ", ".join(f"{column} = ${i}" for i, column in enumerate(changes, start=2))
    row = await conn.fetchrow(
        f"UPDATE webhook_endpoints SET {sets}{', ' if sets else ''}updated_at = now() "
        f"WHERE id = $1 RETURNING {ENDPOINT_COLUMNS}",
        id,
        *changes.values(),
    )
    assert row is not None, "the caller locked the row"
    return EndpointRecord.from_row(row)


async def set_enabled(conn: Connection, id: str, enabled: bool) -> EndpointRecord:
    if enabled:
        # The head event (if one failed) is tried again at once, with a fresh schedule.
        sql = (
            "UPDATE webhook_endpoints SET enabled = TRUE, disabled_reason = NULL, "
            "disabled_at = NULL, failures = 0, next_attempt_at = NULL, updated_at = now() "
            f"WHERE id = $1 RETURNING {ENDPOINT_COLUMNS}"
        )
    else:
        sql = (
            "UPDATE webhook_endpoints SET enabled = FALSE, disabled_at = now(), "
            "disabled_reason = 'disabled by its owner', updated_at = now() "
            f"WHERE id = $1 RETURNING {ENDPOINT_COLUMNS}"
        )
    row = await conn.fetchrow(sql, id)
    assert row is not None, "the caller locked the row"
    return EndpointRecord.from_row(row)


async def delete_endpoint(conn: Connection, id: str) -> None:
    await conn.execute("DELETE FROM webhook_endpoints WHERE id = $1", id)


async def leased(conn: Connection, ids: Sequence[str]) -> bool:
    """Whether a delivery turn holds any of these endpoints now (its lease has not run out)."""
    return bool(
        await conn.fetchval(
            "SELECT EXISTS (SELECT FROM webhook_endpoints "
            "WHERE id = ANY($1::text[]) AND lease_until > clock_timestamp())",
            list(ids),
        )
    )


# --- deliveries ------------------------------------------------------------------------------


async def add_manual(
    conn: Connection,
    endpoint_id: str,
    kind: DeliveryKind,
    message_id: str,
    log: str | None = None,
    event_id: int | None = None,
) -> DeliveryRecord:
    """A ping or redelivery, pending: the worker makes one attempt at it soon."""
    row = await conn.fetchrow(
        "INSERT INTO webhook_deliveries (endpoint_id, kind, log, event_id, message_id, status, "
        "attempts, next_attempt_at, created_at, updated_at) "
        "VALUES ($1, $2, $3, $4, $5, 'pending', 0, now(), now(), now()) "
        f"RETURNING {DELIVERY_COLUMNS}",
        endpoint_id,
        kind.value,
        log,
        event_id,
        message_id,
    )
    assert row is not None
    return DeliveryRecord.from_row(row)


async def pending_manual_count(conn: Connection, endpoint_id: str) -> int:
    count = await conn.fetchval(
        "SELECT count(*) FROM webhook_deliveries "
        "WHERE endpoint_id = $1 AND status = 'pending' AND kind <> 'event'",
        endpoint_id,
    )
    return int(count)


async def delivery(db: Database, id: int) -> DeliveryRecord | None:
    row = await db.fetchrow(f"SELECT {DELIVERY_COLUMNS} FROM webhook_deliveries WHERE id = $1", id)
    return DeliveryRecord.from_row(row) if row is not None else None


async def deliveries(
    db: Database,
    endpoint_ids: Sequence[str],
    first: int,
    before: int | None = None,
    status: DeliveryStatus | None = None,
) -> dict[str, list[DeliveryRecord]]:
    """Each endpoint's newest `first` deliveries (older than `before`), newest first: one
    statement for a page of endpoints."""
    rows = await db.fetch(
        f"SELECT d.* FROM unnest($1::text[]) AS w(id) CROSS JOIN LATERAL ("
        f"SELECT {DELIVERY_COLUMNS} FROM webhook_deliveries "
        "WHERE endpoint_id = w.id AND ($2::bigint IS NULL OR id < $2) "
        "AND ($4::text IS NULL OR status = $4) ORDER BY id DESC LIMIT $3) d",
        list(endpoint_ids),
        before,
        first,
        status.value if status is not None else None,
    )
    found: dict[str, list[DeliveryRecord]] = {id: [] for id in endpoint_ids}
    for row in rows:
        found[row["endpoint_id"]].append(DeliveryRecord.from_row(row))
    return found


# --- the delivery worker's statements --------------------------------------------------------


# A task-scoped endpoint is due only when its own task has an event past its cursor, not
# whenever any task does: the task's events are found by the log's (task_id, id) index.
_DUE = f"""
    (w.lease_until IS NULL OR w.lease_until < now())
    AND (w.next_attempt_at IS NULL OR w.next_attempt_at <= now())
    AND (
      (w.enabled
       AND ((w.task_id IS NULL AND w.task_filter IS NOT NULL
             AND w.task_cursor < {readable_through_sql("task")})
         OR (w.task_id IS NOT NULL AND EXISTS (
             SELECT 1 FROM task_events e WHERE e.task_id = w.task_id
             AND e.id > w.task_cursor AND e.id <= {readable_through_sql("task")}))
         OR (w.run_filter IS NOT NULL AND w.run_cursor < {readable_through_sql("run")})))
      OR EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.endpoint_id = w.id
                 AND d.status = 'pending' AND d.kind <> 'event')
    )
"""


async def due_and_next(
    db: Database,
    busy: Sequence[str],
    per_owner: int,
    limit: int,
    *,
    allow_private: bool,
    allow_http: bool,
) -> tuple[list[tuple[str, str]], datetime | None]:
    """Endpoints with work due that no process holds, as (id, owner): a ping or redelivery
    waiting, or (enabled) events past a cursor of a log it takes, and not backing off. Each
    owner's at most `per_owner`, least recently worked on first; owners interleaved (every
    owner's first, then every owner's second…). `busy` are endpoints this process is on
    already. An endpoint this process's settings may not deliver to (one saved as needing
    private addresses, or an http:// one) is left to processes that may. With them, in the
    same round trip, the soonest retry still to come (what `next_due` says)."""
    rows = await db.fetch(
        f"""
        SELECT s.soonest, c.id, c.owner FROM (
            SELECT min(next_attempt_at) AS soonest FROM webhook_endpoints
            WHERE next_attempt_at > now()
        ) s LEFT JOIN LATERAL (
            SELECT id, owner, n, lease_until FROM (
                SELECT w.id, w.owner, w.lease_until, row_number() OVER (
                    PARTITION BY w.owner ORDER BY w.lease_until NULLS FIRST, w.id) AS n
                FROM webhook_endpoints w
                WHERE {_DUE}
                  AND w.id <> ALL($1::text[])
                  AND ($4 OR w.allow_private IS NOT TRUE)
                  AND ($5 OR lower(left(w.url, 5)) <> 'http:')
            ) ranked
            WHERE n <= $2
            ORDER BY n, lease_until NULLS FIRST, id
            LIMIT $3
        ) c ON TRUE
        ORDER BY c.n, c.lease_until NULLS FIRST, c.id
        """,
        list(busy),
        per_owner,
        limit,
        allow_private,
        allow_http,
    )
    found = [(r["id"], r["owner"]) for r in rows if r["id"] is not None]
    return found, rows[0]["soonest"] if rows else None


async def lease(
    db: Database, holder: str, lease_seconds: float, ids: Sequence[str]
) -> list[tuple[EndpointRecord, bool]]:
    """Lease those of `ids` that no process holds (rows another claim is taking are skipped),
    each with whether a ping or redelivery waits for it."""
    rows = await db.fetch(
        f"""
        WITH free AS (
            SELECT w.id FROM webhook_endpoints w
            WHERE w.id = ANY($3::text[]) AND (w.lease_until IS NULL OR w.lease_until < now())
            FOR UPDATE SKIP LOCKED
        )
        UPDATE webhook_endpoints w
        SET lease_holder = $1, lease_until = now() + $2 * interval '1 second'
        FROM free WHERE w.id = free.id
        RETURNING {", ".join("w." + f for f in _ENDPOINT_FIELDS)}, EXISTS (
            SELECT 1 FROM webhook_deliveries d WHERE d.endpoint_id = w.id
            AND d.status = 'pending' AND d.kind <> 'event') AS manual
        """,
        holder,
        lease_seconds,
        list(ids),
    )
    return [(EndpointRecord.from_row(r), bool(r["manual"])) for r in rows]


@dataclass(frozen=True)
class Batch:
    """What a turn reads before sending from one log, in one statement (one snapshot)."""

    through: int  # the newest id it may pass (`readable_through`)
    floor: int  # the log's retention floor (`baton.store.eventlog`)
    ids: list[int]  # the matching events in (cursor, `through`], in order


async def batch(
    db: Database,
    log: str,
    select: str,
    where: str,
    params: Sequence[Any],
    cursor: int,
    limit: int,
) -> Batch:
    """The horizon, the floor and the first `limit` events of `select` (a log's, `e` the log)
    after `cursor` matching `where` (its parameters from $3), in one round trip. One snapshot:
    a removal (it raises the floor in its own transaction) is seen whole or not at all, so
    events are never missing unless the floor says so."""
    table = LOG_TABLES[log]
    row = await db.fetchrow(
        f"SELECT h.through, h.floor, ARRAY(SELECT q.event_id FROM ({select} "
        "WHERE e.id > $1 AND e.id <= h.through AND "
        f"({where}) ORDER BY e.id LIMIT $2) q ORDER BY q.event_id) AS ids "
        f"FROM (SELECT {newest_readable_sql(table)} AS through, {floor_sql(table)} AS floor) h",
        cursor,
        limit,
        *params,
    )
    assert row is not None
    return Batch(int(row["through"]), int(row["floor"]), list(row["ids"]))


async def unchanged(
    db: Database, holder: str, endpoints: Sequence[tuple[str, datetime]]
) -> set[str]:
    """Which of `endpoints` (id, `updated_at` when a turn read it) are still as their owners
    left them, with their leases still held by `holder`: what turns check before a message,
    one round trip for every turn that asks at once."""
    rows = await db.fetch(
        "SELECT w.id FROM webhook_endpoints w "
        "JOIN unnest($2::text[], $3::timestamptz[]) AS c(id, updated_at) ON w.id = c.id "
        "WHERE w.lease_holder = $1 AND w.lease_until > now() AND w.updated_at = c.updated_at",
        holder,
        [id for id, _ in endpoints],
        [at for _, at in endpoints],
    )
    return {row["id"] for row in rows}


async def any_endpoint(db: Database) -> bool:
    """Whether any endpoint may have work: an owner's (a disabled one may still be pinged), or
    a live task-scoped one (one that ended, or that failures disabled, gets nothing until it
    is made again, which wakes the worker). Each side is read from its own partial index."""
    return bool(
        await db.fetchval(
            "SELECT EXISTS (SELECT 1 FROM webhook_endpoints WHERE task_id IS NULL) "
            "OR EXISTS (SELECT 1 FROM webhook_endpoints WHERE task_id IS NOT NULL AND enabled)"
        )
    )


async def next_due(db: Database) -> datetime | None:
    """When the soonest backed-off endpoint is due again (None: none is). One due already is
    left out: the claim that just ran found it, or it is being worked on."""
    value = await db.fetchval(
        "SELECT min(next_attempt_at) FROM webhook_endpoints WHERE next_attempt_at > now()"
    )
    return value  # type: ignore[no-any-return]


async def release(db: Database, endpoint_id: str, holder: str) -> None:
    await db.execute(
        "UPDATE webhook_endpoints SET lease_until = now() WHERE id = $1 AND lease_holder = $2",
        endpoint_id,
        holder,
    )


async def release_all(db: Database, holder: str) -> None:
    await db.execute(
        "UPDATE webhook_endpoints SET lease_until = now() "
        "WHERE lease_holder = $1 AND lease_until > now()",
        holder,
    )


async def pending_manual(db: Database, endpoint_id: str, limit: int) -> list[DeliveryRecord]:
    rows = await db.fetch(
        f"SELECT {DELIVERY_COLUMNS} FROM webhook_deliveries "
        "WHERE endpoint_id = $1 AND status = 'pending' AND kind <> 'event' ORDER BY id LIMIT $2",
        endpoint_id,
        limit,
    )
    return [DeliveryRecord.from_row(r) for r in rows]


@dataclass(frozen=True)
class Attempted:
    """What one attempt at a message came to, to be written."""

    log: str | None
    event_id: int | None
    message_id: str
    delivered: bool
    response_status: int | None
    response_body: str | None
    duration_ms: int
    error: str | None
    at: datetime
    delivery_id: int | None = None  # a manual delivery's row


@dataclass(frozen=True)
class Outcome:
    """The endpoint's state after a batch: cursors, the failures in a row and the next try,
    and whether it is disabled now (with why). `task_acked` / `run_acked` (None: the cursor)
    are as far as the cursors may move if the owner changed the endpoint meanwhile: past what
    was acknowledged, not past events passed over as not matching the filter as it was."""

    task_cursor: int
    run_cursor: int
    failures: int
    next_attempt_at: datetime | None
    disabled_reason: str | None = None
    task_acked: int | None = None
    run_acked: int | None = None
    ended: bool = False  # a task-scoped endpoint's task's final event was acknowledged


@dataclass(frozen=True)
class Written:
    """One endpoint's batch to write (`record_all`): its attempts, its state after them,
    its `updated_at` when the turn read it (`seen`), and whether the lease goes back."""

    endpoint_id: str
    attempts: Sequence[Attempted]
    outcome: Outcome
    seen: datetime
    release: bool = False


async def record_all(db: Database, holder: str, batches: Sequence[Written]) -> dict[str, Recorded]:
    """Write endpoints' batches (each endpoint once) in one statement: for each, its attempts
    and its new state, only while `holder` still holds its lease (else nothing, LOST); with
    the turn's last write (`release`), the lease is handed back in it. If the owner changed
    the endpoint since `seen` (its `updated_at` when the turn read it), the attempts are kept
    in its history but count for nothing (CHANGED): its failures, next try and enabled state
    stay as the change left them. A task-scoped endpoint whose task's final event was
    acknowledged (`outcome.ended`) ends either way: no change brings the task back.

    One statement, so one round trip and atomic without BEGIN and COMMIT of their own, and
    the batches of the turns that finish together (`DeliveryWorker._record`) go in one: the
    attempts are written only with their endpoint's row (`w` lacks it once the lease is
    lost). The batches travel as JSON, a row per endpoint and per attempt."""
    ids = [b.endpoint_id for b in batches]
    if len(set(ids)) != len(ids):
        raise ValueError(f"an endpoint written twice in one statement: {sorted(ids)}")
    endpoints = []
    manual = []
    events = []
    for b in sorted(batches, key=lambda b: b.endpoint_id):
        o = b.outcome
        endpoints.append(
            {
                "id": b.endpoint_id,
                "task_cursor": o.task_cursor,
                "run_cursor": o.run_cursor,
                "failures": o.failures,
                "next_attempt_at": o.next_attempt_at,
                "disabled_reason": o.disabled_reason,
                "seen": b.seen,
                "task_acked": o.task_cursor if o.task_acked is None else o.task_acked,
                "run_acked": o.run_cursor if o.run_acked is None else o.run_acked,
                "ended": o.ended,
                "release": b.release,
            }
        )
        for a in b.attempts:
            row = {
                "endpoint_id": b.endpoint_id,
                "delivered": a.delivered,
                "response_status": a.response_status,
                "response_body": a.response_body,
                "duration_ms": a.duration_ms,
                "error": a.error,
                "at": a.at,
            }
            if a.delivery_id is not None:
                row["id"] = a.delivery_id
                manual.append(row)
            else:
                row["log"] = a.log
                row["event_id"] = a.event_id
                row["message_id"] = a.message_id
                events.append(row)
    rows = await db.fetch(
        """
        WITH o AS (
            SELECT * FROM jsonb_to_recordset($1::jsonb) AS o(id text, task_cursor bigint,
                run_cursor bigint, failures int, next_attempt_at timestamptz,
                disabled_reason text, seen timestamptz, task_acked bigint, run_acked bigint,
                ended bool, release bool)
        ),
        w AS (
            UPDATE webhook_endpoints e SET
                task_cursor = greatest(e.task_cursor,
                    CASE WHEN e.updated_at = o.seen THEN o.task_cursor ELSE o.task_acked END),
                run_cursor = greatest(e.run_cursor,
                    CASE WHEN e.updated_at = o.seen THEN o.run_cursor ELSE o.run_acked END),
                failures = CASE WHEN e.updated_at = o.seen THEN o.failures ELSE e.failures END,
                next_attempt_at = CASE WHEN e.updated_at = o.seen THEN o.next_attempt_at
                    ELSE e.next_attempt_at END,
                enabled = e.enabled AND NOT (e.updated_at = o.seen
                    AND o.disabled_reason IS NOT NULL) AND NOT o.ended,
                disabled_reason = CASE WHEN o.ended THEN $3::text
                    WHEN e.updated_at = o.seen AND e.enabled AND o.disabled_reason IS NOT NULL
                    THEN o.disabled_reason ELSE e.disabled_reason END,
                disabled_at = CASE WHEN e.enabled AND (o.ended
                    OR (e.updated_at = o.seen AND o.disabled_reason IS NOT NULL))
                    THEN now() ELSE e.disabled_at END,
                lease_until = CASE WHEN o.release THEN now() ELSE e.lease_until END
            FROM o
            WHERE e.id = o.id AND e.lease_holder = $2 AND e.lease_until >= now()
            RETURNING e.id, e.updated_at = o.seen AS unchanged, o.next_attempt_at
        ),
        manual AS (
            UPDATE webhook_deliveries d SET
                status = CASE WHEN a.delivered THEN 'delivered' ELSE 'failed' END,
                attempts = d.attempts + 1, response_status = a.response_status,
                response_body = a.response_body, duration_ms = a.duration_ms,
                last_error = a.error, next_attempt_at = NULL, attempted_by = $2,
                updated_at = a.at,
                delivered_at = CASE WHEN a.delivered THEN a.at ELSE d.delivered_at END
            FROM w JOIN jsonb_to_recordset($4::jsonb) AS a(endpoint_id text, id bigint,
                delivered bool, response_status int, response_body text, duration_ms int,
                error text, at timestamptz) ON a.endpoint_id = w.id
            WHERE d.id = a.id AND d.endpoint_id = w.id
        ),
        events AS (
            INSERT INTO webhook_deliveries AS d (endpoint_id, kind, log, event_id,
                message_id, status, attempts, response_status, response_body, duration_ms,
                last_error, next_attempt_at, attempted_by, created_at, updated_at,
                delivered_at)
            SELECT w.id, 'event', a.log, a.event_id, a.message_id,
                CASE WHEN a.delivered THEN 'delivered' ELSE 'pending' END, 1,
                a.response_status, a.response_body, a.duration_ms, a.error,
                -- The head's row carries the endpoint's next try while it is pending.
                CASE WHEN NOT a.delivered AND w.unchanged THEN w.next_attempt_at END, $2,
                a.at, a.at, CASE WHEN a.delivered THEN a.at END
            FROM w JOIN jsonb_to_recordset($5::jsonb) AS a(endpoint_id text, log text,
                event_id bigint, message_id text, delivered bool, response_status int,
                response_body text, duration_ms int, error text, at timestamptz)
                ON a.endpoint_id = w.id
            ON CONFLICT (endpoint_id, log, event_id) WHERE kind = 'event' DO UPDATE SET
                status = excluded.status, attempts = d.attempts + 1,
                response_status = excluded.response_status,
                response_body = excluded.response_body,
                duration_ms = excluded.duration_ms, last_error = excluded.last_error,
                next_attempt_at = excluded.next_attempt_at,
                attempted_by = excluded.attempted_by, updated_at = excluded.updated_at,
                delivered_at = excluded.delivered_at
        )
        SELECT id, unchanged FROM w
        """,
        endpoints,
        holder,
        TASK_ENDED,
        manual,
        events,
    )
    found = {row["id"]: Recorded.COUNTED if row["unchanged"] else Recorded.CHANGED for row in rows}
    return {id: found.get(id, Recorded.LOST) for id in ids}


async def prune(db: Database, keep: int = KEPT_DELIVERIES) -> int:
    """Drop each endpoint's deliveries beyond its newest `keep` (never a pending one)."""
    status = await db.execute(
        """
        DELETE FROM webhook_deliveries d USING (
            SELECT id FROM (
                SELECT id, status, row_number() OVER (PARTITION BY endpoint_id ORDER BY id DESC)
                    AS n
                FROM webhook_deliveries
            ) ranked WHERE n > $1 AND status <> 'pending'
        ) old WHERE d.id = old.id
        """,
        keep,
    )
    return int(status.split()[-1])
