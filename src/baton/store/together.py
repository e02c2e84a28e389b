"""Guarded changes that arrive together, written in one transaction.

Alone, every change is a transaction of its own: a round trip, a commit, a backend woken for
one row. Under load the requests of one process make the same change at once (one statement
text, one principal, different subjects), and PostgreSQL's CPU per change, not the statement,
bounds the rate. `Together` lets up to `LANES` changes of a kind be in flight at once: one that
finds a lane free runs alone, exactly as before; those that arrive while every lane is busy wait
for the next free lane and go in one transaction, at most `MOST` at a time:

1. one statement takes the advisory lock of every waiting subject the principal may see, in id
   order: before the transaction's first write, so its id still follows that of every earlier
   writer of each subject (`baton.store.eventlog`), and a subject the principal may not see is
   not locked, as alone;
2. the changes, pipelined (asyncpg's `fetchmany`: one round trip, one commit for all).

The price: a change that waits, waits for the changes ahead of it, and one that goes together
commits when the slowest of its batch does (a task another transaction holds delays the batch,
within the statement timeout). Only one principal's changes of one kind share a lane.

A change whose guard fails writes nothing and gets None, as alone. A change never waits for a
batch unless every lane is busy, so one request at a time pays nothing. When PostgreSQL refuses
the transaction (a statement's error, a deadlock), each of its changes is made again alone, so
a change's error is only its own; when the connection is lost, each gets that error, as alone.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import asyncpg

from baton.access.principals import Principal
from baton.errors import TooMuchWork, Unavailable
from baton.metrics import DB_STATEMENTS
from baton.store.db import Database

# Changes of one kind in flight at once (alone or together) before others wait. One lane
# measured best under load (`bench.append`, c=64: 4,100 moves/s, against 3,700 with two lanes
# and 3,300 with four, where every further transaction costs PostgreSQL a commit again).
LANES = 1
# Changes in one transaction, at most: the transaction holds every one's locks until it ends.
MOST = 64

# SQL (and its parameters) that takes the advisory locks of the subjects `principal` may see.
Locker = Callable[[Principal, Sequence[str]], tuple[str, list[Any]]]
Row: TypeAlias = asyncpg.Record | None


@dataclass
class _Waiting:
    subject: str
    args: Sequence[Any]
    done: asyncio.Future[Row]


@dataclass
class _Kind:
    """The changes of one statement text and principal: lanes in use, and who waits."""

    running: int = 0
    waiting: list[_Waiting] = field(default_factory=list)


class Together:
    def __init__(self, db: Database, lock: Locker, *, subject_column: str = "id") -> None:
        self.db = db
        self._lock = lock
        self._column = subject_column  # the column of a change's row that names its subject
        self._kinds: dict[tuple[str, Principal], _Kind] = {}
        self._batches: set[asyncio.Task[None]] = set()

    async def fetchrow(
        self, sql: str, args: Sequence[Any], subject: str, principal: Principal
    ) -> Row:
        """The row of change `sql` with `args` on `subject`, made by `principal`: alone when a
        lane is free, else with the changes of the same kind that wait beside it."""
        key = (sql, principal)
        kind = self._kinds.get(key)
        if kind is None:
            kind = self._kinds[key] = _Kind()
        if kind.running < LANES:
            kind.running += 1
            try:
                async with self.db.connection() as conn:
                    return await conn.fetchrow(sql, *args)
            finally:
                self._next(key, kind)
        waiting = _Waiting(subject, args, asyncio.get_running_loop().create_future())
        kind.waiting.append(waiting)
        return await waiting.done

    def _next(self, key: tuple[str, Principal], kind: _Kind) -> None:
        """A lane is free: the changes that wait go together in it, or it closes."""
        kind.waiting = [w for w in kind.waiting if not w.done.done()]  # callers gone
        if not kind.waiting:
            kind.running -= 1
            if not kind.running:
                del self._kinds[key]
            return
        batch: list[_Waiting] = []
        subjects: set[str] = set()
        later: list[_Waiting] = []
        for waiting in kind.waiting:
            # One change per subject in a transaction; a second waits for the next, in order.
            if len(batch) < MOST and waiting.subject not in subjects:
                batch.append(waiting)
                subjects.add(waiting.subject)
            else:
                later.append(waiting)
        kind.waiting = later
        task = asyncio.create_task(self._together(key, kind, batch))
        self._batches.add(task)
        task.add_done_callback(self._batches.discard)

    async def _together(
        self, key: tuple[str, Principal], kind: _Kind, batch: list[_Waiting]
    ) -> None:
        sql, principal = key
        try:
            batch = [w for w in batch if not w.done.done()]  # a caller gone makes no change
            if not batch:
                return
            if len(batch) == 1:
                await self._alone(sql, batch)  # one statement, no transaction around it
                return
            batch.sort(key=lambda w: w.subject)  # the order the locks are taken in
            try:
                rows = await self._write(sql, principal, batch)
            except (asyncpg.PostgresError, TooMuchWork):
                await self._alone(sql, batch)  # the transaction was rolled back
                return
            except Exception as exc:
                for waiting in batch:
                    _fail(waiting, exc)
                return
            for waiting in batch:
                if not waiting.done.done():
                    waiting.done.set_result(rows.get(waiting.subject))
        except BaseException as exc:  # cancelled (the server stops): nobody waits for ever
            for waiting in [*batch, *kind.waiting]:
                _fail(waiting, Unavailable(f"the change was not made ({exc!r})"))
            kind.waiting = []
            raise
        finally:
            self._next(key, kind)

    async def _write(
        self, sql: str, principal: Principal, batch: list[_Waiting]
    ) -> dict[str, asyncpg.Record]:
        lock, lock_args = self._lock(principal, [w.subject for w in batch])
        async with self.db.connection() as conn, conn.raw.transaction():
            DB_STATEMENTS.inc(3 + len(batch))  # BEGIN, the locks, the changes, COMMIT
            await conn.raw.execute(lock, *lock_args)
            rows = await conn.raw.fetchmany(sql, [w.args for w in batch])
        return {row[self._column]: row for row in rows}

    async def _alone(self, sql: str, batch: list[_Waiting]) -> None:
        for waiting in batch:
            if waiting.done.done():
                continue
            try:
                async with self.db.connection() as conn:
                    row = await conn.fetchrow(sql, *waiting.args)
            except Exception as exc:
                _fail(waiting, exc)
            else:
                if not waiting.done.done():
                    waiting.done.set_result(row)


def _fail(waiting: _Waiting, exc: BaseException) -> None:
    if not waiting.done.done():
        waiting.done.set_exception(exc)
    with contextlib.suppress(asyncio.CancelledError, Exception):
        waiting.done.exception()  # retrieved: a caller gone does not log "never retrieved"
