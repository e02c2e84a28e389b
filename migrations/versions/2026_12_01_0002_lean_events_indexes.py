"""lean events and indexes that match the listings

Events stop carrying a JSON snapshot of the whole task (about 1.2 KB each, mostly the packet,
which never changes): an event keeps what a change can change (state, waiting_on, result,
latest_checkpoint, version, time) and the task as it was right after the event is that plus
the task row's immutable columns.

Indexes follow what the API lists: a project's tasks in a state, newest first; an owner's
tasks (requester side or assignee side), newest first; everything, newest first. The
single-column indexes they replace are dropped: every change rewrites `updated_at`, so each
move inserts an entry into every index of the table, and fewer, better indexes make moves
cheaper too.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql as pg

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OLD_INDEXES = {
    "tasks_requester_idx": ["requester"],
    "tasks_assignee_idx": ["assignee"],
    "tasks_requester_owner_idx": ["requester_owner"],
    "tasks_assignee_owner_idx": ["assignee_owner"],
    "tasks_project_idx": ["project"],
}
RECENT = [sa.text("updated_at DESC"), sa.text("id DESC")]
NEW_INDEXES = {
    "tasks_project_state_recent_idx": [sa.text("project"), sa.text("state"), *RECENT],
    "tasks_requester_owner_recent_idx": [sa.text("requester_owner"), *RECENT],
    "tasks_assignee_owner_recent_idx": [sa.text("assignee_owner"), *RECENT],
}


def upgrade() -> None:
    op.add_column("task_events", sa.Column("waiting_on", sa.Text(), nullable=True))
    op.add_column("task_events", sa.Column("result", pg.JSONB(), nullable=True))
    op.add_column("task_events", sa.Column("latest_checkpoint", pg.JSONB(), nullable=True))
    # History is append-only; this one rewrite moves the snapshot's fields into columns.
    op.execute("ALTER TABLE task_events DISABLE TRIGGER task_events_append_only")
    op.execute(
        """
        UPDATE task_events SET
            waiting_on = task->>'waiting_on',
            result = NULLIF(task->'result', 'null'::jsonb),
            latest_checkpoint = NULLIF(task->'latest_checkpoint', 'null'::jsonb)
        """
    )
    op.execute("ALTER TABLE task_events ENABLE TRIGGER task_events_append_only")
    op.drop_column("task_events", "task")
    for name in OLD_INDEXES:
        op.drop_index(name, table_name="tasks")
    for name, columns in NEW_INDEXES.items():
        op.create_index(name, "tasks", columns)


def downgrade() -> None:
    for name in NEW_INDEXES:
        op.drop_index(name, table_name="tasks")
    for name, columns in OLD_INDEXES.items():
        op.create_index(name, "tasks", columns)
    op.add_column("task_events", sa.Column("task", pg.JSONB(), nullable=True))
    op.execute("ALTER TABLE task_events DISABLE TRIGGER task_events_append_only")
    op.execute(
        """
        UPDATE task_events e SET task = to_jsonb(t)
            || jsonb_build_object('state', e.to_state, 'waiting_on', e.waiting_on,
                                  'result', e.result, 'latest_checkpoint', e.latest_checkpoint,
                                  'version', e.version, 'updated_at', e.at)
        FROM tasks t WHERE t.id = e.task_id
        """
    )
    op.execute("ALTER TABLE task_events ENABLE TRIGGER task_events_append_only")
    op.alter_column("task_events", "task", nullable=False)
    op.drop_column("task_events", "latest_checkpoint")
    op.drop_column("task_events", "result")
    op.drop_column("task_events", "waiting_on")
