"""indexes that lead with who may see a task: owners by project, agents by handle

An owner's listing filtered by project (a board, a graph page) used to AND the project index
with every task on the owner's side and sort what was left: 10 to 25 ms at 100,000 tasks, most
of a graph page's database time. An agent's listing walked its owner's whole side, filtering
on the agent. These indexes keep the order (newest first) within exactly what a caller sees:

- an owner's requester side, overall and by project;
- an owner's assignee side, which holds only cross-owner tasks (an owner sees its own
  hand-offs through the requester side), overall and by project: partial indexes, so they stay
  small and a scan never walks past the owner's own tasks; the listing states that side as
  `assignee_owner <> requester_owner` so the planner can use them;
- an agent's requester side and assignee side.

The GIN index on `depends_on` (who depends on a task) stops deferring its inserts to a pending
list: every look-up scans that list in full until a vacuum merges it, and under a steady stream
of hand-offs it grew enough to make a graph page's 100 look-ups cost more than the page.

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
CROSS_OWNER = sa.text("assignee_owner <> requester_owner")
PLAIN = {
    "tasks_requester_owner_project_recent_idx": ["requester_owner", "project"],
    "tasks_requester_recent_idx": ["requester"],
    "tasks_assignee_recent_idx": ["assignee"],
}
PARTIAL = {
    "tasks_cross_owner_recent_idx": ["assignee_owner"],
    "tasks_cross_owner_project_recent_idx": ["assignee_owner", "project"],
}


def upgrade() -> None:
    for name, columns in PLAIN.items():
        op.create_index(name, "tasks", [*map(sa.text, columns), *RECENT])
    for name, columns in PARTIAL.items():
        op.create_index(
            name, "tasks", [*map(sa.text, columns), *RECENT], postgresql_where=CROSS_OWNER
        )
    op.drop_index("tasks_assignee_owner_recent_idx", table_name="tasks")
    op.execute("ALTER INDEX tasks_depends_on_idx SET (fastupdate = off)")
    op.execute("SELECT gin_clean_pending_list('tasks_depends_on_idx')")


def downgrade() -> None:
    op.execute("ALTER INDEX tasks_depends_on_idx RESET (fastupdate)")
    op.create_index(
        "tasks_assignee_owner_recent_idx", "tasks", [sa.text("assignee_owner"), *RECENT]
    )
    for name in [*PLAIN, *PARTIAL]:
        op.drop_index(name, table_name="tasks")
