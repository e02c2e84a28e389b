"""token lifecycle: expiry, revocation, last use

`expires_at` is set at creation (`baton token create --expires-in`), `revoked_at` by `baton token
revoke`; a token with either in the past stops working. `last_used_at` is refreshed at most once
a minute per token, when a server re-reads the token, so using a token costs no write per
request.

Owner names `admin` and `system` are reserved from now on: tokens already minted for such an
owner or its agents are revoked here, so no principal but the real admin acts as `admin`.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

COLUMNS = ("expires_at", "revoked_at", "last_used_at")


def upgrade() -> None:
    for name in COLUMNS:
        op.add_column("api_tokens", sa.Column(name, sa.DateTime(timezone=True), nullable=True))
    op.execute(
        "UPDATE api_tokens SET revoked_at = now() WHERE kind <> 'ADMIN' "
        "AND split_part(handle, '/', 1) IN ('admin', 'system', '')"
    )


def downgrade() -> None:
    for name in reversed(COLUMNS):
        op.drop_column("api_tokens", name)
