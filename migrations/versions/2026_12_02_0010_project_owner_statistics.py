"""statistics of which owners a project's tasks belong to

An owner's listing by project and state (a board's column, `tasks(filter: {project, states})`)
is one ordered scan per side of what the owner sees. PostgreSQL estimated the requester side by
multiplying the project's and the owner's selectivities as if they were independent: at 100,000
tasks of 10 owners it expected 48 of a project's 500 working tasks to be the owner's, where all
500 were, so it ANDed the project's index with the owner's 10,000 rows and sorted the result
(3.9 to 6.2 ms). Told that a project's tasks share their owners (functional dependencies among
`project`, `requester_owner` and `assignee_owner`), it reads the project-and-state index in
order and stops after the page (0.3 ms). Where projects do not follow owners, the statistics
say so and the plans stay as they were.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-02
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute(
        "CREATE STATISTICS tasks_project_owners (dependencies)"
        " ON project, requester_owner, assignee_owner FROM tasks"
    )
    op.execute("ANALYZE tasks")


def downgrade() -> None:
    op.execute("DROP STATISTICS tasks_project_owners")
