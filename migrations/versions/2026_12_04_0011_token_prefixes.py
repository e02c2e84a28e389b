"""a token's non-secret prefix, so that tokens of one principal can be told apart

`baton token list` shows each token's first characters (`baton_` and six of its 43 random
ones: 36 of its 256 bits), which its holder can match against the token they have, to revoke
the right one. Tokens minted before this have none (the list shows `-`): only their digest
was kept.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-04
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("api_tokens", sa.Column("prefix", sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column("api_tokens", "prefix")
