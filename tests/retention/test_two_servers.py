"""Two real `baton serve` processes with `BATON_RETENTION` on one database: one of them sweeps
at a time, every subject due is removed once, open work stays; and when the sweeping process is
killed (SIGKILL) mid-sweep, the other takes the removal over once the dead one's lease has run
out, and finishes it.

Who removed what is read from the database itself: a trigger of this module's own database
records, for every task or run deleted, the lease's holder as the deleting transaction sees it
(the batch has just renewed the lease to itself in that transaction) and the transaction's id.
A holder names its process (`host:pid:nonce`), which is how the test knows whom to kill.
"""

from __future__ import annotations

import asyncio
import itertools
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg  # type: ignore[import-untyped]
import orjson
import pytest

from baton.protocol.handoff import TaskState
from baton.protocol.pipeline import RunStatus
from baton.services.retention import BATCH
from baton.store.db import Database, libpq_url
from tests.conftest import start_server, stop_server
from tests.retention.conftest import DAY, Place
from tests.runs_helpers import Runs

LEASE = 2.0  # seconds: BATON_RETENTION_LEASE_SECONDS of both servers
HANG = 60.0  # seconds: only a hung build waits this long
FIRST = 6 * BATCH  # finished tasks that fall due together while both servers run
SECOND = 8 * BATCH  # the same again, for the sweep that is cut short

AUDIT = """
CREATE TABLE IF NOT EXISTS retention_audit (
    log text NOT NULL,
    subject text NOT NULL,
    holder text,
    xid bigint NOT NULL,
    at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE OR REPLACE FUNCTION retention_audit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO retention_audit (log, subject, holder, xid)
    VALUES (TG_TABLE_NAME, OLD.id, (SELECT holder FROM retention_sweeper),
        pg_current_xact_id()::text::bigint);
    RETURN OLD;
END $$;
CREATE OR REPLACE TRIGGER retention_audit AFTER DELETE ON tasks
    FOR EACH ROW EXECUTE FUNCTION retention_audit();
CREATE OR REPLACE TRIGGER retention_audit AFTER DELETE ON runs
    FOR EACH ROW EXECUTE FUNCTION retention_audit();
"""


@dataclass(frozen=True)
class Template:
    """A completed task and its events, as rows (JSON), to copy many times over."""

    id: str
    task: str
    events: str
    columns: tuple[str, ...]  # the events' columns to copy (not id: each copy draws its own)

    @property
    def events_per_task(self) -> int:
        return len(orjson.loads(self.events))


@dataclass(frozen=True)
class Work:
    """What must outlive every sweep: open tasks and runs, with their events."""

    tasks: dict[str, tuple[int, int]]  # id: (version, events)
    runs: dict[str, tuple[int, int]]
    done_runs: list[str]  # finished runs, due as soon as the servers look


@dataclass
class Server:
    url: str
    process: subprocess.Popen[bytes]
    log: Path


@dataclass(frozen=True)
class Batch:
    """One transaction that deleted subjects, as the audit saw it."""

    xid: int
    holder: str
    first: datetime
    last: datetime
    subjects: frozenset[str]


@pytest.fixture(scope="module")
async def audit(place: Place) -> None:
    async with place.db.connection() as conn:
        await conn.execute(AUDIT)


@pytest.fixture(scope="module")
async def template(place: Place) -> Template:
    """Read before the servers start, which remove the task a second after it finished."""
    task = await place.world().task_in(TaskState.completed)
    async with place.db.connection() as conn:
        row = await conn.fetchval("SELECT to_jsonb(t)::text FROM tasks t WHERE id = $1", task.id)
        events = await conn.fetchval(
            "SELECT jsonb_agg(to_jsonb(e) - 'id' ORDER BY e.id)::text FROM task_events e "
            "WHERE task_id = $1",
            task.id,
        )
    columns = tuple(key for key in orjson.loads(events)[0] if key != "task_id")
    return Template(task.id, row, events, columns)


@pytest.fixture(scope="module")
async def work(place: Place) -> Work:
    """Open work of every kind, aged far past the period (age does not make it due), and
    finished runs."""
    w = place.world()
    states = (TaskState.requested, TaskState.routed, TaskState.working, TaskState.waiting)
    tasks = [await w.task_in(state) for state in states]
    await place.age("tasks", [t.id for t in tasks], 40 * DAY)
    runs = Runs(place.runs)
    open_runs = [await runs.run_in(RunStatus.in_progress), await runs.run_in(RunStatus.backlog)]
    await place.age("runs", [r.id for r in open_runs], 40 * DAY)
    done = [(await runs.run_in(RunStatus.completed)).id for _ in range(3)]
    return Work(
        await _kept(place.db, "tasks", [t.id for t in tasks]),
        await _kept(place.db, "runs", [r.id for r in open_runs]),
        done,
    )


@pytest.fixture(scope="module")
def servers(
    own_url: str,
    audit: None,
    template: Template,
    work: Work,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[list[Server]]:
    """Two processes that keep finished work one second and look every second or so. The
    last test of the module kills one of them."""
    env = {
        "BATON_DATABASE_URL": own_url,
        "BATON_RETENTION": "1s",
        "BATON_RETENTION_LEASE_SECONDS": f"{LEASE:g}",
        "BATON_LOG_LEVEL": "info",  # each sweep that removed anything says so
        "BATON_DATABASE_POOL_SIZE": "4",  # the database server is shared with other tests
    }
    logs = [tmp_path_factory.mktemp(f"retention-{name}") / "serve.log" for name in "ab"]
    with ThreadPoolExecutor(2) as pool:  # each takes seconds to start on a busy machine
        starting = [pool.submit(start_server, env, log) for log in logs]
    started = [
        Server(*f.result(), log)
        for f, log in zip(starting, logs, strict=True)
        if f.exception() is None
    ]
    try:
        assert len(started) == 2, [f.exception() for f in starting]
        yield started
    finally:
        for server in started:
            stop_server(server.process)


async def test_two_servers_sweep_one_at_a_time_and_remove_each_due_subject_once(
    servers: list[Server], place: Place, template: Template, work: Work
) -> None:
    # The servers look by themselves: what was due when they started goes.
    await _until_gone(place.db, [template.id, *work.done_runs])
    before = await _removed(place.db)
    due = await _clone(place.db, template, "first-", FIRST)
    await _until_gone(place.db, due)
    batches = await _batches(place.db, due)
    # One process removed them all, in one sweep: full batches, one after the other, each
    # under the lease of the same holder; the other process removed none of them.
    assert len({b.holder for b in batches}) == 1, [(b.holder, b.first) for b in batches]
    assert _pid(batches[0].holder) in {s.process.pid for s in servers}
    assert [len(b.subjects) for b in batches] == [BATCH] * (FIRST // BATCH)
    assert all(a.last < b.first for a, b in itertools.pairwise(batches))
    # Each removed once (`_batches`), and counted once: the logs' counters moved by that much.
    after = await _removed(place.db)
    assert after["tasks"] - before["tasks"] == FIRST
    assert after["task_events"] - before["task_events"] == FIRST * template.events_per_task
    await _still_there(place.db, work)


async def test_a_sweeper_killed_mid_sweep_is_taken_over_once_its_lease_runs_out(
    servers: list[Server], place: Place, template: Template, work: Work
) -> None:
    assert all(s.process.poll() is None for s in servers)
    before = await _removed(place.db)
    watch = await asyncpg.connect(libpq_url(place.url))
    try:
        due = await _clone(place.db, template, "second-", SECOND)
        newest = await watch.fetchval(
            "SELECT max(id) FROM task_events WHERE task_id = ANY($1::text[])", due
        )
        # Kill whoever sweeps as soon as its first batch has committed (the counter moved, in
        # that batch's transaction): the lease names it. It then waits between two batches.
        deadline = time.monotonic() + HANG
        while await watch.fetchval(_REMOVED_TASKS) == before["tasks"]:
            assert time.monotonic() < deadline, "nobody swept"
            await asyncio.sleep(0.002)
        holder = await watch.fetchval("SELECT holder FROM retention_sweeper")
        (dead,) = (s for s in servers if s.process.pid == _pid(holder))
        dead.process.send_signal(signal.SIGKILL)
        killed_at = await watch.fetchval("SELECT now()")
        dead.process.wait(timeout=10)
        left = await _left(watch, due)
        lease = await watch.fetchrow("SELECT holder, held_until FROM retention_sweeper")
    finally:
        await watch.close()
    # Cut short mid-sweep: some removed, some left, and the dead process's lease still held.
    assert 0 < left < SECOND, left
    assert lease["holder"] == holder and lease["held_until"] > killed_at
    (survivor,) = (s for s in servers if s is not dead)
    said_from = survivor.log.stat().st_size
    await _until_gone(place.db, due)
    batches = await _batches(place.db, due)
    theirs = [b for b in batches if b.holder == holder]
    heirs = [b for b in batches if b.holder != holder]
    # The dead process's batches all came before its death; the survivor's only once the
    # dead one's lease had run out, and they removed exactly what was left.
    assert theirs and max(b.last for b in theirs) < killed_at
    assert heirs and {_pid(b.holder) for b in heirs} == {survivor.process.pid}
    assert min(b.first for b in heirs) >= lease["held_until"], (heirs[0].first, lease)
    assert sum(len(b.subjects) for b in theirs) == SECOND - left
    assert sum(len(b.subjects) for b in heirs) == left
    # Counted once; the floor is the newest event removed; the survivor says what it did.
    after = await _removed(place.db)
    assert after["tasks"] - before["tasks"] == SECOND
    assert after["task_events"] - before["task_events"] == SECOND * template.events_per_task
    assert after["task_floor"] == newest
    assert await _said(survivor, said_from) == left
    await _still_there(place.db, work)


# --- helpers -----------------------------------------------------------------------------------


async def _clone(db: Database, template: Template, prefix: str, count: int) -> list[str]:
    """`count` copies of the template, finished an hour ago, in one transaction (so they fall
    due at once), with the guards off (they allow moves only)."""
    finished = datetime.now(UTC) - timedelta(hours=1)
    columns = ", ".join(f'"{c}"' for c in template.columns)
    picked = ", ".join(f'e."{c}"' for c in template.columns)
    async with db.transaction() as conn:
        await conn.execute("SET LOCAL session_replication_role = replica")
        await conn.execute(
            "INSERT INTO tasks SELECT (jsonb_populate_record(NULL::tasks, $1::text::jsonb "
            "|| jsonb_build_object('id', $2::text || lpad(i::text, 5, '0'), "
            "'created_at', $3::timestamptz, 'updated_at', $3::timestamptz))).* "
            "FROM generate_series(1, $4::int) AS i",
            template.task,
            prefix,
            finished,
            count,
        )
        # Ids drawn by the column's default, in the order of the copies.
        await conn.execute(
            f"INSERT INTO task_events (task_id, {columns}) "
            f"SELECT $1::text || lpad(i::text, 5, '0'), {picked} "
            "FROM generate_series(1, $2::int) AS i, "
            "jsonb_populate_recordset(NULL::task_events, $3::text::jsonb) AS e "
            "ORDER BY i, e.version",
            prefix,
            count,
            template.events,
        )
    return [f"{prefix}{i:05d}" for i in range(1, count + 1)]


async def _kept(db: Database, table: str, ids: list[str]) -> dict[str, tuple[int, int]]:
    events, subject = ("task_events", "task_id") if table == "tasks" else ("run_events", "run_id")
    rows = await db.fetch(
        f"SELECT s.id, s.version, (SELECT count(*) FROM {events} e WHERE e.{subject} = s.id) "
        f"AS events FROM {table} s WHERE s.id = ANY($1::text[])",
        ids,
    )
    return {r["id"]: (r["version"], r["events"]) for r in rows}


async def _still_there(db: Database, work: Work) -> None:
    assert await _kept(db, "tasks", list(work.tasks)) == work.tasks
    assert await _kept(db, "runs", list(work.runs)) == work.runs


async def _said(server: Server, offset: int) -> int:
    """The tasks `server`'s log says it removed past `offset`, once its sweep has ended (it
    says so after its last batch, which found nothing more)."""
    deadline = time.monotonic() + HANG
    while not (said := re.findall(_SAID, server.log.read_text()[offset:])):
        assert time.monotonic() < deadline, "the survivor never said what it removed"
        await asyncio.sleep(0.05)
    return sum(int(n) for n in said)


_SAID = r"retention: removed (\d+) tasks"
_REMOVED_TASKS = "SELECT removed_subjects FROM retention_floors WHERE log = 'task_events'"


async def _left(conn: asyncpg.Connection, ids: list[str]) -> int:
    return int(await conn.fetchval("SELECT count(*) FROM tasks WHERE id = ANY($1::text[])", ids))


async def _until_gone(db: Database, ids: list[str]) -> None:
    deadline = time.monotonic() + HANG
    while True:
        left = await db.fetchval(
            "SELECT (SELECT count(*) FROM tasks WHERE id = ANY($1::text[])) "
            "+ (SELECT count(*) FROM runs WHERE id = ANY($1::text[]))",
            ids,
        )
        if left == 0:
            return
        assert time.monotonic() < deadline, f"{left} due subjects were never removed"
        await asyncio.sleep(0.05)


async def _removed(db: Database) -> dict[str, int]:
    """The task log's counters of removed subjects and events, and its floor."""
    rows = {r["log"]: r for r in await db.fetch("SELECT * FROM retention_floors")}
    return {
        "tasks": rows["task_events"]["removed_subjects"],
        "task_events": rows["task_events"]["removed_events"],
        "task_floor": rows["task_events"]["floor"],
    }


async def _batches(db: Database, ids: list[str]) -> list[Batch]:
    rows = await db.fetch(
        "SELECT xid, min(holder) AS holder, count(DISTINCT holder) AS holders, "
        "min(at) AS first, max(at) AS last, array_agg(subject) AS subjects "
        "FROM retention_audit WHERE subject = ANY($1::text[]) GROUP BY xid ORDER BY first",
        ids,
    )
    assert all(r["holders"] == 1 for r in rows)  # a transaction sees one holder
    # Every one of `ids` deleted, each by one transaction.
    assert sorted(s for r in rows for s in r["subjects"]) == sorted(ids)
    return [
        Batch(r["xid"], r["holder"], r["first"], r["last"], frozenset(r["subjects"])) for r in rows
    ]


def _pid(holder: str) -> int:
    """The process a lease holder names (`host:pid:nonce`)."""
    return int(holder.split(":")[-2])
