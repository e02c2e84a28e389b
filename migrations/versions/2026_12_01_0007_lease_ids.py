"""lease ids: each claim's lease gets its own id, the fencing token of the claim

Daemons that share one principal cannot be told apart by the lease's holder alone: after one's
lease ran out and another claimed the run, the first one's late events would pass a holder
check. `claimRun` now draws a fresh id for every lease; `runHeartbeat` and the runner events on
a claimed run may name it (`leaseId`), and the guarded statements compare it with the live
lease. Leases held while this migration runs get an id of their own (their holders, which never
saw one, go on without naming it).

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("run_leases", sa.Column("id", sa.Text(), nullable=True))
    # The same shape as the ids the server draws (`l` and 24 hex digits).
    op.execute("UPDATE run_leases SET id = 'l' || substr(md5(random()::text || run_id), 1, 24)")
    op.alter_column("run_leases", "id", nullable=False)


def downgrade() -> None:
    op.drop_column("run_leases", "id")
