"""Retention under load: moves while a day's worth of finished work is removed, and the tables'
sizes before and after.

    .venv/bin/python -m bench.retention                      # 10 million events over 10 days
    .venv/bin/python -m bench.retention --events 1000000 --duration 10

A fresh database (on `--database-url` / BATON_BENCH_DATABASE_URL, else an embedded PostgreSQL
of its own under /tmp, autovacuum on as a new server has it) migrated by Baton's migrations,
seeded with SQL in the real tables' shapes: `--events` task events over `--days` days, ids in
the order of time, each task with the events of its path (6 for a completed task, 4 for an open
one). The newest hundredth of the tasks is still open (work in progress, assigned to one agent:
the moves' caller), and one task in a thousand of every day besides (work abandoned, open for
ever); the rest completed. Then, in one sitting, against `baton serve`, wrk sending
`saveCheckpoint` (a guarded move appending one task event, the path every move takes) as that
agent, in pairs of windows of `--duration` seconds:

- **moves**: nothing else running; then **moves while removing day N**: the sweep of
  `baton.services.retention` removing the oldest day's finished work (its batches and pauses,
  as a server's sweep makes them), stopped at the window's end (a batch is one transaction:
  nothing is left half done) and started again in the next pair's second window, until the
  day is removed;
- **moves while vacuuming after day N**, the vacuum the sweep runs after such a removal, and a
  window of moves alone after it;

for each of `--removals` days. Then, with nothing else running, three times: the next day
removed, its tables vacuumed, and a day's worth of new finished work written (as the next day
brings), with the sizes of the tables and their indexes after each step: does the freed space
get used, or do the files grow?

It prints every window (rate, p50, p99, each against the window of moves alone before it), the
paired windows' medians, the removals and the sizes, as markdown to stdout; progress goes to
stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg  # type: ignore[import-untyped, unused-ignore]

from baton.access.principals import Principal, PrincipalKind
from baton.access.tokens import create_token
from baton.services.retention import Retention
from baton.store import migrate
from baton.store.db import Database, libpq_url
from bench.compare import wrk
from bench.compare.procs import Process, free_port, start_process, stop, wait_http
from bench.compare.workloads import MARK, Values
from bench.server import bench_database

DAY = 86_400.0
RECENT_SHARE = 100  # the newest hundredth of the tasks is open: work in progress
ABANDONED_EVERY = 1000  # and one task in this many of every day: open for ever
ASSIGNEE = "bench/worker"  # the open tasks' assignee: the moves' caller
PREFIX = "bd_"  # task `bd_000000001`, … in the order of time (as Baton's own ids are)
RANGE_PREFIX = "bd_0"  # wrk's "range" writes 8 digits after its prefix
CHUNK = 100_000  # tasks per seeding transaction
# A completed task's path, and an open (working) task's first four steps of it.
PATH = (
    (1, None, None, "requested"),
    (2, "ROUTE", "requested", "routed"),
    (3, "ACCEPT", "routed", "accepted"),
    (4, "START", "accepted", "working"),
    (5, "SUBMIT_RESULT", "working", "verifying"),
    (6, "COMPLETE", "verifying", "completed"),
)
OPEN_STEPS = 4
SAVE = (
    "mutation($v: ID!, $c: CheckpointInput!) { saveCheckpoint(input: {id: $v, checkpoint: $c}) "
    "{ __typename } }"
)
CHECKPOINT = {
    "progress": "half way",
    "decisions": ["one table"],
    "filesTouched": ["a.py"],
    "nextSteps": [],
    "openQuestions": [],
}
RELATIONS = ("tasks", "task_events")
SPACE_DAYS = 3  # days removed, vacuumed and written again with nothing else running


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --- the seed -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Seeded:
    tasks: int
    open_tasks: int
    events: int
    days: int
    end: datetime  # the newest seeded task finished then; day 1 is `days` days before it
    recent: int  # the newest `recent` tasks are open (the moves' tasks)

    def cutoff(self, day: int) -> datetime:
        """Work that finished before this is days 1 … `day`."""
        return self.end - timedelta(days=self.days - day)


def tasks_for(events: int) -> int:
    """Tasks whose paths make about `events` events."""
    open_share = 1 / RECENT_SHARE + 1 / ABANDONED_EVERY
    per_task = OPEN_STEPS * open_share + len(PATH) * (1 - open_share)
    return max(RECENT_SHARE, round(events / per_task))


def recent_for(tasks: int) -> int:
    return max(1, tasks // RECENT_SHARE)


def _literal(value: str | None) -> str:
    return "NULL" if value is None else f"'{value}'"


_PATHS = ", ".join(
    f"({step}, {_literal(move)}, {_literal(source)}, '{target}')"
    for step, move, source, target in PATH
)
# The rows of tasks $1 … $2 of $4 (the newest ends at $3, one every $6 seconds); tasks from $7
# on are open, and one in ABANDONED_EVERY.
_ROWS = f"""
    WITH s AS (
        SELECT i, i >= $7::bigint OR i % {ABANDONED_EVERY} = 0 AS open,
            $5::text || lpad(i::text, 9, '0') AS id,
            $3::timestamptz - ($4::bigint - i) * $6::float8 * interval '1 second' AS at
        FROM generate_series($1::bigint, $2::bigint) AS i
    )
"""
_TASKS = (
    _ROWS
    + f"""
    INSERT INTO tasks (id, project, state, waiting_on, requester, assignee, requester_owner,
        assignee_owner, deliverable_type, depends_on, packet, result, latest_checkpoint,
        verification, version, input_digest, created_at, updated_at)
    SELECT s.id, 'p' || (s.i % 40), CASE WHEN s.open THEN 'working' ELSE 'completed' END, NULL,
        CASE WHEN s.open THEN 'bench/asker' ELSE 'o' || (s.i % 10) || '/asker' END,
        CASE WHEN s.open THEN '{ASSIGNEE}' ELSE 'o' || (s.i % 10) || '/worker' END,
        CASE WHEN s.open THEN 'bench' ELSE 'o' || (s.i % 10) END,
        CASE WHEN s.open THEN 'bench' ELSE 'o' || (s.i % 10) END,
        'doc', '{{}}'::text[],
        jsonb_build_object('task', 'Write the notes of change ' || s.i, 'deliverable_type', 'doc',
            'acceptance_criteria', jsonb_build_array('covers every change', 'links the issues'),
            'context', 'The release of this week, from the merged pull requests.',
            'files', '[]'::jsonb, 'depends_on', '[]'::jsonb),
        CASE WHEN s.open THEN NULL ELSE jsonb_build_object('summary', 'Done',
            'evidence', jsonb_build_array(jsonb_build_object('kind', 'test_output',
                'summary', 'all green')), 'provenance', 'agent_generated',
            'returned_by', 'o' || (s.i % 10) || '/worker') END,
        NULL, 'AUTO', CASE WHEN s.open THEN {OPEN_STEPS} ELSE {len(PATH)} END,
        md5(s.id), s.at - interval '10 minutes', s.at
    FROM s ORDER BY s.i
    """
)
_EVENTS = (
    _ROWS
    + f"""
    , p(step, move, from_state, to_state) AS (VALUES {_PATHS})
    INSERT INTO task_events (id, task_id, kind, move, from_state, to_state, actor, reason,
        version, at, waiting_on, result, latest_checkpoint)
    SELECT (s.i - 1) * 8 + p.step, s.id, CASE WHEN p.step = 1 THEN 'created' ELSE 'moved' END,
        p.move, p.from_state, p.to_state,
        CASE WHEN p.step <= 2 THEN 'o' || (s.i % 10) || '/asker'
             ELSE 'o' || (s.i % 10) || '/worker' END,
        NULL, p.step, s.at - ({len(PATH)} - p.step) * interval '1 minute', NULL,
        CASE WHEN p.step >= 5 THEN jsonb_build_object('summary', 'Done', 'evidence',
            jsonb_build_array(jsonb_build_object('kind', 'test_output', 'summary', 'all green')),
            'provenance', 'agent_generated') END,
        NULL
    FROM s JOIN p ON p.step <= CASE WHEN s.open THEN {OPEN_STEPS} ELSE {len(PATH)} END
    ORDER BY 1
    """
)


async def seed(conn: asyncpg.Connection, events: int, days: int) -> Seeded:
    """About `events` task events over `days` days ending a minute ago, in the real tables."""
    total = tasks_for(events)
    recent = recent_for(total)
    end = datetime.now(UTC) - timedelta(minutes=1)
    step = days * DAY / total  # seconds between two tasks' ends
    started = time.monotonic()
    await _write(conn, 1, total, (end, total, PREFIX, step, total - recent + 1), started)
    await conn.execute("VACUUM (ANALYZE) tasks, task_events")
    await conn.execute("CHECKPOINT")
    written = await conn.fetchval("SELECT count(*) FROM task_events")
    opened = await conn.fetchval("SELECT count(*) FROM tasks WHERE state = 'working'")
    return Seeded(total, opened, written, days, end, recent)


async def _write(
    conn: asyncpg.Connection, first: int, last: int, rest: tuple[object, ...], started: float
) -> None:
    """Tasks `first` … `last` and their events, a chunk per transaction, with the guards off
    (they allow moves only)."""
    await conn.execute("SET session_replication_role = replica")
    for lo in range(first, last + 1, CHUNK):
        hi = min(last, lo + CHUNK - 1)
        async with conn.transaction():
            await conn.execute(_TASKS, lo, hi, *rest)
            await conn.execute(_EVENTS, lo, hi, *rest)
        rate = (hi - first + 1) / max(time.monotonic() - started, 1e-9)
        log(f"seed: {hi - first + 1:,} of {last - first + 1:,} tasks ({rate:,.0f} tasks/s)")
    await conn.execute("RESET session_replication_role")


async def refill(conn: asyncpg.Connection, seeded: Seeded, day: int) -> int:
    """A day's worth of new tasks finishing now, as the next day brings (one in
    ABANDONED_EVERY left open): ids and times after everything seeded. The events written."""
    per_day = seeded.tasks // seeded.days
    first = seeded.tasks + (day - 1) * per_day + 1
    last = first + per_day - 1
    before = await conn.fetchval("SELECT count(*) FROM task_events")
    rest = (datetime.now(UTC), last, PREFIX, 1.0, last + 1)
    await _write(conn, first, last, rest, time.monotonic())
    return int(await conn.fetchval("SELECT count(*) FROM task_events")) - int(before)


# --- sizes --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sizes:
    """Bytes of each relation's table and of its indexes, and its rows."""

    table: dict[str, int]
    indexes: dict[str, int]
    rows: dict[str, int]


async def sizes(conn: asyncpg.Connection) -> Sizes:
    table, indexes, rows = {}, {}, {}
    for name in RELATIONS:
        table[name] = int(await conn.fetchval("SELECT pg_table_size($1::regclass)", name))
        indexes[name] = int(await conn.fetchval("SELECT pg_indexes_size($1::regclass)", name))
        rows[name] = int(await conn.fetchval(f"SELECT count(*) FROM {name}"))
    return Sizes(table, indexes, rows)


# --- the moves ----------------------------------------------------------------------------------


@dataclass
class Moves:
    phase: str
    rate: float
    p50_ms: float
    p99_ms: float
    requests: int
    seconds: float
    partial: bool = False  # what it ran beside ended within the window


def _lua(token: str, seeded: Seeded) -> str:
    """wrk's script: saveCheckpoint on the newest (open) tasks, each wrk thread on its share."""
    body = json.dumps({"query": SAVE, "variables": {"v": MARK, "c": CHECKPOINT}})
    first = seeded.tasks - seeded.recent + 1
    values = Values("range", prefix=RANGE_PREFIX, first=first, count=seeded.recent)
    return wrk.script(body, token, values, '"MoveSuccess"')


def moves(
    phase: str, wrk_path: str, server: Process, lua: str, folder: Path, args: argparse.Namespace
) -> Moves:
    result = wrk.run(
        wrk_path,
        f"{server.url}/graphql",
        lua,
        folder,
        concurrency=args.concurrency,
        seconds=args.duration,
    )
    if result.errors:
        raise RuntimeError(f"{phase}: {result.errors} moves were not MoveSuccess: {result.sample}")
    log(f"{phase}: {result.rate:,.0f} moves/s, p50 {result.p50_ms:.1f} ms, p99 {result.p99_ms:.1f}")
    return Moves(phase, result.rate, result.p50_ms, result.p99_ms, result.requests, result.seconds)


# --- the sitting --------------------------------------------------------------------------------


@dataclass
class Removal:
    day: int
    subjects: int
    events: int
    seconds: float  # removing, in all (the windows it ran in)
    vacuum_seconds: float = 0.0


@dataclass
class Sitting:
    seeded: Seeded
    moves: list[Moves] = field(default_factory=list)
    removals: list[Removal] = field(default_factory=list)
    sizes: list[tuple[str, Sizes]] = field(default_factory=list)
    settings: list[tuple[str, str]] = field(default_factory=list)

    def pairs(self, kind: str) -> list[tuple[Moves, Moves]]:
        """Each window of `kind` ("removing", "vacuuming") with the window of moves alone
        just before it."""
        found = []
        for alone, other in itertools.pairwise(self.moves):
            if alone.phase == "moves" and kind in other.phase and not other.partial:
                found.append((alone, other))
        return found


Load = tuple[str, Process, str, Path]  # wrk, the server, its script, the folder


async def sitting(url: str, args: argparse.Namespace, folder: Path) -> Sitting:
    conn = await asyncpg.connect(libpq_url(url))
    try:
        settings = [
            (name, str(await conn.fetchval(f"SHOW {name}")))
            for name in ("server_version", "shared_buffers", "autovacuum", "max_wal_size")
        ]
        log(f"seeding {args.events:,} events over {args.days} days")
        started = time.monotonic()
        seeded = await seed(conn, args.events, args.days)
        settings.append(("seed", f"{seeded.events:,} events in {time.monotonic() - started:.0f} s"))
        found = Sitting(seeded, settings=settings)
        found.sizes.append(("seeded", await sizes(conn)))
    finally:
        await conn.close()
    db = await Database.connect(url, min_size=2, max_size=4, acquire_timeout=30)
    try:
        token = await create_token(db, Principal(PrincipalKind.AGENT, ASSIGNEE))
        wrk_path = wrk.ensure_wrk()
        server = _serve(url, args, folder)
        try:
            load: Load = (wrk_path, server, _lua(token, seeded), folder)
            wrk.run(wrk_path, f"{server.url}/graphql", load[2], folder,
                    concurrency=args.concurrency, seconds=3)  # fmt: skip
            for day in range(1, args.removals + 1):
                await _remove(found, db, url, day, load, args)
        finally:
            stop(server)
        for day in range(args.removals + 1, args.removals + 1 + SPACE_DAYS):
            await _space(found, db, url, day, args)
    finally:
        await db.close()
    return found


async def _removed(db: Database) -> tuple[int, int]:
    """Tasks and task events removed so far (`retention_floors`)."""
    row = await db.fetchrow(
        "SELECT removed_subjects, removed_events FROM retention_floors WHERE log = 'task_events'"
    )
    assert row is not None
    return int(row[0]), int(row[1])


async def _remove(
    found: Sitting, db: Database, url: str, day: int, load: Load, args: argparse.Namespace
) -> None:
    """Remove day `day`'s finished work in windows paired with windows of moves alone; then
    vacuum, likewise."""
    sweeper = _retention(found.seeded, db, None, day, args)
    before = await _removed(db)
    removing = 0.0
    while True:
        found.moves.append(await asyncio.to_thread(moves, "moves", *load, args))
        started = time.monotonic()
        sweeping = asyncio.create_task(sweeper.sweep())
        window = await asyncio.to_thread(moves, f"moves while removing day {day}", *load, args)
        done = sweeping.done()
        if not done:  # stopped between two statements of a batch at worst: it rolls back
            sweeping.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sweeping
        removing += time.monotonic() - started if not done else window.seconds
        window.partial = done  # the removal ended within the window
        found.moves.append(window)
        if done:
            break
    after = await _removed(db)
    removal = Removal(day, after[0] - before[0], after[1] - before[1], removing)
    found.removals.append(removal)
    log(f"removed day {day}: {removal.subjects:,} tasks, {removal.events:,} events")
    tables = ["task_events", "tasks"]
    started = time.monotonic()
    vacuuming = asyncio.create_task(_retention(found.seeded, db, url, day, args).vacuum(tables))
    window = await asyncio.to_thread(moves, f"moves while vacuuming after day {day}", *load, args)
    await vacuuming
    removal.vacuum_seconds = time.monotonic() - started
    window.partial = removal.vacuum_seconds < window.seconds
    found.moves.append(window)
    found.moves.append(await asyncio.to_thread(moves, "moves", *load, args))


async def _space(
    found: Sitting, db: Database, url: str, day: int, args: argparse.Namespace
) -> None:
    """With nothing else running: remove day `day`, vacuum, write a day's new work; the sizes
    after each step."""
    conn = await asyncpg.connect(libpq_url(url))
    try:
        if len(found.sizes) == 1:
            await conn.execute("VACUUM (ANALYZE) tasks, task_events")  # what the moves left
            found.sizes.append(("moves done", await sizes(conn)))
        before = await _removed(db)
        started = time.monotonic()
        # Nothing else runs: no pause between batches.
        swept = await _retention(found.seeded, db, None, day, args, pace=0.0).sweep()
        assert swept is not None
        after = await _removed(db)
        removal = Removal(day, after[0] - before[0], after[1] - before[1], 0.0)
        removal.seconds = time.monotonic() - started
        found.removals.append(removal)
        await conn.execute("ANALYZE tasks, task_events")
        found.sizes.append((f"day {day} removed", await sizes(conn)))
        started = time.monotonic()
        # One that waits (the sweep's own skips a table autovacuum holds): the space is
        # free when the next day's work is written.
        await conn.execute("VACUUM tasks, task_events")
        removal.vacuum_seconds = time.monotonic() - started
        found.sizes.append((f"day {day} removed, vacuumed", await sizes(conn)))
        log(f"writing a day's worth of new work ({removal.events:,} events removed)")
        await refill(conn, found.seeded, day - args.removals)
        await conn.execute("ANALYZE tasks, task_events")
        found.sizes.append((f"day {day} removed, vacuumed, a new day written", await sizes(conn)))
    finally:
        await conn.close()


def _retention(
    seeded: Seeded,
    db: Database,
    url: str | None,
    day: int,
    args: argparse.Namespace,
    *,
    pace: float | None = None,
) -> Retention:
    """A retention whose period makes work that finished before the end of day `day` due now
    (with `url`, it may vacuum; the bench vacuums itself, measured apart)."""
    keep = (datetime.now(UTC) - seeded.cutoff(day)).total_seconds()
    pace = args.pace if pace is None else pace
    return Retention(db, keep, url=url, batch=args.batch, pace=pace, holder="bench")


def _serve(url: str, args: argparse.Namespace, folder: Path) -> Process:
    port = free_port()
    env = {
        **os.environ,
        "BATON_DATABASE_URL": url,
        "BATON_LOG_LEVEL": "warning",
        "BATON_DATABASE_POOL_SIZE": str(args.pool),
    }
    command = [sys.executable, "-m", "baton.cli", "serve", "--port", str(port)]
    command += ["--workers", str(args.workers)]
    process = start_process(command, env, folder / "serve.log")
    process.url = f"http://127.0.0.1:{port}"
    wait_http(process, f"{process.url}/readyz", "baton serve")
    return process


# --- the report ---------------------------------------------------------------------------------


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join(" --- " for _ in headers) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _mb(size: int) -> str:
    return f"{size / 1e6:,.1f}"


def report(found: Sitting) -> str:
    seeded = found.seeded
    out = [
        " · ".join(f"{name} {value}" for name, value in found.settings),
        "",
        f"{seeded.events:,} task events of {seeded.tasks:,} tasks ({seeded.open_tasks:,} open) "
        f"over {seeded.days} days",
        "",
    ]
    rows: list[tuple[str, ...]] = []
    alone = found.moves[0]
    for m in found.moves:
        if m.phase == "moves":
            alone = m
        rows.append(
            (
                m.phase + (" (ended within)" if m.partial else ""),
                f"{m.seconds:.0f}",
                f"{m.rate:,.0f}",
                f"{m.p50_ms:.1f}",
                f"{m.p99_ms:.1f}",
                f"{m.rate / alone.rate:.2f}",
                f"{m.p99_ms / alone.p99_ms:.2f}",
            )
        )
    out.append(
        table(("window", "s", "moves/s", "p50 ms", "p99 ms", "rate ÷ alone", "p99 ÷ alone"), rows)
    )
    out.append("")
    summary = []
    for kind in ("removing", "vacuuming"):
        pairs = found.pairs(kind)
        if not pairs:
            continue
        p99 = [other.p99_ms / alone.p99_ms for alone, other in pairs]
        rate = [other.rate / alone.rate for alone, other in pairs]
        summary.append(
            (
                f"moves while {kind} ÷ moves alone just before",
                str(len(pairs)),
                f"{statistics.median(rate):.2f}",
                f"{statistics.median(p99):.2f}",
                f"{max(p99):.2f}",
            )
        )
    out.append(
        table(("paired windows", "pairs", "median rate", "median p99", "worst p99"), summary)
    )
    out.append("")
    out.append(
        table(
            ("removed", "tasks", "task events", "seconds", "events/s", "vacuum s"),
            [
                (
                    f"day {r.day}",
                    f"{r.subjects:,}",
                    f"{r.events:,}",
                    f"{r.seconds:.1f}",
                    f"{r.events / max(r.seconds, 1e-9):,.0f}",
                    f"{r.vacuum_seconds:.1f}",
                )
                for r in found.removals
            ],
        )
    )
    out.append("")
    size_rows = [
        (
            when,
            *(
                cell
                for name in RELATIONS
                for cell in (f"{s.rows[name]:,}", _mb(s.table[name]), _mb(s.indexes[name]))
            ),
        )
        for when, s in found.sizes
    ]
    headers = ["after"]
    for name in RELATIONS:
        headers += [f"{name} rows", f"{name} MB", f"{name} indexes MB"]
    out.append(table(headers, size_rows))
    return "\n".join(out)


# --- main ---------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.retention", description=__doc__)
    parser.add_argument("--events", type=int, default=10_000_000, help="task events to seed")
    parser.add_argument("--days", type=int, default=10, help="days the seeded events span")
    parser.add_argument(
        "--removals", type=int, default=2, help="days removed under load, one at a time"
    )
    parser.add_argument("--duration", type=float, default=10, help="seconds per window")
    parser.add_argument("--concurrency", type=int, default=16, help="wrk connections")
    parser.add_argument("--workers", type=int, default=1, help="baton serve --workers")
    parser.add_argument("--pool", type=int, default=16, help="BATON_DATABASE_POOL_SIZE")
    parser.add_argument("--batch", type=int, default=200, help="subjects per removal batch")
    parser.add_argument(
        "--pace", type=float, default=3.0, help="pause between batches ÷ the last batch's time"
    )
    parser.add_argument(
        "--database-url",
        default=os.environ.get("BATON_BENCH_DATABASE_URL"),
        help="a PostgreSQL server (superuser: the seed switches the guards off); default: an "
        "embedded PostgreSQL of its own under /tmp, with autovacuum on as a new server has it",
    )
    parser.add_argument("--logs", type=Path, default=None, help="keep the run's files here")
    return parser.parse_args(argv)


async def run(args: argparse.Namespace) -> str:
    with contextlib.ExitStack() as stack:
        folder = args.logs or Path(stack.enter_context(tempfile.TemporaryDirectory()))
        folder.mkdir(parents=True, exist_ok=True)
        async with bench_database(args.database_url, "baton_retention") as (url, where):
            log(f"database: {where}")
            await migrate.upgrade_url(url)
            found = await sitting(url, args, folder)
    return report(found)


def main(argv: Sequence[str] | None = None) -> None:
    print(asyncio.run(run(parse_args(argv))))


if __name__ == "__main__":
    main()
