"""Token lifecycle in the store: expiry, revocation, last use, and the cache's bound."""

from __future__ import annotations

import secrets
from collections.abc import Collection
from datetime import timedelta

import pytest

from baton.access.principals import Principal
from baton.access.tokens import (
    Grant,
    create_token,
    digest,
    grant_for,
    list_tokens,
    parse_duration,
    revoke_token,
    working,
)
from baton.errors import InvalidInput
from baton.store.db import Database
from baton.web.auth import TokenCache
from tests.helpers import owner


async def token_id(db: Database, token: str) -> int:
    value = await db.fetchval("SELECT id FROM api_tokens WHERE token_hash = $1", digest(token))
    assert isinstance(value, int)
    return value


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30d", 30 * 86400), ("12h", 12 * 3600), ("15m", 900), ("45s", 45), ("1h30m", 5400)],
)
def test_durations(text: str, seconds: int) -> None:
    assert parse_duration(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize(
    "text", ["", "30", "d", "0d", "-1d", "1.5h", "\uff13d", "1y", "30 d", "9" * 30 + "d"]
)
def test_bad_durations_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


async def test_a_token_works_until_it_is_revoked(db: Database) -> None:
    principal = owner(f"tok{secrets.token_hex(4)}")
    token = await create_token(db, principal)
    grant = await grant_for(db, token)
    assert grant is not None and grant.principal == principal and grant.expires_at is None
    assert await working(db, [token, "baton_unknown"]) == {token}

    revoked = await revoke_token(db, await token_id(db, token))
    assert revoked is not None
    assert await grant_for(db, token) is None
    assert await working(db, [token]) == set()
    # Revoking again keeps the first time; an unknown id is None.
    assert await revoke_token(db, await token_id(db, token)) == revoked
    assert await revoke_token(db, 2**62) is None


async def test_an_expired_token_stops_working(db: Database) -> None:
    token = await create_token(db, owner("expiring"), expires_in=timedelta(seconds=30))
    grant = await grant_for(db, token)
    assert grant is not None and grant.expires_at is not None
    await db.execute(
        "UPDATE api_tokens SET expires_at = now() - interval '1 second' WHERE id = $1",
        await token_id(db, token),
    )
    assert await grant_for(db, token) is None
    assert await working(db, [token]) == set()


async def test_last_used_is_written_at_most_once_a_minute(db: Database) -> None:
    token = await create_token(db, owner("lastused"))
    ident = await token_id(db, token)
    listed = {t.id: t for t in await list_tokens(db)}
    assert listed[ident].last_used_at is None

    await grant_for(db, token)
    first = await db.fetchval("SELECT last_used_at FROM api_tokens WHERE id = $1", ident)
    assert first is not None
    await grant_for(db, token)
    assert await db.fetchval("SELECT last_used_at FROM api_tokens WHERE id = $1", ident) == first

    await db.execute(
        "UPDATE api_tokens SET last_used_at = now() - interval '61 seconds' WHERE id = $1", ident
    )
    await grant_for(db, token)
    later = await db.fetchval("SELECT last_used_at FROM api_tokens WHERE id = $1", ident)
    assert later > first


async def test_the_listing_shows_everything_but_the_secret(db: Database) -> None:
    token = await create_token(db, owner("listed"), expires_in=timedelta(days=30))
    listed = {t.id: t for t in await list_tokens(db)}[await token_id(db, token)]
    assert listed.principal == owner("listed")
    assert listed.expires_at is not None and listed.revoked_at is None
    assert token not in repr(listed) and digest(token) not in repr(listed)


@pytest.mark.parametrize("text", ["admin", "system", "admin/x", "system/agent", ""])
def test_reserved_owner_names_cannot_be_principals(text: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        Principal.parse(text)
    assert refused.value.field == "principal"


async def test_the_cache_forgets_a_revoked_token_within_its_period() -> None:
    valid = {"baton_a"}
    grant = Grant(1, owner("cached"), None)
    lookups: list[str] = []

    async def resolve(token: str) -> Grant | None:
        lookups.append(token)
        return grant if token in valid else None

    async def still(tokens: Collection[str]) -> set[str]:
        return set(tokens) & valid

    cache = TokenCache(resolve, still, check_seconds=0.2)
    assert await cache.principal("baton_a") == grant.principal
    assert await cache.principal("baton_a") == grant.principal
    assert lookups == ["baton_a"]  # the second came from the cache
    valid.clear()
    assert await cache.recheck(["baton_a"]) == set()
    assert await cache.principal("baton_a") is None  # forgotten at once by a re-check
