"""A2A contexts: the `contextId` an A2A client gave a task it handed off, and its message id

A2A groups the tasks of one conversation under a `contextId` the client chooses (or the server
makes); Baton keeps it beside the task, with the `messageId` of the message that handed it off,
so that GetTask, ListTasks (which filters by context) and every streamed update answer the ids
the client knows. A task handed off through another door has no row: its context is its own id.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-05
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLE = "a2a_task_contexts"


def upgrade() -> None:
    op.create_table(
        TABLE,
        sa.Column(
            "task_id",
            sa.Text(),
            sa.ForeignKey("tasks.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("context_id", sa.Text(), nullable=False),
        sa.Column("message_id", sa.Text(), nullable=True),
    )
    op.create_index("a2a_task_contexts_context_idx", TABLE, ["context_id"])


def downgrade() -> None:
    op.drop_index("a2a_task_contexts_context_idx", TABLE)
    op.drop_table(TABLE)
