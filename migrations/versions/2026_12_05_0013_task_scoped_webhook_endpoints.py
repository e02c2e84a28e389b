"""webhook endpoints scoped to one task: A2A push notification configs

A task-scoped endpoint takes one task's events only (`task_id`), is named by its owner's id
for it on that task (`config_id`, unique per task and owner), may carry a token and an
authentication scheme with credentials to send to its receiver (the token and credentials
sealed as signing secrets are), and says how its messages are written (`payload_format`:
`standard` for Standard Webhooks payloads, `a2a` for A2A's StreamResponse). Endpoints made
before are standard and unscoped. The owners' index of endpoints now holds unscoped ones only:
an owner's task-scoped endpoints, one or more per task, have their own indexes.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-05
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLE = "webhook_endpoints"


def upgrade() -> None:
    op.add_column(
        TABLE,
        sa.Column("task_id", sa.Text(), sa.ForeignKey("tasks.id", ondelete="CASCADE")),
    )
    op.add_column(TABLE, sa.Column("config_id", sa.Text(), nullable=True))
    op.add_column(TABLE, sa.Column("token", sa.Text(), nullable=True))
    op.add_column(TABLE, sa.Column("auth_scheme", sa.Text(), nullable=True))
    op.add_column(TABLE, sa.Column("auth_credentials", sa.Text(), nullable=True))
    op.add_column(
        TABLE,
        sa.Column("payload_format", sa.Text(), nullable=False, server_default="standard"),
    )
    op.create_check_constraint(
        "webhook_endpoints_payload_format", TABLE, "payload_format IN ('standard', 'a2a')"
    )
    op.create_check_constraint(
        "webhook_endpoints_task_scope",
        TABLE,
        "(task_id IS NULL) = (config_id IS NULL)"
        " AND (task_id IS NULL OR (task_filter IS NOT NULL AND run_filter IS NULL))",
    )
    op.drop_index("webhook_endpoints_owner_idx", TABLE)
    op.create_index(
        "webhook_endpoints_owner_idx",
        TABLE,
        ["owner", "id"],
        postgresql_where=sa.text("task_id IS NULL"),
    )
    op.create_index(
        "webhook_endpoints_task_config_idx",
        TABLE,
        ["task_id", "owner", "config_id"],
        unique=True,
        postgresql_where=sa.text("task_id IS NOT NULL"),
    )
    op.create_index(
        "webhook_endpoints_task_live_idx",
        TABLE,
        ["owner"],
        postgresql_where=sa.text("task_id IS NOT NULL AND enabled"),
    )


def downgrade() -> None:
    op.execute(f"DELETE FROM {TABLE} WHERE task_id IS NOT NULL")
    op.drop_index("webhook_endpoints_task_live_idx", TABLE)
    op.drop_index("webhook_endpoints_task_config_idx", TABLE)
    op.drop_index("webhook_endpoints_owner_idx", TABLE)
    op.create_index("webhook_endpoints_owner_idx", TABLE, ["owner", "id"])
    op.drop_constraint("webhook_endpoints_task_scope", TABLE)
    op.drop_constraint("webhook_endpoints_payload_format", TABLE)
    for column in (
        "payload_format",
        "auth_credentials",
        "auth_scheme",
        "token",
        "config_id",
        "task_id",
    ):
        op.drop_column(TABLE, column)
