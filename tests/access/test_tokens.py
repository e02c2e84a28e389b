"""Token lifecycle in the store: expiry, revocation, last use, and the cache's bound."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Collection
from datetime import timedelta

import pytest

from baton.access.grants import TokenCache
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
from baton.errors import InvalidInput, Unavailable
from baton.store.db import Database
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


async def test_requests_that_miss_the_cache_together_share_one_look_up() -> None:
    grant = Grant(1, owner("shared"), None)
    lookups: list[str] = []
    release = asyncio.Event()

    async def resolve(token: str) -> Grant | None:
        lookups.append(token)
        await release.wait()
        return grant

    async def still(tokens: Collection[str]) -> set[str]:
        return set(tokens)

    cache = TokenCache(resolve, still)
    waiting = [asyncio.create_task(cache.principal("baton_b")) for _ in range(20)]
    await asyncio.sleep(0)
    # One caller gives up; the others still get their answer from the shared look-up.
    waiting[0].cancel()
    release.set()
    answers = await asyncio.gather(*waiting[1:])
    assert answers == [grant.principal] * 19
    assert lookups == ["baton_b"]
    assert await cache.principal("baton_b") == grant.principal
    assert lookups == ["baton_b"]  # and it is cached


async def test_a_failed_look_up_fails_every_request_waiting_on_it_and_is_not_kept() -> None:
    calls = 0

    async def resolve(token: str) -> Grant | None:
        nonlocal calls
        calls += 1
        await asyncio.sleep(0)
        raise Unavailable("the database is away")

    async def still(tokens: Collection[str]) -> set[str]:
        return set()

    cache = TokenCache(resolve, still)
    results = await asyncio.gather(
        *(cache.principal("baton_c") for _ in range(5)), return_exceptions=True
    )
    assert all(isinstance(r, Unavailable) for r in results) and calls == 1
    with pytest.raises(Unavailable):
        await cache.principal("baton_c")
    assert calls == 2  # tried again, not answered from a failure


async def test_a_stale_last_use_is_written_once_however_many_read_it(db: Database) -> None:
    token = await create_token(db, owner(f"tok{secrets.token_hex(4)}"))
    ident = await token_id(db, token)
    await db.execute(
        "UPDATE api_tokens SET last_used_at = now() - interval '1 hour' WHERE id = $1", ident
    )
    async with db.connection() as conn:
        await conn.execute("CREATE TABLE IF NOT EXISTS test_token_writes (id bigint)")
        await conn.execute(
            "CREATE OR REPLACE FUNCTION test_count_token_write() RETURNS trigger "
            "LANGUAGE plpgsql AS $$ BEGIN INSERT INTO test_token_writes VALUES (NEW.id); "
            "RETURN NEW; END $$"
        )
        await conn.execute(
            f"CREATE TRIGGER test_token_writes_{ident} AFTER UPDATE ON api_tokens FOR EACH ROW "
            f"WHEN (NEW.id = {ident}) EXECUTE FUNCTION test_count_token_write()"
        )
    try:
        grants = await asyncio.gather(*(grant_for(db, token) for _ in range(8)))
        assert all(g is not None for g in grants)
        writes = await db.fetchval("SELECT count(*) FROM test_token_writes WHERE id = $1", ident)
    finally:
        await db.execute(f"DROP TRIGGER test_token_writes_{ident} ON api_tokens")
        await db.execute("DROP TABLE test_token_writes")
        await db.execute("DROP FUNCTION test_count_token_write()")
    assert writes == 1
