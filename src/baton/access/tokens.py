"""API tokens: minted once, shown once, stored as a SHA-256 digest.

Tokens carry 256 random bits, so a fast digest is enough: there is nothing to brute-force.
"""

from __future__ import annotations

import hashlib
import secrets

from baton.access.principals import Principal, PrincipalKind
from baton.store.db import Database

PREFIX = "baton_"


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


async def create_token(db: Database, principal: Principal) -> str:
    token = PREFIX + secrets.token_urlsafe(32)
    await db.execute(
        "INSERT INTO api_tokens (token_hash, kind, handle) VALUES ($1, $2, $3)",
        digest(token),
        principal.kind.value,
        principal.handle,
    )
    return token


async def principal_for(db: Database, token: str) -> Principal | None:
    """The principal a bearer token acts as, or None when it is unknown."""
    if not token.startswith(PREFIX) or len(token) > 200:
        return None
    row = await db.fetchrow(
        "SELECT kind, handle FROM api_tokens WHERE token_hash = $1", digest(token)
    )
    if row is None:
        return None
    return Principal(PrincipalKind(row["kind"]), row["handle"])
