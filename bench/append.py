"""Event appends under load: moves per second at c=64 across two `baton serve` processes, for a
baseline source tree and this one, beside the same statements issued without Baton.

    .venv/bin/python -m bench.append [--before-ref main] [--duration 10] [--repetitions 2]

The baseline is `git archive <ref>` of this repository, unpacked into a temporary folder (or
`--before DIR`, a source tree). For each side, in one sitting, interleaved:

- **Baton**: a fresh database (on `--database-url` / BATON_BENCH_DATABASE_URL, else the local
  server at 127.0.0.1:5432), migrated by that side's own migrations, `--tasks` tasks handed off
  and started through that side's service; then `baton serve --workers 2` of that side and wrk
  (`-t2 -c64`) sending `saveCheckpoint` — a guarded change that appends one task event, the
  path every move takes — each wrk thread cycling over its own half of the tasks, so no two
  requests in flight touch one task.
- **raw asyncpg**: the same statement (`baton.store.tasks.change`, as that side builds it) on 64
  asyncpg connections from one Python process: no HTTP, no GraphQL, no service.

Before all that it prints what the disk does: `synchronous_commit`, `fsync`, and the time of one
single-row insert commit, with the flush (`synchronous_commit = on`) and without (`off`).
`--flush-delay-us N` emulates a disk whose flush takes N µs longer (see `configure`).
Tables go to stdout as markdown, progress to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import asyncpg  # type: ignore[import-untyped, unused-ignore]
import psutil  # type: ignore[import-untyped, unused-ignore]

from baton.store.db import libpq_url
from bench.compare import wrk
from bench.compare.procs import Process, free_port, start_process, stop, wait_http
from bench.compare.workloads import MARK, Values
from bench.server import bench_database

REPO = Path(__file__).resolve().parents[1]
LOCAL_SERVER = "postgresql://postgres@127.0.0.1:5432/postgres"
OWNER = "bench"  # the requester's and the assignee's owner
ASSIGNEE = f"{OWNER}/worker"
CHECKPOINT = {
    "progress": "half way",
    "decisions": ["one table"],
    "filesTouched": ["a.py"],
    "nextSteps": [],
    "openQuestions": [],
}
SAVE = (
    "mutation($v: ID!, $c: CheckpointInput!) { saveCheckpoint(input: {id: $v, checkpoint: $c}) "
    "{ __typename } }"
)


@dataclass(frozen=True)
class Side:
    name: str
    source: Path  # a source tree: src/baton, migrations/

    def env(self, database_url: str) -> dict[str, str]:
        return {
            **os.environ,
            "PYTHONPATH": str(self.source / "src"),
            "BATON_DATABASE_URL": database_url,
            "BATON_LOG_LEVEL": "warning",
        }


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --- what runs inside a side's source tree (python -m bench.append --inside …) -------------


async def _seed(url: str, tasks: int) -> None:
    """`tasks` tasks in `working`, ids `bench_00000001`…, and a token for their assignee."""
    from baton.access.gate import GateDecision
    from baton.access.principals import ADMIN, Principal, PrincipalKind
    from baton.access.tokens import create_token
    from baton.protocol.handoff import MoveName
    from baton.services.tasks import HandOff, TaskService
    from baton.store.db import Database

    db = await Database.connect(url, max_size=8, acquire_timeout=30)
    try:
        service = TaskService(db)
        owner = Principal(PrincipalKind.OWNER, OWNER)
        await service.rules.set(
            owner,
            owner=None,
            requester="*/*",
            project="*",
            deliverable_types=[],
            decision=GateDecision.ALLOW,
            priority=100,
            rule_id=None,
        )
        packet = {
            "task": "Keep a checkpoint",
            "deliverable_type": "doc",
            "acceptance_criteria": ["it is saved"],
            "context": "",
            "files": [],
            "depends_on": [],
        }
        ids = []
        for n in range(1, tasks + 1):
            made = await service.hand_off(
                ADMIN,
                HandOff(
                    project="append",
                    requester=f"{OWNER}/asker",
                    assignee=ASSIGNEE,
                    packet=packet,
                    id=f"{n:08d}",
                ),
            )
            for move in (MoveName.ACCEPT, MoveName.START):
                await service.move(ADMIN, move, made.task.id)
            ids.append(made.task.id)
        token = await create_token(db, Principal(PrincipalKind.AGENT, ASSIGNEE))
    finally:
        await db.close()
    print(json.dumps({"ids": ids, "token": token}))


async def _raw(url: str, ids: list[str], concurrency: int, seconds: float) -> None:
    """The store's checkpoint statement on `concurrency` connections for `seconds`."""
    from baton.access.principals import Principal, PrincipalKind
    from baton.protocol.handoff import Actor
    from baton.services.tasks import SAVE_CHECKPOINT
    from baton.store import tasks as store
    from baton.store.db import Database

    db = await Database.connect(url, min_size=concurrency, max_size=concurrency)
    principal = Principal(PrincipalKind.AGENT, ASSIGNEE)
    change = store.Change(
        kind="checkpoint_saved",
        pairs=SAVE_CHECKPOINT,
        actor=Actor.ASSIGNEE,
        checkpoint={
            "progress": "half way",
            "decisions": ["one table"],
            "files_touched": ["a.py"],
            "next_steps": [],
            "open_questions": [],
        },
    )
    share = len(ids) // concurrency
    stop_at = time.monotonic() + seconds
    done = [0, 0]  # applied, refused

    async def client(n: int) -> None:
        mine = ids[n * share : (n + 1) * share]
        async with db.connection() as conn:
            i = 0
            while time.monotonic() < stop_at:
                event = await store.change(
                    conn, mine[i % len(mine)], change, principal, expected_version=None
                )
                done[0 if event is not None else 1] += 1
                i += 1

    started = time.monotonic()
    await asyncio.gather(*(client(n) for n in range(concurrency)))
    elapsed = time.monotonic() - started
    await db.close()
    print(json.dumps({"requests": done[0], "refused": done[1], "seconds": elapsed}))


def inside(argv: list[str]) -> None:
    what, url = argv[0], argv[1]
    if what == "seed":
        asyncio.run(_seed(url, int(argv[2])))
    else:
        ids = json.loads(Path(argv[2]).read_text())
        asyncio.run(_raw(url, ids, int(argv[3]), float(argv[4])))


def _inside(side: Side, url: str, *args: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-m", "bench.append", "--inside", *args[:1], url, *args[1:]],
        env=side.env(url),
        cwd=REPO,  # this bench package; `baton` comes from the side's PYTHONPATH
        capture_output=True,
        text=True,
        timeout=900,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{side.name}: {args[0]} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


# --- the measurements ---------------------------------------------------------------------------


@dataclass
class Prepared:
    side: Side
    url: str
    ids: list[str]
    token: str


def _migrate(side: Side, url: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "baton.cli", "migrate"],
        env=side.env(url),
        cwd=side.source,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{side.name}: migrate failed:\n{done.stderr[-3000:]}")


def _serve(side: Side, url: str, workers: int, pool: int, folder: Path) -> Process:
    port = free_port()
    env = side.env(url) | {"BATON_DATABASE_POOL_SIZE": str(pool)}
    command = [sys.executable, "-m", "baton.cli", "serve", "--port", str(port)]
    command += ["--workers", str(workers)]
    process = start_process(command, env, folder / f"{side.name}.log", cwd=side.source)
    process.url = f"http://127.0.0.1:{port}"
    wait_http(process, f"{process.url}/readyz", f"baton serve ({side.name})")
    return process


def _lua(prepared: Prepared) -> str:
    prefix = prepared.ids[0][:-8]
    assert all(i == f"{prefix}{n:08d}" for n, i in enumerate(prepared.ids, start=1))
    body = json.dumps({"query": SAVE, "variables": {"v": MARK, "c": CHECKPOINT}})
    values = Values("range", prefix=prefix, first=1, count=len(prepared.ids))
    return wrk.script(body, prepared.token, values, '"MoveSuccess"')


def _cpu_seconds(pid: int) -> float:
    """CPU time of a process and its children (the `--workers` processes)."""
    parent = psutil.Process(pid)
    total = 0.0
    for process in [parent, *parent.children(recursive=True)]:
        with contextlib.suppress(psutil.Error):
            times = process.cpu_times()
            total += times.user + times.system
    return total


def measure_baton(
    prepared: Prepared, wrk_path: str, args: argparse.Namespace, folder: Path
) -> tuple[float, float]:
    """Moves per second, and the servers' CPU milliseconds per move."""
    server = _serve(prepared.side, prepared.url, args.workers, args.pool, folder)
    try:
        lua = _lua(prepared)
        endpoint = f"{server.url}/graphql"
        wrk.run(wrk_path, endpoint, lua, folder, concurrency=args.concurrency, seconds=2)
        cpu = _cpu_seconds(server.pid)
        result = wrk.run(
            wrk_path, endpoint, lua, folder, concurrency=args.concurrency, seconds=args.duration
        )
        cpu = _cpu_seconds(server.pid) - cpu
    finally:
        stop(server)
    if result.errors:
        raise RuntimeError(f"{prepared.side.name}: {result.errors} bad answers: {result.sample}")
    return result.rate, 1000 * cpu / max(result.requests, 1)


def measure_raw(prepared: Prepared, args: argparse.Namespace, folder: Path) -> float:
    ids = folder / "ids.json"
    ids.write_text(json.dumps(prepared.ids))
    concurrency = str(args.concurrency)
    _inside(prepared.side, prepared.url, "raw", str(ids), concurrency, "2")
    out = _inside(prepared.side, prepared.url, "raw", str(ids), concurrency, str(args.duration))
    if out["refused"]:
        raise RuntimeError(f"{prepared.side.name}: raw statements refused: {out}")
    return float(out["requests"]) / float(out["seconds"])  # type: ignore[arg-type]


async def disk(url: str) -> list[tuple[str, str]]:
    """The server's flush settings and one single-row commit's time, flushed and not."""
    conn = await asyncpg.connect(libpq_url(url))
    try:
        rows = [
            (name, str(await conn.fetchval(f"SHOW {name}")))
            for name in ("synchronous_commit", "fsync", "wal_sync_method", "commit_delay")
        ]
        await conn.execute("CREATE TABLE IF NOT EXISTS bench_commits (n int)")
        for mode in ("on", "off"):
            await conn.execute(f"SET synchronous_commit = {mode}")
            times = []
            for n in range(300):
                started = time.perf_counter()
                await conn.execute("INSERT INTO bench_commits VALUES ($1)", n)
                times.append(time.perf_counter() - started)
            median = statistics.median(times) * 1000
            rows.append((f"one-row insert commit, synchronous_commit={mode}", f"{median:.3f} ms"))
        await conn.execute("DROP TABLE bench_commits")
    finally:
        await conn.close()
    return rows


def _baseline(args: argparse.Namespace, folder: Path) -> Path:
    if args.before:
        return Path(args.before).resolve()
    target = folder / "before"
    target.mkdir()
    archive = folder / "before.tar"
    subprocess.run(
        ["git", "-C", str(REPO), "archive", "--format=tar", "-o", str(archive), args.before_ref],
        check=True,
    )
    with tarfile.open(archive) as tar:
        tar.extractall(target, filter="data")
    return target


async def configure(url: str, args: argparse.Namespace) -> None:
    """How every later session on the database (servers, raw clients) commits.

    `--flush-delay-us` emulates a slower disk: PostgreSQL's `commit_delay` makes the backend
    that flushes the WAL wait that long first, holding the WAL write lock, as a flush that took
    that long would; commits that arrive meanwhile go out in the same flush, as on a real disk.
    (`commit_siblings = 0`: whatever else is running.)"""
    conn = await asyncpg.connect(libpq_url(url))
    try:
        name = await conn.fetchval("SELECT current_database()")
        settings = {"synchronous_commit": args.synchronous_commit}
        if args.flush_delay_us:
            settings |= {"commit_delay": str(args.flush_delay_us), "commit_siblings": "0"}
        for setting, value in settings.items():
            await conn.execute(f'ALTER DATABASE "{name}" SET {setting} = {value}')
    finally:
        await conn.close()


async def prepare(side: Side, url: str, tasks: int) -> Prepared:
    await asyncio.to_thread(_migrate, side, url)
    seeded = await asyncio.to_thread(_inside, side, url, "seed", str(tasks))
    return Prepared(side, url, list(seeded["ids"]), str(seeded["token"]))  # type: ignore[call-overload]


async def main(args: argparse.Namespace) -> int:
    wrk_path = wrk.ensure_wrk()
    server_url = args.database_url or os.environ.get("BATON_BENCH_DATABASE_URL") or LOCAL_SERVER
    with tempfile.TemporaryDirectory(prefix="baton-append-") as tmp:
        folder = Path(tmp)
        sides = [
            Side(f"before ({args.before or args.before_ref})", _baseline(args, folder)),
            Side("after (this tree)", REPO),
        ]
        rates: dict[tuple[str, str], list[float]] = {}
        cpu: dict[str, list[float]] = {}
        async with (
            bench_database(server_url, "baton_append_a") as (url_a, where),
            bench_database(server_url, "baton_append_b") as (url_b, _),
        ):
            log(f"bench.append: databases on {where}")
            for url in (url_a, url_b):
                await configure(url, args)
            facts = await disk(url_a)
            prepared = []
            for side, url in zip(sides, (url_a, url_b), strict=True):
                log(f"preparing {side.name}: {args.tasks} tasks")
                prepared.append(await prepare(side, url, args.tasks))
            for repetition in range(args.repetitions):
                order = prepared if repetition % 2 == 0 else prepared[::-1]
                for kind in ("Baton", "raw asyncpg"):
                    for p in order:
                        log(f"repetition {repetition + 1}: {kind}, {p.side.name}")
                        if kind == "Baton":
                            rate, ms = await asyncio.to_thread(
                                measure_baton, p, wrk_path, args, folder
                            )
                            cpu.setdefault(p.side.name, []).append(ms)
                        else:
                            rate = await asyncio.to_thread(measure_raw, p, args, folder)
                        log(f"  {rate:,.0f} moves/s")
                        rates.setdefault((kind, p.side.name), []).append(rate)
    print(report(facts, rates, cpu, sides, args))
    return 0


def report(
    facts: list[tuple[str, str]],
    rates: dict[tuple[str, str], list[float]],
    cpu: dict[str, list[float]],
    sides: list[Side],
    args: argparse.Namespace,
) -> str:
    def best(kind: str, side: Side) -> float:
        return statistics.median(rates[(kind, side.name)])

    before, after = sides
    lines = ["| the database | |", "| --- | --- |"]
    lines += [f"| {name} | {value} |" for name, value in facts]
    lines += [
        "",
        f"Moves (saveCheckpoint) per second at c={args.concurrency}, `baton serve --workers "
        f"{args.workers}` with {args.pool} database connections, synchronous_commit "
        f"{args.synchronous_commit}"
        + (f", flush delayed {args.flush_delay_us} µs" if args.flush_delay_us else "")
        + f", {args.duration} s after 2 s of warm-up, median of {args.repetitions}:",
        "",
        "| | Baton | raw asyncpg (same statement) | Baton ÷ raw | Baton's CPU ms per move |",
        "| --- | --- | --- | --- | --- |",
    ]
    for side in sides:
        baton, raw = best("Baton", side), best("raw asyncpg", side)
        ms = statistics.median(cpu[side.name])
        lines.append(f"| {side.name} | {baton:,.0f} | {raw:,.0f} | {baton / raw:.2f} | {ms:.2f} |")
    ratio = best("Baton", after) / best("Baton", before)
    raw_ratio = best("raw asyncpg", after) / best("raw asyncpg", before)
    lines += ["", f"After ÷ before: Baton {ratio:.2f} times, raw statements {raw_ratio:.2f} times."]
    return "\n".join(lines)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="bench.append", description=__doc__.split("\n")[0])
    parser.add_argument("--before-ref", default="main", help="git ref of the baseline")
    parser.add_argument("--before", help="a baseline source tree instead of --before-ref")
    parser.add_argument("--database-url", help="a PostgreSQL server (superuser)")
    parser.add_argument("--tasks", type=int, default=512)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--pool", type=int, default=64, help="BATON_DATABASE_POOL_SIZE")
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--repetitions", type=int, default=2)
    parser.add_argument(
        "--synchronous-commit",
        choices=("on", "off"),
        default="on",
        help="set on the bench databases: off shows the lock's cost when a flush costs nothing",
    )
    parser.add_argument(
        "--flush-delay-us",
        type=int,
        default=0,
        help="emulate a slower disk: every WAL flush waits this long first (commit_delay)",
    )
    return parser.parse_args(argv)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--inside"]:
        inside(sys.argv[2:])
    else:
        sys.exit(asyncio.run(main(parse_args(sys.argv[1:]))))
