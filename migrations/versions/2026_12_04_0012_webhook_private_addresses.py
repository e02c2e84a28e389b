"""webhook endpoints keep whether their URL needed BATON_WEBHOOK_ALLOW_PRIVATE

Processes sharing a database may differ in BATON_WEBHOOK_ALLOW_PRIVATE. An endpoint saved by a
process that allows private addresses, with a URL at one, was claimed by processes that do not,
which refused every attempt and disabled it. The endpoint now keeps, when it is saved, whether
its URL resolved to an address that is not public: only processes that allow private addresses
deliver to such an endpoint (the others leave it alone), and every process delivers to an
endpoint saved with a public address as to a public one. NULL for endpoints saved before: each
process applies its own setting to them, as before.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-04
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("webhook_endpoints", sa.Column("allow_private", sa.Boolean(), nullable=True))


def downgrade() -> None:
    op.drop_column("webhook_endpoints", "allow_private")
