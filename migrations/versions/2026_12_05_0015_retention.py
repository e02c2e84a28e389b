"""retention of finished work: the logs' floors, the sweeper's lease, indexes to find what goes

With BATON_RETENTION set, a task or a run that reached a terminal state longer ago than that is
deleted with its events and everything of theirs, a small batch at a time (baton.store.
retention). These support it:

- `retention_floors`, one row per event log: every event removed from it has an id at most
  `floor`, raised in the transaction that deletes. A stream asked to start below it is refused
  (it would skip removed events), naming the floor as the oldest cursor still valid.
- `retention_sweeper`, one row: which process sweeps (a lease, taken and renewed inside
  transactions holding a tried transaction-level advisory lock: no session-level lock, so it
  works through a transaction pooler).
- The event logs stay append-only, but for retention: the trigger that refuses an update or a
  delete of an event lets a delete through in a transaction that has set `baton.retention` to
  `removing` (set locally by the sweep's batches, nowhere else).
- Partial indexes over finished tasks and finished runs by `updated_at` (when they finished: a
  finished row changes no more), so a sweep walks finished work only, oldest first, never the
  open work that is as old; and one over event deliveries by event, so the deliveries of removed
  events go with them.

The states listed are the terminal ones of the two tables as they are at this revision.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-05
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

REFUSE = """
CREATE OR REPLACE FUNCTION baton_refuse_event_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    {allow}RAISE EXCEPTION 'baton: task events are append-only' USING ERRCODE = 'check_violation';
END
$$
"""
# Retention's batches, and nothing else, delete events (with their task or run).
ALLOW = """IF TG_OP = 'DELETE' AND current_setting('baton.retention', true) = 'removing' THEN
        RETURN OLD;
    END IF;
    """

FINISHED_TASKS = sa.text("state IN ('completed', 'rejected', 'cancelled')")
FINISHED_RUNS = sa.text("status IN ('completed')")


def upgrade() -> None:
    op.execute(REFUSE.format(allow=ALLOW))
    op.create_table(
        "retention_floors",
        sa.Column("log", sa.Text(), primary_key=True),
        sa.Column("floor", sa.BigInteger(), nullable=False),
        sa.Column("removed_subjects", sa.BigInteger(), nullable=False),
        sa.Column("removed_events", sa.BigInteger(), nullable=False),
        sa.Column("swept_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.execute(
        "INSERT INTO retention_floors (log, floor, removed_subjects, removed_events) "
        "VALUES ('task_events', 0, 0, 0), ('run_events', 0, 0, 0)"
    )
    op.create_table(
        "retention_sweeper",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("holder", sa.Text(), nullable=True),
        sa.Column("held_until", sa.DateTime(timezone=True), nullable=True),
    )
    op.execute("INSERT INTO retention_sweeper (id) VALUES (1)")
    op.create_index(
        "tasks_finished_idx", "tasks", ["updated_at", "id"], postgresql_where=FINISHED_TASKS
    )
    op.create_index(
        "runs_finished_idx", "runs", ["updated_at", "id"], postgresql_where=FINISHED_RUNS
    )
    op.create_index(
        "webhook_deliveries_log_event_idx",
        "webhook_deliveries",
        ["log", "event_id"],
        postgresql_where=sa.text("kind = 'event'"),
    )


def downgrade() -> None:
    op.drop_index("webhook_deliveries_log_event_idx", table_name="webhook_deliveries")
    op.drop_index("runs_finished_idx", table_name="runs")
    op.drop_index("tasks_finished_idx", table_name="tasks")
    op.drop_table("retention_sweeper")
    op.drop_table("retention_floors")
    op.execute(REFUSE.format(allow=""))
