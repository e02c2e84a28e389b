"""Guarded changes that arrive together, written in one transaction; reads, in one statement.

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

Reads go the same way (`Lanes`, with what one item makes alone and what several make
together): reads of one task by id that wait for the lane are one `id = ANY(…)` statement
with the same visibility predicate (`baton.store.tasks.read_many`), and pages of one statement
text are one `LATERAL` statement over their parameters (`page_many`). A read that waits starts
after its request did, so it sees every change committed before the request. Every kind is one
principal's: a principal's slow statements hold up its own, never another's. (`bench.compare`
at c=32: W1 4,472 → 7,514 requests a second, W2 2,401 → 2,981.)
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections.abc import Awaitable, Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import asyncpg

from baton.access.principals import Principal
from baton.errors import TooMuchWork, Unavailable
from baton.metrics import DB_STATEMENTS
from baton.store.db import Connection, Database

# Changes of one kind in flight at once (alone or together) before others wait. One lane
# measured best under load (`bench.append`, c=64: 4,100 moves/s, against 3,700 with two lanes
# and 3,300 with four, where every further transaction costs PostgreSQL a commit again).
LANES = 1
# Changes in one transaction, at most: the transaction holds every one's locks until it ends.
MOST = 64

K = TypeVar("K", bound=Hashable)
R = TypeVar("R")

# SQL (and its parameters) that takes the advisory locks of the subjects `principal` may see.
Locker = Callable[[Principal, Sequence[str]], tuple[str, list[Any]]]
# What one item (a subject and its arguments) of kind K makes alone, and what several make.
One = Callable[[Connection, K, str, Any], Awaitable[R | None]]
Many = Callable[[Connection, K, Sequence[tuple[str, Any]]], Awaitable[dict[str, R]]]


@dataclass
class _Waiting(Generic[R]):
    subject: str
    args: Any
    done: asyncio.Future[R | None]


@dataclass
class _Kind(Generic[R]):
    """The items of one kind: lanes in use, and who waits."""

    running: int = 0
    waiting: list[_Waiting[R]] = field(default_factory=list)


class Lanes(Generic[K, R]):
    """Items of one kind run `one` at a time per lane; those that wait run `many` together."""

    def __init__(
        self, db: Database, one: One[K, R], many: Many[K, R], *, once_per_subject: bool
    ) -> None:
        self.db = db
        self._one = one
        self._many = many
        self._once = once_per_subject  # a subject at most once in `many` (the rest wait)
        self._kinds: dict[K, _Kind[R]] = {}
        self._batches: set[asyncio.Task[None]] = set()

    async def run(self, key: K, subject: str, args: Any) -> R | None:
        """What `one` makes of `subject` and `args`: alone when a lane is free, else with the
        items of kind `key` that wait beside it."""
        kind = self._kinds.get(key)
        if kind is None:
            kind = self._kinds[key] = _Kind()
        if kind.running < LANES:
            kind.running += 1
            try:
                async with self.db.connection() as conn:
                    return await self._one(conn, key, subject, args)
            finally:
                self._next(key, kind)
        waiting: _Waiting[R] = _Waiting(subject, args, asyncio.get_running_loop().create_future())
        kind.waiting.append(waiting)
        return await waiting.done

    def _next(self, key: K, kind: _Kind[R]) -> None:
        """A lane is free: the items that wait go together in it, or it closes."""
        kind.waiting = [w for w in kind.waiting if not w.done.done()]  # callers gone
        if not kind.waiting:
            kind.running -= 1
            if not kind.running:
                del self._kinds[key]
            return
        batch: list[_Waiting[R]] = []
        subjects: set[str] = set()
        later: list[_Waiting[R]] = []
        for waiting in kind.waiting:
            # A change per subject in a transaction; a second waits for the next, in order.
            if len(batch) < MOST and not (self._once and waiting.subject in subjects):
                batch.append(waiting)
                subjects.add(waiting.subject)
            else:
                later.append(waiting)
        kind.waiting = later
        # A context of its own: the batch is no one request's (budgets, spans).
        task = asyncio.create_task(self._together(key, kind, batch), context=contextvars.Context())
        self._batches.add(task)
        task.add_done_callback(self._batches.discard)

    async def _together(self, key: K, kind: _Kind[R], batch: list[_Waiting[R]]) -> None:
        try:
            batch = [w for w in batch if not w.done.done()]  # a caller gone makes no change
            if len(batch) <= 1:
                await self._alone(key, batch)  # one statement, no transaction around it
                return
            batch.sort(key=lambda w: w.subject)  # the order locks are taken in
            try:
                async with self.db.connection() as conn:
                    made = await self._many(conn, key, [(w.subject, w.args) for w in batch])
            except (asyncpg.PostgresError, TooMuchWork):
                await self._alone(key, batch)  # the transaction was rolled back
                return
            except Exception as exc:
                for waiting in batch:
                    _fail(waiting, exc)
                return
            for waiting in batch:
                if not waiting.done.done():
                    waiting.done.set_result(made.get(waiting.subject))
        except BaseException as exc:  # cancelled (the server stops): nobody waits for ever
            for waiting in [*batch, *kind.waiting]:
                _fail(waiting, Unavailable(f"the statement was not made ({exc!r})"))
            kind.waiting = []
            raise
        finally:
            self._next(key, kind)

    async def _alone(self, key: K, batch: list[_Waiting[R]]) -> None:
        for waiting in batch:
            if waiting.done.done():
                continue
            try:
                async with self.db.connection() as conn:
                    made = await self._one(conn, key, waiting.subject, waiting.args)
            except Exception as exc:
                _fail(waiting, exc)
            else:
                if not waiting.done.done():
                    waiting.done.set_result(made)


def _fail(waiting: _Waiting[Any], exc: BaseException) -> None:
    if not waiting.done.done():
        waiting.done.set_exception(exc)
    with contextlib.suppress(asyncio.CancelledError, Exception):
        waiting.done.exception()  # retrieved: a caller gone does not log "never retrieved"


ChangeKind = tuple[str, Principal]  # a change's statement text and who makes it


class Together:
    """Guarded changes of one lifecycle's rows, each kind in its lanes."""

    def __init__(self, db: Database, lock: Locker, *, subject_column: str = "id") -> None:
        self._lock = lock
        self._column = subject_column  # the column of a change's row that names its subject
        self.changes: Lanes[ChangeKind, asyncpg.Record] = Lanes(
            db, _change_alone, self._changes, once_per_subject=True
        )

    async def fetchrow(
        self, sql: str, args: Sequence[Any], subject: str, principal: Principal
    ) -> asyncpg.Record | None:
        """The row of change `sql` with `args` on `subject`, made by `principal`."""
        return await self.changes.run((sql, principal), subject, args)

    async def _changes(
        self, conn: Connection, key: ChangeKind, items: Sequence[tuple[str, Any]]
    ) -> dict[str, asyncpg.Record]:
        sql, principal = key
        lock, lock_args = self._lock(principal, [subject for subject, _ in items])
        async with conn.raw.transaction():
            DB_STATEMENTS.inc(3 + len(items))  # BEGIN, the locks, the changes, COMMIT
            await conn.raw.execute(lock, *lock_args)
            rows = await conn.raw.fetchmany(sql, [args for _, args in items])
        return {row[self._column]: row for row in rows}


async def _change_alone(
    conn: Connection, key: ChangeKind, subject: str, args: Any
) -> asyncpg.Record | None:
    return await conn.fetchrow(key[0], *args)
