"""The database: an asyncpg pool for the request path, SQLAlchemy only for migrations.

The store speaks asyncpg directly, with statements asyncpg prepares once per connection:
SQLAlchemy's async layer costs more CPU per statement than the statement itself on these
paths (a greenlet switch, compilation lookup, result processing). The SQLModel tables in
`tables.py` still define the schema that Alembic migrates and that tests check.

Connections come from Baton's own pool (`baton.store.pool`), which resets nothing between
checkouts (Baton sets no session state on them after they open, and a connection handed back
inside a transaction or mid-statement is terminated). JSONB arrives as Python objects via
orjson, times as ISO text read by `decode_time` (each session's DateStyle output set to ISO
when it opens), and a database that is down or saturated is `Unavailable` rather than a hang.

Behind a transaction pooler (PgBouncer in `pool_mode = transaction`), a client's statements
outside a transaction may each run in another server session, so nothing may rely on a
session: `Database.connect` finds out whether it talks to a pooler (`behind_pooler`) and then
prepares no named statements (asyncpg's unnamed ones are parsed and run in one message batch)
and sends no startup settings (PgBouncer refuses them; the database's or role's own defaults
apply, so times keep asyncpg's binary codec). Everything else the store does already holds
within one transaction or one statement: advisory locks are transaction-level, leases are rows,
settings are `set_config(…, true)`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import orjson
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from baton.budget import current_budget, spend
from baton.errors import TooMuchWork, Unavailable
from baton.metrics import DB_STATEMENTS
from baton.store.pool import Pool

log = logging.getLogger("baton.store")

# Errors that mean "the database cannot answer now", not "this statement is wrong".
UNREACHABLE = (
    OSError,
    asyncio.TimeoutError,
    asyncpg.CannotConnectNowError,
    asyncpg.PostgresConnectionError,  # the connection dropped or was refused mid-way
    asyncpg.InterfaceError,
    asyncpg.TooManyConnectionsError,
    asyncpg.AdminShutdownError,
    asyncpg.CrashShutdownError,
    asyncpg.IdleSessionTimeoutError,
)


def sqlalchemy_url(url: str) -> str:
    """`postgresql://…` or `postgres://…` -> SQLAlchemy's `postgresql+asyncpg://…`."""
    parts = urlsplit(url)
    if parts.scheme not in ("postgres", "postgresql", "postgresql+asyncpg"):
        raise ValueError(f"unsupported database URL scheme {parts.scheme!r}")
    return urlunsplit(parts._replace(scheme="postgresql+asyncpg"))


def libpq_url(url: str) -> str:
    """The plain `postgresql://…` form asyncpg and broadcaster expect."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(scheme="postgresql"))


def create_engine(url: str, *, pool_size: int = 2, pooled: bool = False) -> AsyncEngine:
    """A SQLAlchemy engine, for Alembic migrations (and tests that poke at raw SQL); off the
    request path, so it may pre-ping its connections.

    `pooled`: `url` goes through a transaction pooler. SQLAlchemy's dialect prepares named
    statements, and asyncpg numbers them from 1 on every connection, so a name left in a
    pooled server session by an earlier client is taken ("prepared statement
    __asyncpg_stmt_1__ already exists"); here every statement gets a name of its own and
    nothing is cached across statements."""
    connect_args: dict[str, Any] = {}
    if pooled:
        connect_args = {
            "statement_cache_size": 0,
            "prepared_statement_cache_size": 0,
            "prepared_statement_name_func": _unique_statement_name,
        }
    return create_async_engine(
        sqlalchemy_url(url),
        pool_size=pool_size,
        max_overflow=pool_size,
        pool_pre_ping=True,
        connect_args=connect_args,
    )


def _unique_statement_name() -> str:
    return f"__baton_{uuid.uuid4().hex}__"


async def behind_pooler(conn: asyncpg.Connection) -> bool:
    """Whether `conn` reaches PostgreSQL through a connection pooler. PostgreSQL's key for
    cancelling (BackendKeyData, sent at start) carries its backend's process id; a pooler
    (PgBouncer, and any pooler that moves a client between server sessions) hands its clients
    keys of its own, so the two differ. `conn` must cache no statements (it may be pooled)."""
    return bool(conn.get_server_pid() != await conn.fetchval("SELECT pg_backend_pid()"))


async def database_identity(conn: asyncpg.Connection) -> str:
    """Which database of which running server `conn` reaches: equal for two URLs to the same
    one (one direct, one through a pooler, say), different otherwise."""
    return str(
        await conn.fetchval(
            "SELECT pg_postmaster_start_time()::text || ' ' || oid::text "
            "FROM pg_database WHERE datname = current_database()"
        )
    )


async def probe_pooler(url: str, *, connect_timeout: float = 10.0) -> bool:
    """`behind_pooler` on a connection of its own to `url`."""
    conn = await asyncpg.connect(libpq_url(url), statement_cache_size=0, timeout=connect_timeout)
    try:
        return await behind_pooler(conn)
    finally:
        await conn.close()


class MeteredConnection(asyncpg.Connection):  # type: ignore[misc]  # asyncpg is untyped
    """A pooled connection whose JSON decoder spends the budget of the request using it
    (`json_budget`, set by `Connection.fetch` for the statement's duration), as each value
    arrives: concurrent statements of one request share one budget, and once it is spent the
    rest of the rows' JSON is not decoded at all."""

    __slots__ = ("json_budget",)

    def meter(self, budget: list[int] | None) -> None:
        """Spend `budget` while decoding (None: stop)."""
        self.json_budget = budget


# What asyncpg's own codec reads PostgreSQL's infinite times as.
_INFINITE = {"infinity": datetime.max, "-infinity": datetime.min}
_from_iso = datetime.fromisoformat
# A time written in a zone ahead of UTC may fall in year 10000 there: read 400 years earlier
# (the Gregorian calendar repeats every 146,097 days), then moved back.
_LATE = re.compile(r"(\d{5,})(-.*)")
_CYCLE_YEARS, _CYCLE = 400, timedelta(days=146_097)


def decode_time(text: str) -> datetime:
    """A `timestamptz` in PostgreSQL's text form (DateStyle ISO) as an aware datetime in UTC, as
    asyncpg's binary codec makes it. Decoding the text costs a third of what that codec does
    (about 0.2 against 0.65 µs a value, most of a page's decoding), and PostgreSQL writes the
    text at nearly the cost of the binary form."""
    try:
        value = _from_iso(text)
    except ValueError:
        return _unusual(text)
    # The session's TimeZone sets the offset written; the value is the same instant.
    return value if value.tzinfo is UTC else value.astimezone(UTC)


def _unusual(text: str) -> datetime:
    infinite = _INFINITE.get(text)
    if infinite is not None:
        return infinite
    late = _LATE.fullmatch(text)
    if late is not None:
        try:
            earlier = _from_iso(f"{int(late[1]) - _CYCLE_YEARS:04d}{late[2]}")
            return earlier.astimezone(UTC) + _CYCLE
        except (ValueError, OverflowError):
            pass
    raise ValueError(f"not a time Python can hold: {text!r}")


def encode_time(value: datetime) -> str:
    """An aware datetime (a naive one is local time, as asyncpg's codec takes it) as
    PostgreSQL reads a `timestamptz`."""
    if value == datetime.max:
        return "infinity"
    if value == datetime.min:
        return "-infinity"
    return value.astimezone(UTC).isoformat()


async def _init(conn: asyncpg.Connection, *, text_times: bool = False) -> None:
    """`text_times`: the session writes times as ISO text, and they are decoded from it
    (`decode_time`)."""
    conn.json_budget = None
    if text_times:
        # Set in the session, not at start: a value given at start would replace the
        # database's order of day and month in input along with the output's format.
        await conn.execute("SET DateStyle = 'ISO'")
        await conn.set_type_codec(
            "timestamptz",
            encoder=encode_time,
            decoder=decode_time,
            schema="pg_catalog",
            format="text",
        )

    def decode(text: str) -> Any:
        budget: list[int] | None = conn.json_budget
        if budget is not None:
            budget[1] -= len(text)
            if budget[1] < 0:
                return None  # over budget: `Connection.fetch` refuses the rows
        return orjson.loads(text)

    for kind in ("jsonb", "json"):
        await conn.set_type_codec(
            kind,
            encoder=lambda value: orjson.dumps(value).decode(),
            decoder=decode,
            schema="pg_catalog",
            format="text",
        )


def pool_share(total: int, processes: int) -> int:
    """Each of `processes` processes' part of a `total` connection budget, 2 at least.

    The budget is per server, not per process: N workers with a pool of 16 each would open 16N
    backends, more than a small database host can run at once, and adding workers should not
    change what the database has to carry."""
    return max(2, total // max(1, processes))


class Database:
    def __init__(self, pool: Pool, *, acquire_timeout: float, pooled: bool = False) -> None:
        self.pool = pool
        self.acquire_timeout = acquire_timeout
        self.pooled = pooled  # through a transaction pooler: see the module's docstring

    @classmethod
    async def connect(
        cls,
        url: str,
        *,
        min_size: int = 2,
        max_size: int = 16,
        acquire_timeout: float = 2.0,
        connect_timeout: float = 10.0,
        statement_timeout: float = 10.0,
        pooled: bool | None = None,
    ) -> Database:
        """A pool of `max_size` connections. Waiting longer than `acquire_timeout` for one (the
        database saturated) or failing to reach it is `Unavailable`; a statement running
        longer than `statement_timeout` seconds is cancelled by PostgreSQL.

        `pooled`: whether `url` goes through a transaction pooler (None: ask it, see
        `behind_pooler`). Through one, statements are not cached and the settings below are
        the database's own (a warning says so when it sets no statement timeout)."""
        dsn = libpq_url(url)
        if pooled is None:
            try:
                pooled = await probe_pooler(dsn, connect_timeout=connect_timeout)
            except UNREACHABLE as exc:
                raise Unavailable(f"cannot reach the database: {exc}") from exc
        settings = {
            "statement_timeout": str(int(statement_timeout * 1000)),
            # Short statements: JIT compiling one costs more (~10 ms) than it saves.
            "jit": "off",
        }

        async def connect() -> asyncpg.Connection:
            conn = await asyncpg.connect(
                dsn,
                connection_class=MeteredConnection,
                statement_cache_size=0 if pooled else 512,
                timeout=connect_timeout,
                server_settings=None if pooled else settings,
            )
            try:
                await _init(conn, text_times=not pooled)
            except BaseException:
                conn.terminate()
                raise
            return conn

        pool = Pool(connect, min_size=min(min_size, max_size), max_size=max_size)
        try:
            await pool.start()
        except UNREACHABLE as exc:
            raise Unavailable(f"cannot reach the database: {exc}") from exc
        db = cls(pool, acquire_timeout=acquire_timeout, pooled=pooled)
        if pooled and await db.fetchval("SELECT current_setting('statement_timeout')") == "0":
            log.warning(
                "the database is reached through a connection pooler, which passes on no "
                "connection settings, and it sets no statement_timeout: a statement may run "
                "without a time limit. Set one for Baton's role, e.g. ALTER ROLE %s SET "
                "statement_timeout = '%ds' (and jit = off)",
                await db.fetchval("SELECT quote_ident(current_user)"),
                max(1, round(statement_timeout)),
            )
        return db

    async def close(self) -> None:
        await self.pool.close(grace=10)

    @contextlib.asynccontextmanager
    async def connection(self) -> AsyncIterator[Connection]:
        try:
            raw = await self.pool.acquire(self.acquire_timeout)
        except UNREACHABLE as exc:
            raise Unavailable(f"the database is unavailable or saturated ({exc!r})") from exc
        # Not reusable unless the body ends between statements: one cancelled or cut off
        # during a statement may leave the connection mid-way through it.
        reusable = False
        try:
            yield Connection(raw)
            reusable = True
        except UNREACHABLE as exc:
            raise Unavailable(f"lost the database connection ({exc!r})") from exc
        except asyncpg.QueryCanceledError as exc:  # statement_timeout
            reusable = True
            raise TooMuchWork("a statement ran longer than the database allows") from exc
        except Exception:
            reusable = True  # the database's refusal, or the caller's own error between them
            raise
        finally:
            self.pool.release(raw, reusable=reusable)

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[Connection]:
        async with self.connection() as conn:
            DB_STATEMENTS.inc(2)  # BEGIN, and COMMIT or ROLLBACK
            async with conn.raw.transaction():
                yield conn

    async def fetch(self, sql: str, *args: Any) -> list[asyncpg.Record]:
        async with self.connection() as conn:
            return await conn.fetch(sql, *args)

    async def fetchrow(self, sql: str, *args: Any) -> asyncpg.Record | None:
        async with self.connection() as conn:
            return await conn.fetchrow(sql, *args)

    async def fetchval(self, sql: str, *args: Any) -> Any:
        async with self.connection() as conn:
            return await conn.fetchval(sql, *args)

    async def execute(self, sql: str, *args: Any) -> str:
        async with self.connection() as conn:
            return await conn.execute(sql, *args)


class Connection:
    """One pooled connection; counts the statements it runs (`baton_db_statements_total`)."""

    def __init__(self, raw: MeteredConnection) -> None:
        self.raw = raw

    async def fetch(self, sql: str, *args: Any, writes: bool = False) -> list[asyncpg.Record]:
        """The rows, spent from the request's budget (`baton.budget`) unless the statement
        `writes`: a write that is done must never be answered as refused."""
        DB_STATEMENTS.inc()
        budget = None if writes else current_budget()
        if budget is None:
            return await self.raw.fetch(sql, *args)  # type: ignore[no-any-return]
        self.raw.meter(budget)
        try:
            rows = await self.raw.fetch(sql, *args)
        finally:
            self.raw.meter(None)
        spend(len(rows))
        return rows  # type: ignore[no-any-return]

    async def fetchrow(self, sql: str, *args: Any) -> asyncpg.Record | None:
        DB_STATEMENTS.inc()
        return await self.raw.fetchrow(sql, *args)

    async def fetchval(self, sql: str, *args: Any) -> Any:
        DB_STATEMENTS.inc()
        return await self.raw.fetchval(sql, *args)

    async def execute(self, sql: str, *args: Any) -> str:
        DB_STATEMENTS.inc()
        return await self.raw.execute(sql, *args)  # type: ignore[no-any-return]
