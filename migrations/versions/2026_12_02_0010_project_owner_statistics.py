"""a project's listing by state: the owners it belongs to, and the cross-owner side by state

An owner's listing by project and state (a board's column, `tasks(filter: {project, states})`)
is one ordered scan per side of what the owner sees, merged. Measured at 100,000 tasks of 10
owners, for a project's 500 working tasks:

- The requester side. PostgreSQL multiplied the project's and the owner's selectivities as if
  they were independent, expected 48 of the 500 to be the owner's where all were, and ANDed the
  project's index with the owner's 10,000 rows, then sorted (3.9 to 6.2 ms). Functional-
  dependency statistics among `project`, `requester_owner` and `assignee_owner` tell it that a
  project's tasks share their owners: it reads the project-and-state index in order and stops
  after the page. Where projects do not follow owners, the statistics say so.
- The assignee side (tasks handed to the owner by others). Its partial index leads with the
  owner and the project but not the state, so the plan that asyncpg's prepared statement
  settles on (generic, without the values) read all 500 of the project's working tasks through
  the project-and-state index to find none of the owner's (0.6 to 0.8 ms). An index of that
  side by state too makes it a scan of exactly the page.

The statement went from about 1.0 ms to 0.5 ms (EXPLAIN ANALYZE, generic plan).

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

RECENT = [sa.text("updated_at DESC"), sa.text("id DESC")]


def upgrade() -> None:
    op.execute(
        "CREATE STATISTICS tasks_project_owners (dependencies)"
        " ON project, requester_owner, assignee_owner FROM tasks"
    )
    op.create_index(
        "tasks_cross_owner_project_state_recent_idx",
        "tasks",
        [sa.text("assignee_owner"), sa.text("project"), sa.text("state"), *RECENT],
        postgresql_where=sa.text("assignee_owner <> requester_owner"),
    )
    op.execute("ANALYZE tasks")


def downgrade() -> None:
    op.drop_index("tasks_cross_owner_project_state_recent_idx", table_name="tasks")
    op.execute("DROP STATISTICS tasks_project_owners")
