"""SQLModel tables. The migrations in `migrations/` create them; tests check they agree."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    DateTime,
    ForeignKey,
    Identity,
    Index,
    Integer,
    Text,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlmodel import Field, SQLModel

from baton.protocol.handoff import HANDOFF
from baton.protocol.machine import Machine
from baton.protocol.pipeline import PIPELINE


def _ts(**kw: Any) -> Any:
    return Field(sa_column=Column(DateTime(timezone=True), nullable=False, **kw))


def _optional_ts() -> Any:
    return Field(default=None, sa_column=Column(DateTime(timezone=True), nullable=True))


# The event logs' id default (migration 0009).
_EVENT_ID = text("baton_event_id()")

# Every listing is newest `updated_at` first, ties broken by id.
_RECENT = (text("updated_at DESC"), text("id DESC"))
# An owner sees its own hand-offs through the requester side; its assignee side is these.
_CROSS = text("assignee_owner <> requester_owner")


def _finished(column: str, machine: Machine[Any, Any, Any]) -> Any:
    """Rows in a terminal state of `machine`: what retention removes, oldest first (0015)."""
    values = ", ".join(f"'{info.state.value}'" for info in machine.states if info.terminal)
    return text(f"{column} IN ({values})")


class TaskRow(SQLModel, table=True):
    __tablename__ = "tasks"
    __table_args__ = (
        Index("tasks_updated_idx", *_RECENT),
        Index("tasks_project_state_recent_idx", "project", "state", *_RECENT),
        Index("tasks_requester_owner_recent_idx", "requester_owner", *_RECENT),
        Index("tasks_requester_owner_project_recent_idx", "requester_owner", "project", *_RECENT),
        Index("tasks_cross_owner_recent_idx", "assignee_owner", *_RECENT, postgresql_where=_CROSS),
        Index(
            "tasks_cross_owner_project_recent_idx",
            "assignee_owner",
            "project",
            *_RECENT,
            postgresql_where=_CROSS,
        ),
        # A board's column (project and state) on that side (migration 0010).
        Index(
            "tasks_cross_owner_project_state_recent_idx",
            "assignee_owner",
            "project",
            "state",
            *_RECENT,
            postgresql_where=_CROSS,
        ),
        Index("tasks_requester_recent_idx", "requester", *_RECENT),
        Index("tasks_assignee_recent_idx", "assignee", *_RECENT),
        # No pending list: a look-up would scan it whole until a vacuum (migration 0006).
        Index(
            "tasks_depends_on_idx",
            "depends_on",
            postgresql_using="gin",
            postgresql_with={"fastupdate": "off"},
        ),
        Index(
            "tasks_finished_idx",
            "updated_at",
            "id",
            postgresql_where=_finished("state", HANDOFF),
        ),
    )

    id: str = Field(sa_column=Column(Text, primary_key=True))
    project: str = Field(sa_column=Column(Text, nullable=False))
    state: str = Field(sa_column=Column(Text, nullable=False))
    waiting_on: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    requester: str = Field(sa_column=Column(Text, nullable=False))
    assignee: str = Field(sa_column=Column(Text, nullable=False))
    # Owners are the handle's first half; kept as columns so visibility is an indexed lookup.
    requester_owner: str = Field(sa_column=Column(Text, nullable=False))
    assignee_owner: str = Field(sa_column=Column(Text, nullable=False))
    deliverable_type: str = Field(sa_column=Column(Text, nullable=False))
    depends_on: list[str] = Field(sa_column=Column(ARRAY(Text), nullable=False))
    packet: dict[str, Any] = Field(sa_column=Column(JSONB, nullable=False))
    result: dict[str, Any] | None = Field(default=None, sa_column=Column(JSONB, nullable=True))
    latest_checkpoint: dict[str, Any] | None = Field(
        default=None, sa_column=Column(JSONB, nullable=True)
    )
    verification: str = Field(sa_column=Column(Text, nullable=False))
    version: int = Field(sa_column=Column(Integer, nullable=False))
    # Digest of the handOff input, so a repeated handOff with a client id is idempotent.
    input_digest: str = Field(sa_column=Column(Text, nullable=False))
    created_at: datetime = _ts()
    updated_at: datetime = _ts()


class TaskEventRow(SQLModel, table=True):
    __tablename__ = "task_events"
    __table_args__ = (Index("task_events_task_idx", "task_id", "id"),)

    # The writer's transaction id and the event's number in it (see baton.store.eventlog).
    id: int = Field(sa_column=Column(BigInteger, primary_key=True, server_default=_EVENT_ID))
    task_id: str = Field(sa_column=Column(Text, ForeignKey("tasks.id"), nullable=False))
    kind: str = Field(sa_column=Column(Text, nullable=False))
    move: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    from_state: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    to_state: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    actor: str = Field(sa_column=Column(Text, nullable=False))
    reason: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    # What the event left the task's changing fields at; with the task row's fixed fields,
    # the task as it was right after this event.
    version: int = Field(sa_column=Column(Integer, nullable=False))
    at: datetime = _ts()
    waiting_on: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    result: dict[str, Any] | None = Field(default=None, sa_column=Column(JSONB, nullable=True))
    latest_checkpoint: dict[str, Any] | None = Field(
        default=None, sa_column=Column(JSONB, nullable=True)
    )


class TaskContextRow(SQLModel, table=True):
    """The A2A `contextId` a task was handed off in, and the `messageId` that handed it off
    (migration 0014; see baton.store.task_contexts). A task without a row is its own context."""

    __tablename__ = "a2a_task_contexts"
    __table_args__ = (Index("a2a_task_contexts_context_idx", "context_id"),)

    task_id: str = Field(
        sa_column=Column(Text, ForeignKey("tasks.id", ondelete="CASCADE"), primary_key=True)
    )
    context_id: str = Field(sa_column=Column(Text, nullable=False))
    message_id: str | None = Field(default=None, sa_column=Column(Text, nullable=True))


class ApiTokenRow(SQLModel, table=True):
    __tablename__ = "api_tokens"

    id: int = Field(sa_column=Column(BigInteger, Identity(always=False), primary_key=True))
    token_hash: str = Field(sa_column=Column(Text, nullable=False, unique=True))
    # The token's first characters, not secret (see baton.access.tokens); null before 0011.
    prefix: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    kind: str = Field(sa_column=Column(Text, nullable=False))
    handle: str = Field(sa_column=Column(Text, nullable=False))
    created_at: datetime = _ts(server_default=text("now()"))
    # Null: never expires / not revoked / not used yet. `last_used_at` is refreshed at most
    # once a minute per token (see baton.access.tokens).
    expires_at: datetime | None = _optional_ts()
    revoked_at: datetime | None = _optional_ts()
    last_used_at: datetime | None = _optional_ts()


class GateRuleRow(SQLModel, table=True):
    __tablename__ = "gate_rules"
    __table_args__ = (Index("gate_rules_owner_idx", "owner", text("priority DESC"), "id"),)

    id: int = Field(sa_column=Column(BigInteger, Identity(always=False), primary_key=True))
    owner: str = Field(sa_column=Column(Text, nullable=False))
    requester: str = Field(sa_column=Column(Text, nullable=False))
    project: str = Field(sa_column=Column(Text, nullable=False))
    deliverable_types: list[str] = Field(sa_column=Column(ARRAY(Text), nullable=False))
    decision: str = Field(sa_column=Column(Text, nullable=False))
    priority: int = Field(sa_column=Column(Integer, nullable=False))
    created_at: datetime = _ts(server_default=text("now()"))


class GateRuleVersionRow(SQLModel, table=True):
    """How often each owner's gate rules have changed, counted by a trigger on `gate_rules`: a
    server may keep an owner's rules, and the hand-off checks in its own statement that they
    are still the ones it decided by."""

    __tablename__ = "gate_rule_versions"

    owner: str = Field(sa_column=Column(Text, primary_key=True))
    version: int = Field(sa_column=Column(BigInteger, nullable=False))


class RunRow(SQLModel, table=True):
    __tablename__ = "runs"
    __table_args__ = (
        Index("runs_owner_recent_idx", "owner", *_RECENT),
        Index("runs_project_status_recent_idx", "project", "status", *_RECENT),
        Index("runs_task_idx", "task_id"),
        Index(
            "runs_claimable_idx",
            "owner",
            "created_at",
            "id",
            postgresql_where=text("status IN ('backlog', 'waiting_for_agent')"),
        ),
        Index(
            "runs_finished_idx",
            "updated_at",
            "id",
            postgresql_where=_finished("status", PIPELINE),
        ),
    )

    id: str = Field(sa_column=Column(Text, primary_key=True))
    owner: str = Field(sa_column=Column(Text, nullable=False))  # whose run it is
    project: str = Field(sa_column=Column(Text, nullable=False))
    task_id: str | None = Field(
        default=None, sa_column=Column(Text, ForeignKey("tasks.id"), nullable=True)
    )
    title: str = Field(sa_column=Column(Text, nullable=False))
    status: str = Field(sa_column=Column(Text, nullable=False))
    phase: str = Field(sa_column=Column(Text, nullable=False))
    checkpoint: str = Field(sa_column=Column(Text, nullable=False))
    # What the run's events left behind: open questions and their answers, the pull request,
    # why it failed.
    questions: list[str] | None = Field(default=None, sa_column=Column(ARRAY(Text)))
    answers: list[str] | None = Field(default=None, sa_column=Column(ARRAY(Text)))
    pull_request_url: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    failure_reason: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    created_by: str = Field(sa_column=Column(Text, nullable=False))
    version: int = Field(sa_column=Column(Integer, nullable=False))
    created_at: datetime = _ts()
    updated_at: datetime = _ts()


class RunEventRow(SQLModel, table=True):
    __tablename__ = "run_events"
    __table_args__ = (Index("run_events_run_idx", "run_id", "id"),)

    # The writer's transaction id and the event's number in it (see baton.store.eventlog).
    id: int = Field(sa_column=Column(BigInteger, primary_key=True, server_default=_EVENT_ID))
    run_id: str = Field(sa_column=Column(Text, ForeignKey("runs.id"), nullable=False))
    kind: str = Field(sa_column=Column(Text, nullable=False))  # created | moved
    event: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    from_status: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    to_status: str = Field(sa_column=Column(Text, nullable=False))
    actor: str = Field(sa_column=Column(Text, nullable=False))
    # The event's arguments (questions, answers, url, reason, checkpoint reached).
    details: dict[str, Any] | None = Field(default=None, sa_column=Column(JSONB, nullable=True))
    # What the event left the run's changing fields at; with the runs row's fixed fields, the
    # run as it was right after this event.
    version: int = Field(sa_column=Column(Integer, nullable=False))
    at: datetime = _ts()
    phase: str = Field(sa_column=Column(Text, nullable=False))
    checkpoint: str = Field(sa_column=Column(Text, nullable=False))
    questions: list[str] | None = Field(default=None, sa_column=Column(ARRAY(Text)))
    answers: list[str] | None = Field(default=None, sa_column=Column(ARRAY(Text)))
    pull_request_url: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    failure_reason: str | None = Field(default=None, sa_column=Column(Text, nullable=True))


class RunLeaseRow(SQLModel, table=True):
    """A claimed run's lease: who holds it and until when. Apart from the run, so that a
    heartbeat is not an event."""

    __tablename__ = "run_leases"
    __table_args__ = (Index("run_leases_expiry_idx", "expires_at"),)

    run_id: str = Field(sa_column=Column(Text, ForeignKey("runs.id"), primary_key=True))
    # Drawn afresh by every claim: tells apart two claims by the same principal (migration 0007).
    id: str = Field(sa_column=Column(Text, nullable=False))
    holder: str = Field(sa_column=Column(Text, nullable=False))
    expires_at: datetime = _ts()


# --- webhooks -----------------------------------------------------------------------------

_UNSCOPED = text("task_id IS NULL")
_SCOPED = text("task_id IS NOT NULL")


class WebhookEndpointRow(SQLModel, table=True):
    """An owner's webhook endpoint. Its cursors over the two event logs are the outbox: the
    delivery worker sends what lies after them and moves them on when the receiver answers 2xx.
    The lease says which process works on the endpoint now (one at a time)."""

    __tablename__ = "webhook_endpoints"
    __table_args__ = (
        # An owner's unscoped endpoints; its task-scoped ones, many per owner, apart (0013).
        Index("webhook_endpoints_owner_idx", "owner", "id", postgresql_where=_UNSCOPED),
        Index(
            "webhook_endpoints_task_config_idx",
            "task_id",
            "owner",
            "config_id",
            unique=True,
            postgresql_where=_SCOPED,
        ),
        Index(
            "webhook_endpoints_task_live_idx",
            "owner",
            postgresql_where=text("task_id IS NOT NULL AND enabled"),
        ),
    )

    id: str = Field(sa_column=Column(Text, primary_key=True))
    owner: str = Field(sa_column=Column(Text, nullable=False))
    url: str = Field(sa_column=Column(Text, nullable=False))
    description: str = Field(sa_column=Column(Text, nullable=False))
    # The subscriptions' filter variables (TaskEventFilter / RunEventFilter); null: that log
    # is not sent.
    task_filter: dict[str, Any] | None = Field(default=None, sa_column=Column(JSONB))
    run_filter: dict[str, Any] | None = Field(default=None, sa_column=Column(JSONB))
    # Sealed (see baton.services.webhook_secrets): encrypted when BATON_WEBHOOK_SECRET_KEY is set.
    secret: str = Field(sa_column=Column(Text, nullable=False))
    previous_secret: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    previous_secret_until: datetime | None = _optional_ts()
    enabled: bool = Field(sa_column=Column(Boolean, nullable=False))
    disabled_reason: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    disabled_at: datetime | None = _optional_ts()
    task_cursor: int = Field(sa_column=Column(BigInteger, nullable=False))
    run_cursor: int = Field(sa_column=Column(BigInteger, nullable=False))
    # Failed attempts in a row at the head of the queue, and when the next one is due.
    failures: int = Field(sa_column=Column(Integer, nullable=False))
    next_attempt_at: datetime | None = _optional_ts()
    lease_holder: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    lease_until: datetime | None = _optional_ts()
    created_at: datetime = _ts()
    updated_at: datetime = _ts()
    # Whether the URL needed BATON_WEBHOOK_ALLOW_PRIVATE when saved (null: saved before this
    # was kept); see baton.store.webhooks.
    allow_private: bool | None = Field(default=None, sa_column=Column(Boolean, nullable=True))
    # A task-scoped endpoint (an A2A push notification config) takes that task's events only,
    # and is named by `config_id` among its owner's endpoints on the task. Its token and its
    # authentication credentials are sealed as `secret` is; see baton.services.webhooks.
    task_id: str | None = Field(
        default=None,
        sa_column=Column(Text, ForeignKey("tasks.id", ondelete="CASCADE"), nullable=True),
    )
    config_id: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    token: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    auth_scheme: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    auth_credentials: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    # How messages are written: standard (Standard Webhooks) | a2a (A2A's StreamResponse).
    payload_format: str = Field(
        sa_column=Column(Text, nullable=False, server_default=text("'standard'"))
    )


class WebhookDeliveryRow(SQLModel, table=True):
    """One message to one endpoint and what became of it: an event (one row per event,
    however many attempts), a ping or a manual redelivery."""

    __tablename__ = "webhook_deliveries"
    __table_args__ = (
        Index("webhook_deliveries_endpoint_idx", "endpoint_id", text("id DESC")),
        Index(
            "webhook_deliveries_event_idx",
            "endpoint_id",
            "log",
            "event_id",
            unique=True,
            postgresql_where=text("kind = 'event'"),
        ),
        # The deliveries of events retention removes (0015).
        Index(
            "webhook_deliveries_log_event_idx",
            "log",
            "event_id",
            postgresql_where=text("kind = 'event'"),
        ),
        Index(
            "webhook_deliveries_manual_idx",
            "endpoint_id",
            "id",
            postgresql_where=text("status = 'pending' AND kind <> 'event'"),
        ),
    )

    id: int = Field(sa_column=Column(BigInteger, Identity(always=False), primary_key=True))
    endpoint_id: str = Field(
        sa_column=Column(
            Text, ForeignKey("webhook_endpoints.id", ondelete="CASCADE"), nullable=False
        )
    )
    kind: str = Field(sa_column=Column(Text, nullable=False))  # event | ping | redelivery
    log: str | None = Field(default=None, sa_column=Column(Text, nullable=True))  # task | run
    event_id: int | None = Field(default=None, sa_column=Column(BigInteger, nullable=True))
    message_id: str = Field(sa_column=Column(Text, nullable=False))
    status: str = Field(sa_column=Column(Text, nullable=False))  # pending | delivered | failed
    attempts: int = Field(sa_column=Column(Integer, nullable=False))
    response_status: int | None = Field(default=None, sa_column=Column(Integer, nullable=True))
    response_body: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    duration_ms: int | None = Field(default=None, sa_column=Column(Integer, nullable=True))
    last_error: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    next_attempt_at: datetime | None = _optional_ts()
    attempted_by: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    created_at: datetime = _ts()
    updated_at: datetime = _ts()
    delivered_at: datetime | None = _optional_ts()


# --- retention (baton.store.retention) --------------------------------------------------------


class RetentionFloorRow(SQLModel, table=True):
    """An event log's floor: every event removed from it has an id at most `floor`."""

    __tablename__ = "retention_floors"

    log: str = Field(sa_column=Column(Text, primary_key=True))  # task_events | run_events
    floor: int = Field(sa_column=Column(BigInteger, nullable=False))
    removed_subjects: int = Field(sa_column=Column(BigInteger, nullable=False))
    removed_events: int = Field(sa_column=Column(BigInteger, nullable=False))
    swept_at: datetime | None = _optional_ts()


class RetentionSweeperRow(SQLModel, table=True):
    """One row: the process sweeping now, and until when its lease holds."""

    __tablename__ = "retention_sweeper"

    id: int = Field(sa_column=Column(Integer, primary_key=True, autoincrement=False))
    holder: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    held_until: datetime | None = _optional_ts()
