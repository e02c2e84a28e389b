"""API tokens: minted once, shown once, stored as a SHA-256 digest; listed, revoked, expiring.

Tokens carry 256 random bits, so a fast digest is enough: there is nothing to brute-force.
A token works while it is neither revoked nor past its `expires_at`. Servers cache what a token
grants for a few seconds (`baton.access.grants`); each re-read also refreshes `last_used_at`, at
most once a minute per token, so using a token costs no write per request.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime, timedelta

from baton.access.principals import Principal, PrincipalKind
from baton.store.db import Database

PREFIX = "baton_"
# What `baton token list` shows of a token: `baton_` and six of its 43 random characters, 36 of
# its 256 bits, enough to tell one principal's tokens apart and far from enough to guess one.
SHOWN_LENGTH = len(PREFIX) + 6
MAX_TOKEN_LENGTH = 200
LAST_USED_EVERY = timedelta(seconds=60)

_DURATION = re.compile(r"(?:[0-9]+[smhdw])+")
_DURATION_PART = re.compile(r"([0-9]+)([smhdw])")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
MAX_DURATION = timedelta(days=100 * 366)


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def parse_duration(text: str) -> timedelta:
    """`30d`, `12h`, `15m`, `45s`, `2w`, or a sum such as `1h30m`; ValueError otherwise."""
    if not _DURATION.fullmatch(text):
        raise ValueError("a duration is a number and a unit (s, m, h, d or w), e.g. 30d or 12h")
    seconds = sum(int(n) * _UNITS[unit] for n, unit in _DURATION_PART.findall(text))
    if seconds <= 0:
        raise ValueError("a duration must be longer than zero")
    if seconds > MAX_DURATION.total_seconds():
        raise ValueError("a duration must be at most 100 years")
    return timedelta(seconds=seconds)


@dataclass(frozen=True)
class Grant:
    """What a working token grants: its principal, until `expires_at` (None: no expiry)."""

    id: int
    principal: Principal
    expires_at: datetime | None

    def expired(self, now: datetime) -> bool:
        return self.expires_at is not None and self.expires_at <= now


@dataclass(frozen=True)
class TokenInfo:
    """A token as `baton token list` shows it; never the secret."""

    id: int
    principal: Principal
    prefix: str | None  # None for tokens minted before prefixes were kept
    created_at: datetime
    last_used_at: datetime | None
    expires_at: datetime | None
    revoked_at: datetime | None


@dataclass(frozen=True)
class Minted:
    """A new token: the secret (shown once), its id and the prefix the list shows."""

    id: int
    token: str

    @property
    def prefix(self) -> str:
        return self.token[:SHOWN_LENGTH]


async def mint_token(
    db: Database, principal: Principal, *, expires_in: timedelta | None = None
) -> Minted:
    token = PREFIX + secrets.token_urlsafe(32)
    token_id: int = await db.fetchval(
        "INSERT INTO api_tokens (token_hash, prefix, kind, handle, expires_at) "
        "VALUES ($1, $2, $3, $4, now() + $5::interval) RETURNING id",
        digest(token),
        token[:SHOWN_LENGTH],
        principal.kind.value,
        principal.handle,
        expires_in,
    )
    return Minted(token_id, token)


async def create_token(
    db: Database, principal: Principal, *, expires_in: timedelta | None = None
) -> str:
    return (await mint_token(db, principal, expires_in=expires_in)).token


async def list_tokens(db: Database) -> list[TokenInfo]:
    rows = await db.fetch(
        "SELECT id, prefix, kind, handle, created_at, last_used_at, expires_at, revoked_at "
        "FROM api_tokens ORDER BY id"
    )
    return [
        TokenInfo(
            id=row["id"],
            principal=Principal(PrincipalKind(row["kind"]), row["handle"]),
            prefix=row["prefix"],
            created_at=row["created_at"],
            last_used_at=row["last_used_at"],
            expires_at=row["expires_at"],
            revoked_at=row["revoked_at"],
        )
        for row in rows
    ]


async def revoke_token(db: Database, token_id: int) -> datetime | None:
    """Revoke token `token_id` (a second revoke keeps the first time); when it was revoked, or
    None when there is no such token."""
    revoked: datetime | None = await db.fetchval(
        "UPDATE api_tokens SET revoked_at = coalesce(revoked_at, now()) WHERE id = $1 "
        "RETURNING revoked_at",
        token_id,
    )
    return revoked


def well_formed(token: str) -> bool:
    return token.startswith(PREFIX) and len(token) <= MAX_TOKEN_LENGTH


async def grant_for(db: Database, token: str) -> Grant | None:
    """What `token` grants now, or None when it is unknown, revoked or expired. Refreshes
    `last_used_at` when it is over a minute old."""
    if not well_formed(token):
        return None
    async with db.connection() as conn:
        row = await conn.fetchrow(
            "SELECT id, kind, handle, expires_at, now() - last_used_at < $2::interval AS fresh "
            "FROM api_tokens WHERE token_hash = $1 AND revoked_at IS NULL "
            "AND (expires_at IS NULL OR expires_at > now())",
            digest(token),
            LAST_USED_EVERY,
        )
        if row is None:
            return None
        if not row["fresh"]:
            # Conditional: of servers that read the same stale time, one writes it.
            await conn.execute(
                "UPDATE api_tokens SET last_used_at = now() WHERE id = $1 "
                "AND (last_used_at IS NULL OR now() - last_used_at >= $2::interval)",
                row["id"],
                LAST_USED_EVERY,
            )
    return Grant(row["id"], Principal(PrincipalKind(row["kind"]), row["handle"]), row["expires_at"])


async def principal_for(db: Database, token: str) -> Principal | None:
    """The principal a bearer token acts as, or None when it does not work."""
    grant = await grant_for(db, token)
    return grant.principal if grant is not None else None


async def working(db: Database, tokens: Collection[str]) -> set[str]:
    """Which of `tokens` still work: one query however many there are."""
    by_digest = {digest(t): t for t in tokens if well_formed(t)}
    if not by_digest:
        return set()
    rows = await db.fetch(
        "SELECT token_hash FROM api_tokens WHERE token_hash = ANY($1::text[]) "
        "AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())",
        list(by_digest),
    )
    return {by_digest[row["token_hash"]] for row in rows}
