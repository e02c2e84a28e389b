"""indexes for an owner's tasks in a project, newest first

An owner's listing filtered by project (a board, a graph page) used to AND the project index
with every task on the owner's side and sort what was left: 10 to 25 ms at 100,000 tasks, most of
a graph page's database time. These indexes keep the order within one owner and project.

The assignee side's index holds only cross-owner tasks (an owner sees its own hand-offs through
the requester side), so it stays small and a scan of it never walks past the owner's own tasks;
the listing states that side as `assignee_owner <> requester_owner` so the planner can use it.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

RECENT = [sa.text("updated_at DESC"), sa.text("id DESC")]


def upgrade() -> None:
    op.create_index(
        "tasks_requester_owner_project_recent_idx",
        "tasks",
        [sa.text("requester_owner"), sa.text("project"), *RECENT],
    )
    op.create_index(
        "tasks_cross_owner_project_recent_idx",
        "tasks",
        [sa.text("assignee_owner"), sa.text("project"), *RECENT],
        postgresql_where=sa.text("assignee_owner <> requester_owner"),
    )


def downgrade() -> None:
    op.drop_index("tasks_cross_owner_project_recent_idx", table_name="tasks")
    op.drop_index("tasks_requester_owner_project_recent_idx", table_name="tasks")
