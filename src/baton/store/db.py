"""The database: an asyncpg pool for the request path, SQLAlchemy only for migrations.

The store speaks asyncpg directly, with statements asyncpg prepares once per connection:
SQLAlchemy's async layer costs more CPU per statement than the statement itself on these
paths (a greenlet switch, compilation lookup, result processing). The SQLModel tables in
`tables.py` still define the schema that Alembic migrates and that tests check.

Connections come from Baton's own pool (`baton.store.pool`), which resets nothing between
checkouts (Baton sets no session state on them, and a connection handed back inside a
transaction or mid-statement is terminated). JSONB arrives as Python objects via orjson, and a
database that is down or saturated is `Unavailable` rather than a hang.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import orjson
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from baton.budget import current_budget, spend
from baton.errors import TooMuchWork, Unavailable
from baton.metrics import DB_STATEMENTS
from baton.store.pool import Pool

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


def create_engine(url: str, *, pool_size: int = 2) -> AsyncEngine:
    """A SQLAlchemy engine, for Alembic migrations (and tests that poke at raw SQL); off the
    request path, so it may pre-ping its connections."""
    return create_async_engine(
        sqlalchemy_url(url), pool_size=pool_size, max_overflow=pool_size, pool_pre_ping=True
    )


class MeteredConnection(asyncpg.Connection):  # type: ignore[misc]  # asyncpg is untyped
    """A pooled connection whose JSON decoder spends the budget of the request using it
    (`json_budget`, set by `Connection.fetch` for the statement's duration), as each value
    arrives: concurrent statements of one request share one budget, and once it is spent the
    rest of the rows' JSON is not decoded at all."""

    __slots__ = ("json_budget",)

    def meter(self, budget: list[int] | None) -> None:
        """Spend `budget` while decoding (None: stop)."""
        self.json_budget = budget


async def _init(conn: asyncpg.Connection) -> None:
    conn.json_budget = None

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
    def __init__(self, pool: Pool, *, acquire_timeout: float) -> None:
        self.pool = pool
        self.acquire_timeout = acquire_timeout

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
    ) -> Database:
        """A pool of `max_size` connections. Waiting longer than `acquire_timeout` for one (the
        database saturated) or failing to reach it is `Unavailable`; a statement running
        longer than `statement_timeout` seconds is cancelled by PostgreSQL."""
        dsn = libpq_url(url)

        async def connect() -> asyncpg.Connection:
            conn = await asyncpg.connect(
                dsn,
                connection_class=MeteredConnection,
                statement_cache_size=512,
                timeout=connect_timeout,
                server_settings={
                    "statement_timeout": str(int(statement_timeout * 1000)),
                    # Short statements: JIT compiling one costs more (~10 ms) than it saves.
                    "jit": "off",
                },
            )
            try:
                await _init(conn)
            except BaseException:
                conn.terminate()
                raise
            return conn

        pool = Pool(connect, min_size=min(min_size, max_size), max_size=max_size)
        try:
            await pool.start()
        except UNREACHABLE as exc:
            raise Unavailable(f"cannot reach the database: {exc}") from exc
        return cls(pool, acquire_timeout=acquire_timeout)

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
