"""The request path's connection pool (`baton.store.pool`), on real PostgreSQL connections:
what it lends, to whom it hands a returned connection, what it throws away, and how it closes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import asyncpg
import pytest

from baton.errors import Unavailable
from baton.store.db import Database, libpq_url
from baton.store.pool import Pool, PoolClosing


class Opened:
    """A pool's `connect`, counting the connections it opens."""

    def __init__(self, url: str) -> None:
        self.url = libpq_url(url)
        self.count = 0

    async def __call__(self) -> asyncpg.Connection:
        self.count += 1
        return await asyncpg.connect(self.url)


@pytest.fixture
def opened(database_url: str) -> Opened:
    return Opened(database_url)


@pytest.fixture
async def pool(opened: Opened) -> AsyncIterator[Pool]:
    pool = Pool(opened, min_size=1, max_size=2)
    await pool.start()
    yield pool
    await pool.close(grace=2)


async def test_a_returned_connection_is_lent_again_without_opening_another(
    pool: Pool, opened: Opened
) -> None:
    first = await pool.acquire(1)
    pool.release(first)
    again = await pool.acquire(1)
    assert again is first
    assert await again.fetchval("select 1") == 1
    pool.release(again)
    assert (opened.count, pool.size, pool.idle) == (1, 1, 1)


async def test_past_max_size_callers_wait_and_are_handed_connections_in_arrival_order(
    pool: Pool, opened: Opened
) -> None:
    held = [await pool.acquire(1), await pool.acquire(1)]
    order: list[int] = []

    async def take(n: int) -> asyncpg.Connection:
        conn = await pool.acquire(5)
        order.append(n)
        return conn

    waiting = [asyncio.create_task(take(n)) for n in range(2)]
    await asyncio.sleep(0.05)
    assert order == []  # both wait: the pool is at its size
    for conn in held:
        pool.release(conn)
    got = await asyncio.gather(*waiting)
    assert order == [0, 1]
    assert set(got) == set(held)
    assert opened.count == 2
    for conn in got:
        pool.release(conn)


async def test_a_caller_that_waits_too_long_gets_timeout_and_takes_no_place(pool: Pool) -> None:
    held = [await pool.acquire(1), await pool.acquire(1)]
    with pytest.raises(TimeoutError):
        await pool.acquire(0.05)
    pool.release(held[0])
    assert await pool.acquire(0.05) is held[0]  # the abandoned wait was skipped
    for conn in held:
        pool.release(conn)
    assert (pool.size, pool.idle) == (2, 2)


async def test_a_connection_handed_over_as_its_taker_gives_up_goes_back_to_the_pool(
    pool: Pool,
) -> None:
    held = [await pool.acquire(1), await pool.acquire(1)]
    taker = asyncio.create_task(pool.acquire(5))
    await asyncio.sleep(0.01)  # waiting
    pool.release(held[0])  # handed to the taker, which has not run yet
    taker.cancel()
    with pytest.raises(asyncio.CancelledError):
        await taker
    assert pool.idle == 1
    assert await pool.acquire(0.05) is held[0]
    for conn in held:
        pool.release(conn)


async def test_a_connection_not_reusable_is_terminated_and_its_place_goes_to_a_waiter(
    pool: Pool, opened: Opened
) -> None:
    held = [await pool.acquire(1), await pool.acquire(1)]
    taker = asyncio.create_task(pool.acquire(5))
    await asyncio.sleep(0.01)
    pool.release(held[0], reusable=False)
    fresh = await taker
    assert held[0].is_closed()
    assert fresh is not held[0] and opened.count == 3
    assert await fresh.fetchval("select 2") == 2
    pool.release(fresh)
    pool.release(held[1])
    assert (pool.size, pool.idle) == (2, 2)


async def test_a_connection_returned_inside_a_transaction_is_not_lent_again(pool: Pool) -> None:
    conn = await pool.acquire(1)
    await conn.execute("begin")
    pool.release(conn)
    assert conn.is_closed()
    other = await pool.acquire(1)
    assert other is not conn and not other.is_in_transaction()
    pool.release(other)


async def test_a_connection_the_server_closed_while_idle_is_skipped(
    pool: Pool, database_url: str
) -> None:
    conn = await pool.acquire(1)
    pid = conn.get_server_pid()
    pool.release(conn)
    admin = await asyncpg.connect(libpq_url(database_url))
    try:
        await admin.execute("select pg_terminate_backend($1)", pid)
    finally:
        await admin.close()
    for _ in range(100):  # until the client sees the connection end
        if conn.is_closed():
            break
        await asyncio.sleep(0.01)
    fresh = await pool.acquire(1)
    assert fresh.get_server_pid() != pid
    assert await fresh.fetchval("select 3") == 3
    pool.release(fresh)
    assert pool.size == 1


async def test_closing_refuses_waiters_closes_what_comes_back_and_does_not_wait_past_grace(
    opened: Opened,
) -> None:
    pool = Pool(opened, min_size=2, max_size=2)
    await pool.start()
    returned, kept = await pool.acquire(1), await pool.acquire(1)
    waiter = asyncio.create_task(pool.acquire(5))
    await asyncio.sleep(0.01)
    closing = asyncio.create_task(pool.close(grace=0.3))
    with pytest.raises(PoolClosing):
        await waiter
    pool.release(returned)
    loop = asyncio.get_running_loop()
    started = loop.time()
    await closing  # `kept` never comes back
    assert loop.time() - started < 1
    assert returned.is_closed() and kept.is_closed()
    with pytest.raises(PoolClosing):
        await pool.acquire(1)


async def test_connections_idle_too_long_are_closed_down_to_min_size(opened: Opened) -> None:
    pool = Pool(opened, min_size=1, max_size=3, idle_lifetime=0.05, reap_every=0.05)
    await pool.start()
    lent = [await pool.acquire(1) for _ in range(3)]
    for conn in lent:
        pool.release(conn)
    assert pool.size == 3
    for _ in range(100):
        if pool.size == 1:
            break
        await asyncio.sleep(0.02)
    assert (pool.size, pool.idle) == (1, 1)
    survivor = await pool.acquire(1)
    assert await survivor.fetchval("select 4") == 4
    pool.release(survivor)
    await pool.close(grace=1)


async def test_a_statement_cancelled_mid_way_does_not_leave_its_connection_in_the_pool(
    database_url: str,
) -> None:
    db = await Database.connect(database_url, min_size=1, max_size=1)
    try:
        async with db.connection() as conn:
            busy = conn.raw

        async def sleep() -> None:
            async with db.connection() as conn:
                await conn.fetch("select pg_sleep(5)")

        task = asyncio.create_task(sleep())
        await asyncio.sleep(0.2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert busy.is_closed()
        async with db.connection() as conn:
            assert conn.raw is not busy
            assert await conn.fetchval("select 5") == 5
    finally:
        await db.close()


async def test_a_database_error_leaves_the_connection_reusable(database_url: str) -> None:
    db = await Database.connect(database_url, min_size=1, max_size=1)
    try:
        with pytest.raises(asyncpg.UndefinedTableError):
            async with db.connection() as conn:
                used = conn.raw
                await conn.fetch("select * from no_such_table")
        async with db.connection() as conn:
            assert conn.raw is used
    finally:
        await db.close()


async def test_an_unreachable_database_is_unavailable_at_start() -> None:
    with pytest.raises(Unavailable):
        await Database.connect("postgresql://postgres@127.0.0.1:1/none", connect_timeout=2)
