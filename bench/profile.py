"""Where Baton's CPU goes on one request: the engine in process, on the compare's workloads.

    .venv/bin/python -m bench.profile [--workloads W2,W5] [--requests 2000] [--rounds 5]
                                      [--tasks 20000]
                                      [--database-url URL] [--profile] [--top 25] [--dump F]

Seeds `--tasks` tasks as `bench.compare` does (a fresh database), then runs each workload's
document on the engine in this process, one request at a time, as the principal the compare
uses (W4: a fresh id each time; W3 and W6: a task or run of their own each time):
the CPU time of this process per request (the engine, the services, asyncpg's side of the
statements; no HTTP, no PostgreSQL), and with `--profile` the functions that took it (cProfile,
by own time). CPU time, not wall time, so the figure holds on a busy machine; compare before
and after in one sitting all the same.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import io
import os
import pstats
import statistics
import time
from typing import Any

import asyncpg  # type: ignore[import-untyped, unused-ignore]
import orjson

from baton.api.schema import schema
from baton.cli import SERVER_GC_THRESHOLDS
from baton.engine.limits import DEFAULT_LIMITS
from baton.engine.runner import Engine, Request
from baton.services.context import Context
from baton.services.runs import RunService
from baton.services.tasks import TaskService
from baton.store import migrate
from baton.store.db import Database, libpq_url

from .compare.seed import seed
from .compare.workloads import MARK, principals, value_at, workloads
from .server import bench_database

# The workloads that can repeat: the reads change nothing, W4 hands off a fresh id each time
# (its requests are made in advance, one per hand-off), and W3 and W6 move a task or run of
# their own each time (the seed's pool holds one per request).
REPEATABLE = ("W1", "W2", "W3", "W4", "W5", "W6")
MOVES = ("W3", "W6")


async def run(args: argparse.Namespace) -> None:
    async with bench_database(args.database_url, "baton_profile") as (url, where):
        await migrate.upgrade_url(url)
        conn = await asyncpg.connect(libpq_url(url))
        try:
            moves = any(name in MOVES for name in args.workloads.split(","))
            world = await seed(conn, args.tasks, pool=args.requests + 200 if moves else 10)
        finally:
            await conn.close()
        db = await Database.connect(url, max_size=4)
        try:
            engine = Engine(schema, DEFAULT_LIMITS)
            service, runs = TaskService(db), RunService(db)
            who = principals(world)
            print(f"bench.profile: {args.tasks:,} tasks on {where}, {os.cpu_count()} CPUs\n")
            print(
                f"| workload | requests | CPU ms per request, median of {args.rounds} rounds "
                "(fastest round) | wall p50 ms |"
            )
            print("| --- | --- | --- | --- |")
            for name in args.workloads.split(","):
                if name not in REPEATABLE:
                    raise SystemExit(f"{name}: only these repeat: {', '.join(REPEATABLE)}")
                load = workloads(world, 0)[name]
                values = (
                    load.values.items
                    if load.values.kind == "cycle"
                    else [value_at(load.values, 0, 1, n) for n in range(args.requests + 200)]
                )
                body = orjson.loads(load.body("baton").replace(f'"{MARK}"', '"X"'))
                requests = [Request(body["query"], {**body["variables"], "v": v}) for v in values]
                context = Context(who[load.who], service, runs)
                for i in range(200):  # warm: plans, caches, prepared statements
                    await engine.execute(requests[i % len(requests)], context)
                requests = requests[200:] if load.values.kind != "cycle" else requests
                rounds, walls, sent = [], [], 0
                # Timed by this process's CPU clock: time spent waiting on PostgreSQL (or on
                # the other engineers' processes) is not charged to whatever was running.
                profiler = cProfile.Profile(time.process_time) if args.profile else None
                for _ in range(args.rounds):
                    per = args.requests // args.rounds
                    cpu = time.process_time()
                    if profiler is not None:
                        profiler.enable()
                    for _ in range(per):
                        request = requests[sent % len(requests)]
                        sent += 1
                        started = time.perf_counter()
                        outcome = await engine.execute(request, context)
                        walls.append(time.perf_counter() - started)
                        assert not outcome.errors, outcome.errors
                    if profiler is not None:
                        profiler.disable()
                    rounds.append((time.process_time() - cpu) / per)
                    # out of the clock: the last answer is the good one (W4: not a duplicate)
                    assert load.expect.encode() in outcome.encoded(), outcome.data
                print(
                    f"| {name} | {args.requests} | {statistics.median(rounds) * 1000:.3f} "
                    f"({min(rounds) * 1000:.3f}) | "
                    f"{statistics.median(walls) * 1000:.2f} |"
                )
                if profiler is not None:
                    text = io.StringIO()
                    stats = pstats.Stats(profiler, stream=text).sort_stats("tottime")
                    stats.print_stats(args.top)
                    if args.dump is not None:  # for pstats: callers, callees
                        profiler.dump_stats(f"{args.dump}.{name}")
                    print(f"\n<details><summary>{name}: cProfile, by own time</summary>\n")
                    print("```\n" + _trimmed(text.getvalue()) + "\n```\n</details>\n")
        finally:
            await db.close()


def _trimmed(report: str) -> str:
    """cProfile's table without its preamble, paths shortened to the package."""
    lines = report.splitlines()
    start = next((i for i, line in enumerate(lines) if "ncalls" in line), 0)
    out = []
    for line in lines[start:]:
        for marker in ("site-packages/", "/src/", "lib/python3.11/"):
            if marker in line:
                head, _, tail = line.partition(marker)
                line = head[: head.rfind(" ") + 1] + tail
        out.append(line.rstrip())
    return "\n".join(line for line in out if line)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.profile", description=__doc__.split("\n")[0])
    p.add_argument("--workloads", default="W2,W5")
    p.add_argument("--requests", type=int, default=2000)
    p.add_argument(
        "--rounds",
        type=int,
        default=5,
        help="rounds the requests are split in; on a shared machine the fastest round is the "
        "one least disturbed by other processes",
    )
    p.add_argument("--tasks", type=int, default=20_000)
    p.add_argument("--database-url", default=os.environ.get("BATON_BENCH_DATABASE_URL"))
    p.add_argument("--profile", action="store_true", help="print where the CPU went")
    p.add_argument("--top", type=int, default=25)
    p.add_argument("--dump", help="with --profile: also write the raw stats to DUMP.<workload>")
    args: Any = p.parse_args(argv)
    gc.set_threshold(*SERVER_GC_THRESHOLDS)  # as `baton serve` runs: collections are part of it
    asyncio.run(run(args))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
