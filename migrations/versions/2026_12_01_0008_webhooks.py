"""webhooks: owners' endpoints with their cursors over the event logs, and their deliveries

An endpoint's two cursors (task events, run events) are its outbox: the delivery worker sends
what lies after them and moves them on only when the receiver acknowledges, so an event
committed while no Baton runs, or while one is killed mid-send, is sent when one is back. A
lease on the endpoint row (holder, expiry) lets one process at a time work on an endpoint.
Deliveries keep one row per event per endpoint (attempts counted on it), and one per ping or
manual redelivery. Known values are CHECK constraints over text, not ENUM types.

Revision ID: 0008
Revises: 0006 (the lead rebases it onto 0007 when merging)
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql as pg

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _ts(name: str, nullable: bool = False) -> sa.Column[object]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "webhook_endpoints",
        sa.Column("id", sa.Text(), primary_key=True),
        sa.Column("owner", sa.Text(), nullable=False),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("task_filter", pg.JSONB(), nullable=True),
        sa.Column("run_filter", pg.JSONB(), nullable=True),
        sa.Column("secret", sa.Text(), nullable=False),
        sa.Column("previous_secret", sa.Text(), nullable=True),
        _ts("previous_secret_until", True),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("disabled_reason", sa.Text(), nullable=True),
        _ts("disabled_at", True),
        sa.Column("task_cursor", sa.BigInteger(), nullable=False),
        sa.Column("run_cursor", sa.BigInteger(), nullable=False),
        sa.Column("failures", sa.Integer(), nullable=False),
        _ts("next_attempt_at", True),
        sa.Column("lease_holder", sa.Text(), nullable=True),
        _ts("lease_until", True),
        _ts("created_at"),
        _ts("updated_at"),
        sa.CheckConstraint(
            "task_filter IS NOT NULL OR run_filter IS NOT NULL",
            name="webhook_endpoints_some_log",
        ),
        sa.CheckConstraint("failures >= 0", name="webhook_endpoints_failures"),
    )
    op.create_index("webhook_endpoints_owner_idx", "webhook_endpoints", ["owner", "id"])
    op.create_table(
        "webhook_deliveries",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), primary_key=True),
        sa.Column(
            "endpoint_id",
            sa.Text(),
            sa.ForeignKey("webhook_endpoints.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("log", sa.Text(), nullable=True),
        sa.Column("event_id", sa.BigInteger(), nullable=True),
        sa.Column("message_id", sa.Text(), nullable=False),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("response_status", sa.Integer(), nullable=True),
        sa.Column("response_body", sa.Text(), nullable=True),
        sa.Column("duration_ms", sa.Integer(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        _ts("next_attempt_at", True),
        sa.Column("attempted_by", sa.Text(), nullable=True),
        _ts("created_at"),
        _ts("updated_at"),
        _ts("delivered_at", True),
        sa.CheckConstraint(
            "kind IN ('event', 'ping', 'redelivery')", name="webhook_deliveries_kind"
        ),
        sa.CheckConstraint(
            "status IN ('pending', 'delivered', 'failed')", name="webhook_deliveries_status"
        ),
        sa.CheckConstraint(
            "(kind = 'ping') = (log IS NULL AND event_id IS NULL)"
            " AND (log IS NULL OR log IN ('task', 'run'))",
            name="webhook_deliveries_subject",
        ),
    )
    op.create_index(
        "webhook_deliveries_endpoint_idx",
        "webhook_deliveries",
        ["endpoint_id", sa.text("id DESC")],
    )
    op.create_index(
        "webhook_deliveries_event_idx",
        "webhook_deliveries",
        ["endpoint_id", "log", "event_id"],
        unique=True,
        postgresql_where=sa.text("kind = 'event'"),
    )
    op.create_index(
        "webhook_deliveries_manual_idx",
        "webhook_deliveries",
        ["endpoint_id", "id"],
        postgresql_where=sa.text("status = 'pending' AND kind <> 'event'"),
    )


def downgrade() -> None:
    op.drop_table("webhook_deliveries")
    op.drop_table("webhook_endpoints")
