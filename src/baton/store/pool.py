"""A pool of asyncpg connections whose checkout costs a list pop.

asyncpg's own `Pool` does more per checkout than Baton needs: a proxy object whose every method
call is forwarded through `__getattr__`, a future marking it in use, a timer for the acquire's
timeout, another for the release's, and a task (`asyncio.shield`) for every release, about 30 µs
of a request that takes 500. Baton's use is narrow: short statements, no session state, and a
connection handed back either idle or broken. So here a free connection is a list pop, a
returned one is handed to the oldest waiter or pushed back, and timers run only when a caller
has to wait.

A connection is handed back `reusable` or not. One that is not (the caller was cancelled or
lost the connection during a statement, so the protocol may still be mid-way) is terminated and
its place freed; so is one that comes back closed or inside a transaction. Connections idle for
`idle_lifetime` seconds are closed down to `min_size`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, Final

import asyncpg

log = logging.getLogger(__name__)

# What a waiter is handed when a connection was discarded: its place, to open one in.
_PLACE: Final = object()
REAP_EVERY = 30.0  # seconds between looks for connections idle too long


class PoolClosing(asyncpg.InterfaceError):  # type: ignore[misc]  # asyncpg is untyped
    """The pool is closing: no more connections are lent."""


class Pool:
    """At most `max_size` connections made by `connect`, `min_size` of them kept open."""

    def __init__(
        self,
        connect: Callable[[], Awaitable[asyncpg.Connection]],
        *,
        min_size: int,
        max_size: int,
        idle_lifetime: float = 300.0,
        reap_every: float = REAP_EVERY,
    ) -> None:
        if not 0 <= min_size <= max_size or max_size < 1:
            raise ValueError(f"pool sizes must be 0 <= min ({min_size}) <= max ({max_size}), 1+")
        self._connect = connect
        self.min_size, self.max_size = min_size, max_size
        self.idle_lifetime, self.reap_every = idle_lifetime, reap_every
        self._idle: list[tuple[asyncpg.Connection, float]] = []  # a stack: the warmest on top
        self._open: set[asyncpg.Connection] = set()  # idle or lent
        self._size = 0  # connections open or being opened
        self._waiters: deque[asyncio.Future[Any]] = deque()
        self._closing = False
        self._closing_tasks: set[asyncio.Task[None]] = set()
        self._emptied = asyncio.Event()
        self._reaper: asyncio.TimerHandle | None = None

    @property
    def size(self) -> int:
        """Connections open or being opened."""
        return self._size

    @property
    def idle(self) -> int:
        return len(self._idle)

    async def start(self) -> None:
        """Open `min_size` connections at once; if any fails, close the rest and raise."""
        self._size += self.min_size
        opened = await asyncio.gather(
            *(self._connect() for _ in range(self.min_size)), return_exceptions=True
        )
        failed = [o for o in opened if isinstance(o, BaseException)]
        made = [o for o in opened if not isinstance(o, BaseException)]
        if failed:
            self._size -= self.min_size
            for conn in made:
                conn.terminate()
            raise failed[0]
        now = asyncio.get_running_loop().time()
        self._open.update(made)
        self._idle.extend((conn, now) for conn in made)
        self._arm_reaper()

    async def acquire(self, wait: float) -> asyncpg.Connection:
        """A connection, waiting at most `wait` seconds for one (`TimeoutError`)."""
        idle = self._idle
        while idle:
            conn = idle.pop()[0]
            if not conn.is_closed():
                return conn
            self._forget(conn)
        async with asyncio.timeout(wait):
            return await self._acquire_waiting()

    async def _acquire_waiting(self) -> asyncpg.Connection:
        if self._closing:
            raise PoolClosing("the pool is closing")
        if self._size < self.max_size:
            self._size += 1
            return await self._open_one()
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            got = await waiter
        except BaseException:
            # Handed something just as this caller gave up: pass it on.
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                got = waiter.result()
                if got is _PLACE:
                    self._free_place()
                else:
                    self.release(got)
            else:
                waiter.cancel()  # skipped by whoever hands out next
            raise
        if got is not _PLACE and not got.is_closed():
            return got
        self._open.discard(got)  # a place, or a connection closed on its way here
        return await self._open_one()

    async def _open_one(self) -> asyncpg.Connection:
        """A new connection in a place already counted in `_size`."""
        try:
            conn = await self._connect()
        except BaseException:
            self._free_place()
            raise
        if self._closing:
            conn.terminate()
            self._free_place()
            raise PoolClosing("the pool is closing")
        self._open.add(conn)
        return conn

    def release(self, conn: asyncpg.Connection, *, reusable: bool = True) -> None:
        """Hand `conn` back; not `reusable` (broken, or busy mid-statement): it is terminated."""
        if not reusable or self._closing or conn.is_closed() or conn.is_in_transaction():
            self._discard(conn, graceful=reusable and self._closing)
            return
        waiters = self._waiters
        while waiters:
            waiter = waiters.popleft()
            if not waiter.done():
                waiter.set_result(conn)
                return
        self._idle.append((conn, asyncio.get_running_loop().time()))

    def _discard(self, conn: asyncpg.Connection, *, graceful: bool = False) -> None:
        if not conn.is_closed():
            if graceful:
                task = asyncio.get_running_loop().create_task(self._close_one(conn))
                self._closing_tasks.add(task)
                task.add_done_callback(self._closing_tasks.discard)
                return  # its place is freed once it is closed
            conn.terminate()
        self._forget(conn)

    async def _close_one(self, conn: asyncpg.Connection) -> None:
        try:
            await conn.close(timeout=2)
        except (Exception, asyncio.CancelledError):
            conn.terminate()
        finally:
            self._forget(conn)

    def _forget(self, conn: asyncpg.Connection) -> None:
        """`conn` is closed: it leaves the pool and its place is free."""
        self._open.discard(conn)
        self._free_place()

    def _free_place(self) -> None:
        waiters = self._waiters
        while waiters and not self._closing:
            waiter = waiters.popleft()
            if not waiter.done():
                waiter.set_result(_PLACE)  # the waiter opens a connection in this place
                return
        self._size -= 1
        if self._size == 0:
            self._emptied.set()

    def _arm_reaper(self) -> None:
        if self.idle_lifetime > 0 and not self._closing:
            self._reaper = asyncio.get_running_loop().call_later(self.reap_every, self._reap)

    def _reap(self) -> None:
        """Close connections idle longer than `idle_lifetime`, the longest idle first (the
        stack's bottom), while more than `min_size` are open."""
        cutoff = asyncio.get_running_loop().time() - self.idle_lifetime
        stale = 0
        while (
            stale < len(self._idle)
            and self._idle[stale][1] < cutoff
            and self._size - stale > self.min_size
        ):
            stale += 1
        reaped, self._idle[:stale] = self._idle[:stale], []
        for conn, _ in reaped:
            self._discard(conn, graceful=True)
        self._arm_reaper()

    async def close(self, grace: float) -> None:
        """Lend no more; close idle connections now and lent ones as they come back, waiting at
        most `grace` seconds in all before terminating what is left."""
        self._closing = True
        if self._reaper is not None:
            self._reaper.cancel()
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_exception(PoolClosing("the pool is closing"))
        idle, self._idle = self._idle, []
        for conn, _ in idle:
            self._discard(conn, graceful=True)
        if self._size > 0:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(grace):
                    await self._emptied.wait()
        self.terminate()

    def terminate(self) -> None:
        """Close every connection at once, lent or not."""
        self._closing = True
        if self._reaper is not None:
            self._reaper.cancel()
        for task in list(self._closing_tasks):
            task.cancel()
        for conn in list(self._open):
            conn.terminate()
        self._open.clear()
        self._idle.clear()
