"""Retention of finished work (`BATON_RETENTION`): what is removed and when, and the cursors it
leaves behind.

With a period set, every `baton serve` process looks now and then (`Retention.run`) whether
finished work is due; one of them at a time (the lease of `baton.store.retention`) removes every
task and run that reached a terminal state longer ago than the period, in batches of
`batch` subjects, one short transaction each, pausing between batches `pace` times as long as
the last one took, so moves never queue behind it. Once it has removed a hundredth of a table's
rows since it last vacuumed it, it vacuums it, as autovacuum would (throttled, skipping a table
another vacuum holds), so their space is reused by what is written next instead of the files
growing (autovacuum would wait for a fifth of the table).

Open work is never removed, however old; nor a finished task that a run names or an open task
depends on. A removed task's id is free again: a hand-off with the same client id makes a new
task.

Cursors: every removed event's id is at most its log's floor. A stream asked to start after an
id below the floor would skip removed events, so it is refused with `CursorExpired`, which
names the floor, the oldest cursor still valid (`check_cursor`; the event hub checks every
replay itself). A cursor over one subject's own events needs no check: a subject's events are
removed only with it (a removed one is simply not found).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import socket
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import asyncpg
from prometheus_client import Counter

from baton.errors import BatonError, CursorExpired
from baton.metrics import REGISTRY
from baton.store import retention as store
from baton.store.db import Database, libpq_url
from baton.store.eventlog import floor
from baton.store.lifecycle import Layout
from baton.store.runs import RUNS
from baton.store.tasks import TASKS

log = logging.getLogger("baton.retention")

BATCH = 200  # subjects removed per transaction (about 20 ms for 200 tasks and their events)
# Between two batches the sweep waits PACE times as long as the last one took, at least
# MIN_PAUSE seconds: it takes at most a quarter of one core of the database (beside a full load
# of moves, 6,200 events a second in bench.retention: a day at 100 moves a second in 25 min).
PACE = 3.0
MIN_PAUSE = 0.005
# The sweeper's lease, renewed by every batch: when its holder dies mid-sweep, another
# process takes the sweep over this long after the last batch (BATON_RETENTION_LEASE_SECONDS).
LEASE_SECONDS = 60.0
# A table is vacuumed once the rows this process removed from it since its last vacuum reach
# this share of its rows (and this many at least): what is freed is reused soon, and a sweep
# of a few rows does not scan a large table's indexes.
VACUUM_SHARE = 0.01
VACUUM_ROWS = 1000
LOGS = {"task": TASKS, "run": RUNS}

REMOVED = Counter(
    "baton_retention_removed",
    "Finished tasks and runs (subjects), their events and their webhook deliveries removed "
    "by this process's sweeps, by log.",
    ["log", "kind"],
    registry=REGISTRY,
)


def sweep_every(keep_seconds: float) -> float:
    """How often a process looks for finished work due: a tenth of the period, 1 s to 60 s."""
    return min(60.0, max(1.0, keep_seconds / 10))


@dataclass
class Swept:
    """What one sweep removed, per log (`task`, `run`)."""

    subjects: dict[str, int] = field(default_factory=lambda: {"task": 0, "run": 0})
    events: dict[str, int] = field(default_factory=lambda: {"task": 0, "run": 0})
    deliveries: int = 0
    batches: int = 0
    floors: dict[str, int] = field(default_factory=dict)

    def add(self, name: str, removed: store.Removed) -> None:
        self.subjects[name] += removed.subjects
        self.events[name] += removed.events
        self.deliveries += removed.deliveries
        self.batches += 1
        self.floors[name] = removed.floor
        REMOVED.labels(log=name, kind="subjects").inc(removed.subjects)
        REMOVED.labels(log=name, kind="events").inc(removed.events)
        REMOVED.labels(log=name, kind="deliveries").inc(removed.deliveries)

    @property
    def anything(self) -> bool:
        return any(self.subjects.values())

    def rows(self) -> dict[str, int]:
        """The rows deleted, by table (a run's lease counted with its run)."""
        found: dict[str, int] = {}
        for name, layout in LOGS.items():
            found[layout.events] = self.events[name]
            found[layout.table] = self.subjects[name]
        found["run_leases"] = self.subjects["run"]
        found["webhook_deliveries"] = self.deliveries
        return {table: rows for table, rows in found.items() if rows}

    def tables(self) -> list[str]:
        """The tables rows were deleted from."""
        return list(self.rows())


class Retention:
    """The retention period (None: keep everything), the sweep, and the cursor check."""

    def __init__(
        self,
        db: Database,
        keep_seconds: float | None,
        *,
        url: str | None = None,
        batch: int = BATCH,
        pace: float = PACE,
        min_pause: float = MIN_PAUSE,
        holder: str | None = None,
        lease_seconds: float = LEASE_SECONDS,
    ) -> None:
        self.db = db
        self.keep_seconds = keep_seconds
        # Where to open the vacuum's own connection (None: no vacuum after a sweep).
        self.url = url
        self.batch = batch
        self.pace = pace
        self.min_pause = min_pause
        self.lease_seconds = lease_seconds
        # Names this process's lease; new on every start, as the webhook worker's.
        self.holder = holder or f"{socket.gethostname()}:{os.getpid()}:{os.urandom(4).hex()}"
        # Rows this process removed from each table since it last vacuumed it.
        self.unvacuumed: dict[str, int] = {}

    # --- cursors --------------------------------------------------------------------------

    async def oldest_kept_cursor(self, log_name: str) -> int:
        """The oldest cursor a stream over the whole `log_name` log (`task`, `run`) may start
        after: every event removed from it has an id at most this. 0 while none was."""
        async with self.db.connection() as conn:
            return await floor(conn, LOGS[log_name].events)

    async def check_cursor(self, log_name: str, cursor: int) -> None:
        """`CursorExpired` (naming the oldest valid cursor) if events after `cursor` in the
        `log_name` log may have been removed. Call it after reading what it guards (the floor
        only rises), or before, and again after, a read that spans several statements."""
        oldest = await self.oldest_kept_cursor(log_name)
        if cursor < oldest:
            raise CursorExpired(log_name, cursor, oldest)

    # --- sweeping -------------------------------------------------------------------------

    async def run(self) -> None:
        """Sweep now and then for as long as the process runs (a period must be set)."""
        assert self.keep_seconds is not None
        every = sweep_every(self.keep_seconds)
        while True:
            # Jittered, so processes started together do not all try the lease at once.
            await asyncio.sleep(every * random.uniform(0.5, 1.0))
            try:
                await self.sweep()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the database being away must not stop retention
                log.warning("retention: sweep failed (%s)", exc)

    async def sweep(self, now: datetime | None = None) -> Swept | None:
        """Remove what finished before `now` less the period; None when there is no period or
        another process sweeps (holds the lease)."""
        if self.keep_seconds is None:
            return None
        if not await store.claim(self.db, self.holder, self.lease_seconds):
            return None
        cutoff = (now or datetime.now(UTC)) - timedelta(seconds=self.keep_seconds)
        swept = Swept()
        try:
            for name in ("run", "task"):  # runs first: a removed run no longer keeps its task
                if not await self._sweep(LOGS[name], name, cutoff, swept):
                    break
        finally:
            with contextlib.suppress(Exception):
                await asyncio.shield(store.release(self.db, self.holder))
        if swept.anything:
            log.info(
                "retention: removed %d tasks (%d events) and %d runs (%d events) that finished "
                "before %s",
                swept.subjects["task"],
                swept.events["task"],
                swept.subjects["run"],
                swept.events["run"],
                cutoff.isoformat(timespec="seconds"),
            )
            if self.url is not None:
                await self._vacuum_due(swept)
        return swept

    async def _vacuum_due(self, swept: Swept) -> None:
        """Vacuum the tables whose removed rows since their last vacuum are due (`VACUUM_SHARE`
        of their rows, `VACUUM_ROWS` at least)."""
        for table, rows in swept.rows().items():
            self.unvacuumed[table] = self.unvacuumed.get(table, 0) + rows
        async with self.db.connection() as conn:
            sizes = await conn.fetch(
                "SELECT relname, reltuples FROM pg_class WHERE relname = ANY($1::text[]) "
                "AND relnamespace = to_regnamespace(current_schema())",
                list(self.unvacuumed),
            )
        rows_of = {r["relname"]: max(0.0, float(r["reltuples"])) for r in sizes}
        due = [
            table
            for table, removed in self.unvacuumed.items()
            if removed >= max(VACUUM_ROWS, VACUUM_SHARE * rows_of.get(table, 0.0))
        ]
        if due:
            await self.vacuum(due)
            for table in due:
                del self.unvacuumed[table]

    async def _sweep(self, layout: Layout, name: str, cutoff: datetime, swept: Swept) -> bool:
        """Remove `layout`'s subjects due, batch by batch; False when the lease was lost."""
        position: tuple[datetime, str] | None = None
        while True:
            started = time.monotonic()
            removed: store.Removed | None = None
            try:
                async with self.db.transaction() as conn:
                    if await store.bound(conn):
                        if not await store.hold(conn, self.holder, self.lease_seconds):
                            log.warning("retention: lost the sweeper's lease; stopping")
                            return False
                        removed = await store.remove_batch(
                            conn, layout, cutoff, self.batch, position
                        )
            except (BatonError, asyncpg.PostgresError) as exc:
                # A lock not had within the lock timeout, or a batch past the statement
                # timeout: nothing of it was done; the next sweep takes it up again.
                log.warning("retention: a batch of %s gave up (%s); later", layout.table, exc)
                return True
            pause = max(self.min_pause, self.pace * (time.monotonic() - started))
            if removed is not None:  # else another process's claim held the lock a moment
                swept.add(name, removed)
                position = removed.position
                if removed.subjects < self.batch:
                    return True
            await asyncio.sleep(pause)

    async def vacuum(self, tables: Iterable[str]) -> None:
        """Vacuum `tables` as autovacuum would (its cost delay), skipping any another vacuum
        holds, on a connection of its own (a vacuum runs outside any transaction, longer than
        a request's statement timeout)."""
        assert self.url is not None
        names = ", ".join(dict.fromkeys(tables))
        try:
            conn = await asyncpg.connect(
                libpq_url(self.url),
                timeout=10,
                server_settings={
                    "statement_timeout": "0",
                    "vacuum_cost_delay": "2",
                    "vacuum_cost_limit": "200",
                },
            )
        except (OSError, asyncpg.PostgresError) as exc:
            log.warning("retention: no connection to vacuum %s (%s)", names, exc)
            return
        try:
            await conn.execute(f"VACUUM (SKIP_LOCKED) {names}")
        except asyncpg.PostgresError as exc:
            log.warning("retention: vacuum of %s failed (%s)", names, exc)
        finally:
            await conn.close()
