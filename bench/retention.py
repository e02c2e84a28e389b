"""Retention under load: moves while a day's worth of finished work is removed, and the tables'
sizes before and after.

    .venv/bin/python -m bench.retention                      # 10 million events over 10 days
    .venv/bin/python -m bench.retention --events 1000000 --duration 10

A fresh database (on `--database-url` / BATON_BENCH_DATABASE_URL, else an embedded PostgreSQL
of its own under /tmp, autovacuum on as a new server has it) migrated by Baton's migrations,
seeded with SQL in the real tables' shapes: `--events` task events over `--days` days, one task
in 20 still open (`working`, assigned to one agent), the rest completed, each with the events of
its path (6 for a completed task, 4 for an open one), ids in the order of time. Then, in one
sitting, against `baton serve`, wrk sending `saveCheckpoint` (a guarded move appending one task
event, the path every move takes) as the open tasks' assignee:

1. **moves** alone;
2. **moves while removing day N**: the oldest day's finished work removed by
   `baton.services.retention` (its batches and pauses, as a server's sweep makes them), the
   measurement starting with the removal;
3. **moves while vacuuming after day N**: the sweep's vacuum of the tables it removed from;
4. **moves** alone again; steps 2 to 4 for each of `--removals` days.

Then, with nothing else running, the sizes of the tables and their indexes before the next day
is removed, after, after the vacuum, and after a day's worth of new finished work is written
(does the freed space get used, or do the files grow?).

It prints the moves (rate, p50, p99, each against the moves alone just before), the removals
(tasks, events, batches, seconds, vacuum seconds) and the sizes, as markdown to stdout; progress
goes to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
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
from baton.services.retention import Retention, Swept
from baton.store import migrate
from baton.store.db import Database, libpq_url
from bench.compare import wrk
from bench.compare.procs import Process, free_port, start_process, stop, wait_http
from bench.compare.workloads import MARK, Values
from bench.server import bench_database

DAY = 86_400.0
OPEN_EVERY = 20  # one task in this many is still open
ASSIGNEE = "bench/worker"  # the open tasks' assignee: the moves' caller
OPEN_PREFIX = "bo_"  # open task `bo_00000001`, …: wrk's "range" of ids
DONE_PREFIX = "bd_"
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

    def cutoff(self, day: int) -> datetime:
        """Work that finished before this is days 1 … `day`."""
        return self.end - timedelta(days=self.days - day)


def tasks_for(events: int) -> int:
    """Tasks whose paths make about `events` events."""
    per_task = (OPEN_STEPS + (OPEN_EVERY - 1) * len(PATH)) / OPEN_EVERY
    return max(OPEN_EVERY, round(events / per_task))


def _literal(value: str | None) -> str:
    return "NULL" if value is None else f"'{value}'"


_PATHS = ", ".join(
    f"({step}, {_literal(move)}, {_literal(source)}, '{target}')"
    for step, move, source, target in PATH
)
_ROWS = f"""
    WITH s AS (
        SELECT i, i % {OPEN_EVERY} = 0 AS open,
            CASE WHEN i % {OPEN_EVERY} = 0
                THEN '{OPEN_PREFIX}' || lpad((i / {OPEN_EVERY})::text, 8, '0')
                ELSE $5::text || lpad(i::text, 8, '0') END AS id,
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
    end = datetime.now(UTC) - timedelta(minutes=1)
    step = days * DAY / total  # seconds between two tasks' ends
    await conn.execute("SET session_replication_role = replica")  # the guards allow moves only
    started = time.monotonic()
    for lo in range(1, total + 1, CHUNK):
        hi = min(total, lo + CHUNK - 1)
        async with conn.transaction():
            args = (lo, hi, end, total, DONE_PREFIX, step)
            await conn.execute(_TASKS, *args)
            await conn.execute(_EVENTS, *args)
        rate = hi / max(time.monotonic() - started, 1e-9)
        log(f"seed: {hi:,} of {total:,} tasks ({rate:,.0f} tasks/s)")
    await conn.execute("RESET session_replication_role")
    await conn.execute("VACUUM (ANALYZE) tasks, task_events")
    await conn.execute("CHECKPOINT")
    written = await conn.fetchval("SELECT count(*) FROM task_events")
    return Seeded(total, total // OPEN_EVERY, written, days, end)


async def refill(conn: asyncpg.Connection, seeded: Seeded, day: int) -> int:
    """A day's worth of new finished tasks (and their events) finishing now, as the next day
    brings: ids and times after everything seeded. The events written."""
    per_day = seeded.tasks // seeded.days
    first = seeded.tasks + (day - 1) * per_day + 1
    last = first + per_day - 1
    await conn.execute("SET session_replication_role = replica")
    before = await conn.fetchval("SELECT count(*) FROM task_events")
    for lo in range(first, last + 1, CHUNK):
        hi = min(last, lo + CHUNK - 1)
        async with conn.transaction():
            # Ids after the seeded ones, as new ids come (Baton's own start with the time).
            args = (lo, hi, datetime.now(UTC), last, DONE_PREFIX, 1.0)
            await conn.execute(_TASKS.replace(f"'{OPEN_PREFIX}'", f"'bp{day}_'"), *args)
            await conn.execute(_EVENTS.replace(f"'{OPEN_PREFIX}'", f"'bp{day}_'"), *args)
    await conn.execute("RESET session_replication_role")
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


def _lua(token: str, open_tasks: int) -> str:
    body = json.dumps({"query": SAVE, "variables": {"v": MARK, "c": CHECKPOINT}})
    values = Values("range", prefix=OPEN_PREFIX, first=1, count=open_tasks)
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
    swept: Swept
    seconds: float
    vacuum_seconds: float = 0.0


@dataclass
class Sitting:
    seeded: Seeded
    moves: list[Moves] = field(default_factory=list)
    removals: list[Removal] = field(default_factory=list)
    sizes: list[tuple[str, Sizes]] = field(default_factory=list)
    settings: list[tuple[str, str]] = field(default_factory=list)


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
        lua = _lua(token, seeded.open_tasks)
        wrk_path = wrk.ensure_wrk()
        server = _serve(url, args, folder)
        try:
            warm = args.concurrency
            wrk.run(wrk_path, f"{server.url}/graphql", lua, folder, concurrency=warm, seconds=3)
            found.moves.append(moves("moves", wrk_path, server, lua, folder, args))
            for day in range(1, args.removals + 1):
                await _remove(found, db, url, day, (wrk_path, server, lua, folder), args)
                found.moves.append(moves("moves", wrk_path, server, lua, folder, args))
        finally:
            stop(server)
        await _space(found, db, url, args.removals + 1, args)
    finally:
        await db.close()
    return found


Load = tuple[str, Process, str, Path]  # wrk, the server, the script, the folder


async def _remove(
    found: Sitting, db: Database, url: str, day: int, load: Load, args: argparse.Namespace
) -> None:
    """Remove day `day`'s finished work with moves running; then vacuum with moves running."""
    retention = _retention(found.seeded, db, url, day, args)
    started = time.monotonic()
    sweeping = asyncio.create_task(retention.sweep())
    measured = await asyncio.to_thread(moves, f"moves while removing day {day}", *load, args)
    swept = await sweeping
    seconds = time.monotonic() - started
    assert swept is not None
    if seconds < measured.seconds:
        log(f"the removal took {seconds:.1f} s, less than the measurement: use more --events")
    found.moves.append(measured)
    removal = Removal(day, swept, seconds)
    found.removals.append(removal)
    log(f"removed day {day}: {swept.subjects['task']:,} tasks, {swept.events['task']:,} events")
    started = time.monotonic()
    vacuuming = asyncio.create_task(retention.vacuum(swept.tables()))
    found.moves.append(
        await asyncio.to_thread(moves, f"moves while vacuuming after day {day}", *load, args)
    )
    await vacuuming
    removal.vacuum_seconds = time.monotonic() - started


async def _space(
    found: Sitting, db: Database, url: str, day: int, args: argparse.Namespace
) -> None:
    """With nothing else running: the sizes before removing day `day`, after, after the
    vacuum, and after a day's worth of new work is written."""
    conn = await asyncpg.connect(libpq_url(url))
    try:
        await conn.execute("VACUUM (ANALYZE) tasks, task_events")  # what the moves left
        found.sizes.append((f"moves done, before day {day} is removed", await sizes(conn)))
        retention = _retention(found.seeded, db, url, day, args)
        started = time.monotonic()
        swept = await retention.sweep()
        assert swept is not None
        removal = Removal(day, swept, time.monotonic() - started)
        found.removals.append(removal)
        await conn.execute("ANALYZE tasks, task_events")
        found.sizes.append((f"day {day} removed", await sizes(conn)))
        started = time.monotonic()
        # Not the sweep's own (it skips a table autovacuum holds, leaving it to autovacuum):
        # one that waits, so the space is free when the new day's work is written.
        await conn.execute(f"VACUUM {', '.join(swept.tables())}")
        removal.vacuum_seconds = time.monotonic() - started
        await conn.execute("ANALYZE tasks, task_events")
        found.sizes.append((f"day {day} removed, vacuumed", await sizes(conn)))
        log(f"writing a day's worth of new work ({swept.events['task']:,} events removed)")
        await refill(conn, found.seeded, 1)
        await conn.execute("ANALYZE tasks, task_events")
        found.sizes.append(("a day's new work written", await sizes(conn)))
    finally:
        await conn.close()


def _retention(
    seeded: Seeded, db: Database, url: str, day: int, args: argparse.Namespace
) -> Retention:
    """A retention whose period makes work that finished before the end of day `day` due now."""
    keep = (datetime.now(UTC) - seeded.cutoff(day)).total_seconds()
    return Retention(db, keep, url=url, batch=args.batch, pace=args.pace, holder="bench")


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
                m.phase,
                f"{m.seconds:.0f}",
                f"{m.rate:,.0f}",
                f"{m.p50_ms:.1f}",
                f"{m.p99_ms:.1f}",
                f"{m.rate / alone.rate:.2f}",
                f"{m.p99_ms / alone.p99_ms:.2f}",
            )
        )
    out.append(
        table(
            ("phase", "s", "moves/s", "p50 ms", "p99 ms", "rate ÷ alone", "p99 ÷ alone"),
            rows,
        )
    )
    out.append("")
    out.append(
        table(
            ("removed", "tasks", "task events", "batches", "seconds", "events/s", "vacuum s"),
            [
                (
                    f"day {r.day}",
                    f"{r.swept.subjects['task']:,}",
                    f"{r.swept.events['task']:,}",
                    f"{r.swept.batches:,}",
                    f"{r.seconds:.1f}",
                    f"{r.swept.events['task'] / max(r.seconds, 1e-9):,.0f}",
                    f"{r.vacuum_seconds:.1f}",
                )
                for r in found.removals
            ],
        )
    )
    out.append("")
    rows = []
    for when, s in found.sizes:
        rows.append(
            (
                when,
                *(
                    cell
                    for name in RELATIONS
                    for cell in (
                        f"{s.rows[name]:,}",
                        _mb(s.table[name]),
                        _mb(s.indexes[name]),
                    )
                ),
            )
        )
    out.append(
        table(
            (
                "when",
                "tasks rows",
                "tasks MB",
                "tasks indexes MB",
                "events rows",
                "events MB",
                "events indexes MB",
            ),
            rows,
        )
    )
    return "\n".join(out)


# --- main ---------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.retention", description=__doc__)
    parser.add_argument("--events", type=int, default=10_000_000, help="task events to seed")
    parser.add_argument("--days", type=int, default=10, help="days the seeded events span")
    parser.add_argument(
        "--removals", type=int, default=2, help="days removed under load, one at a time"
    )
    parser.add_argument("--duration", type=float, default=20, help="seconds per measurement")
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
