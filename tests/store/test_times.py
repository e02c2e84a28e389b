"""Times through the request path's pool: written and read as ISO text (`decode_time`,
`encode_time`), they are the same aware UTC datetimes asyncpg's binary codec makes, whatever
the session's time zone, with the same infinities; behind a pooler, where no DateStyle can be
set at start, the pool keeps the binary codec."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta, timezone

import asyncpg  # type: ignore[import-untyped]
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from baton.store.db import Database, decode_time, encode_time, libpq_url
from tests import helpers
from tests.pgbouncer import pgbouncer_in_front

EDGES = [
    datetime(2026, 12, 5, 3, 59, 29, 729445, tzinfo=UTC),
    datetime(2026, 12, 5, 3, 59, 29, tzinfo=UTC),  # no fraction: PostgreSQL writes none
    datetime(2026, 12, 5, 3, 59, 29, 500000, tzinfo=UTC),  # trailing zeros dropped
    datetime(2026, 12, 5, 3, 59, 29, 1, tzinfo=UTC),
    datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
    datetime(1, 1, 2, tzinfo=UTC),
    datetime(9999, 12, 31, 23, 59, 59, 999998, tzinfo=UTC),
    datetime(2026, 3, 29, 1, 30, tzinfo=timezone(timedelta(hours=5, minutes=30))),
]


@pytest.fixture
async def binary(database_url: str) -> AsyncIterator[asyncpg.Connection]:
    """A plain asyncpg connection: its own binary codec, the reference."""
    conn = await asyncpg.connect(libpq_url(database_url))
    yield conn
    await conn.close()


async def _through_pool(db: Database, values: list[datetime], zone: str) -> list[datetime]:
    """`values` sent as parameters and read back as a column, in a session whose time zone is
    `zone` (PostgreSQL writes each time in it)."""
    async with db.transaction() as conn:
        await conn.execute(f"SET LOCAL TimeZone = '{zone}'")
        rows = await conn.fetch("SELECT x FROM unnest($1::timestamptz[]) AS x", values)
        one = await conn.fetchval("SELECT $1::timestamptz", values[0])
    assert one == values[0]
    return [row["x"] for row in rows]


@pytest.mark.parametrize("zone", ["UTC", "Asia/Kolkata", "America/St_Johns"])
async def test_times_read_as_text_are_what_the_binary_codec_reads(
    db: Database, binary: asyncpg.Connection, zone: str
) -> None:
    read = await _through_pool(db, EDGES, zone)
    reference = await binary.fetch("SELECT x FROM unnest($1::timestamptz[]) AS x", EDGES)
    assert read == [row["x"] for row in reference] == EDGES
    # Not only equal instants: the same representation, in UTC, which the API writes.
    assert all(value.tzinfo is UTC for value in read)
    assert [v.isoformat() for v in read] == [r["x"].isoformat() for r in reference]


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(
        st.datetimes(
            min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.just(UTC)
        ),
        min_size=1,
        max_size=20,
    )
)
async def test_any_time_goes_through_the_pool_unchanged(
    db: Database, values: list[datetime]
) -> None:
    read = await _through_pool(db, values, "Europe/Lisbon")
    assert read == values
    assert all(value.tzinfo is UTC for value in read)


async def test_infinite_times_are_the_binary_codecs_extremes(
    db: Database, binary: asyncpg.Connection
) -> None:
    sql = "SELECT 'infinity'::timestamptz, '-infinity'::timestamptz"
    async with db.connection() as conn:
        ours = tuple(await conn.fetchrow(sql))
    assert ours == tuple(await binary.fetchrow(sql)) == (datetime.max, datetime.min)
    assert encode_time(datetime.max) == "infinity"
    assert encode_time(datetime.min) == "-infinity"


def test_a_time_python_cannot_hold_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="not a time Python can hold"):
        decode_time("0044-03-15 12:00:00+00 BC")


async def test_a_parameter_that_is_not_a_time_is_refused_as_before(db: Database) -> None:
    with pytest.raises(asyncpg.DataError):
        await db.fetchval("SELECT $1::timestamptz", "2026-12-05")


@pytest.fixture
async def day_first(server_url: str) -> AsyncIterator[str]:
    """A new database whose own DateStyle writes and reads dates day first (`SQL, DMY`)."""
    async with helpers.fresh_database(server_url, "baton_times") as url:
        plain = await asyncpg.connect(libpq_url(url))
        try:
            name = await plain.fetchval("SELECT current_database()")
            await plain.execute(f"ALTER DATABASE \"{name}\" SET DateStyle = 'SQL, DMY'")
        finally:
            await plain.close()
        yield url


async def test_a_databases_own_date_style_does_not_change_what_the_pool_reads(
    day_first: str,
) -> None:
    db = await Database.connect(day_first, acquire_timeout=30)
    try:
        assert not db.pooled
        style = await db.fetchval("SELECT current_setting('DateStyle')")
        read = await _through_pool(db, EDGES, "UTC")
        # Input keeps the database's order of day and month: only the output is ISO.
        typed = await db.fetchval("SELECT '05/12/2026 10:00+00'::timestamptz")
    finally:
        await db.close()
    assert style == "ISO, DMY"
    assert read == EDGES and all(value.tzinfo is UTC for value in read)
    assert typed == datetime(2026, 12, 5, 10, tzinfo=UTC)


async def test_behind_a_pooler_times_are_read_whatever_the_databases_date_style(
    server_url: str, day_first: str
) -> None:
    # A pooler passes no DateStyle on, so the text would be in the database's own style.
    with pgbouncer_in_front(server_url, pool_size=1) as bouncer:
        db = await Database.connect(bouncer.url(day_first), acquire_timeout=30)
        try:
            assert db.pooled
            style = await db.fetchval("SELECT current_setting('DateStyle')")
            at = await db.fetchval("SELECT $1::timestamptz", EDGES[0])
        finally:
            await db.close()
    assert style == "SQL, DMY"
    assert at == EDGES[0] and at.tzinfo is UTC
