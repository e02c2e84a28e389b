"""API tokens: minted once, shown once, stored as a SHA-256 digest.

Tokens carry 256 random bits, so a fast digest is enough: there is nothing to brute-force.
"""

from __future__ import annotations

import hashlib
import secrets

from sqlalchemy import insert, select
from sqlalchemy.ext.asyncio import AsyncEngine

from baton.access.principals import Principal, PrincipalKind
from baton.store.tables import ApiTokenRow

PREFIX = "baton_"


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


async def create_token(engine: AsyncEngine, principal: Principal) -> str:
    token = PREFIX + secrets.token_urlsafe(32)
    async with engine.begin() as conn:
        await conn.execute(
            insert(ApiTokenRow).values(
                token_hash=digest(token), kind=principal.kind.value, handle=principal.handle
            )
        )
    return token


async def principal_for(engine: AsyncEngine, token: str) -> Principal | None:
    """The principal a bearer token acts as, or None when it is unknown."""
    if not token.startswith(PREFIX) or len(token) > 200:
        return None
    async with engine.connect() as conn:
        row = (
            await conn.execute(
                select(ApiTokenRow.kind, ApiTokenRow.handle).where(  # type: ignore[call-overload]
                    ApiTokenRow.token_hash == digest(token)
                )
            )
        ).first()
    if row is None:
        return None
    return Principal(PrincipalKind(row.kind), row.handle)
