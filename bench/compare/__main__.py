"""Baton against PostGraphile V5 and against a ceiling (Baton's SQL with no GraphQL).

One database seeded through Baton's tables, every target driven by one load generator (wrk).

    python -m bench.compare [--quick] [--workloads W1,W3] [--targets baton,postgraphile] …

Tables (markdown) go to stdout, progress to stderr; see bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import sys
import time
from datetime import datetime
from pathlib import Path

from bench.server import raise_open_files_limit

from . import report, wrk
from .run import Options, compare
from .workloads import FREE, FREE_WORKLOADS, POOLED, SCALED, TARGETS, WORKLOADS


def _list(raw: str, allowed: tuple[str, ...], what: str) -> list[str]:
    items = [x.strip() for x in raw.split(",") if x.strip()]
    unknown = [x for x in items if x not in allowed]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown {what}: {', '.join(unknown)}")
    return items


def parse_args(argv: list[str] | None) -> Options:
    p = argparse.ArgumentParser(prog="python -m bench.compare", description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="10,000 tasks, 1 repetition, 3 s runs")
    p.add_argument("--tasks", type=int, help="tasks to seed (default 100,000; quick 10,000)")
    p.add_argument("--duration", type=float, help="seconds per measurement (default 10; quick 3)")
    p.add_argument(
        "--warmup", type=float, help="seconds of warm-up before each (default 3; quick 1)"
    )
    p.add_argument("--repetitions", type=int, help="interleaved repetitions (default 3; quick 1)")
    p.add_argument("--workloads", default=",".join(WORKLOADS))
    p.add_argument("--targets", default=",".join(TARGETS))
    p.add_argument("--concurrency", default="1,32", help="connections (comma-separated)")
    p.add_argument(
        "--baton-workers",
        type=int,
        default=1,
        help="the scaled table's `baton serve --workers N` (the per-core table runs one process)",
    )
    p.add_argument(
        "--pooler",
        action="store_true",
        help=f"also measure the one-process Baton with its pool through PgBouncer in "
        f"transaction mode (target `{POOLED}`), and print what the pooler costs per request",
    )
    p.add_argument(
        "--database-url",
        default=os.environ.get("BATON_BENCH_DATABASE_URL"),
        help="a PostgreSQL server to create the bench database on (superuser; default: "
        "$BATON_BENCH_DATABASE_URL, else an embedded PostgreSQL under /tmp)",
    )
    p.add_argument(
        "--logs",
        type=Path,
        help="keep the run's files (servers' logs, the PostGraphile install) in this folder; "
        "by default they go in a temporary folder that is removed",
    )
    a = p.parse_args(argv)
    try:
        workloads = _list(a.workloads, WORKLOADS, "workloads")
        targets = _list(a.targets, TARGETS, "targets")
        concurrency = [int(x) for x in a.concurrency.split(",") if x.strip()]
    except (argparse.ArgumentTypeError, ValueError) as exc:
        p.error(str(exc))

    def pick(value: float | None, full: float, quick: float) -> float:
        return value if value is not None else (quick if a.quick else full)

    return Options(
        tasks=int(pick(a.tasks, 100_000, 10_000)),
        duration=pick(a.duration, 10, 3),
        warmup=pick(a.warmup, 3, 1),
        repetitions=int(pick(a.repetitions, 3, 1)),
        workloads=workloads,
        targets=targets,
        concurrency=concurrency,
        baton_workers=a.baton_workers,
        database_url=a.database_url,
        logs=a.logs,
        pooler=a.pooler,
    )


def machine() -> str:
    return (
        f"{datetime.now().astimezone():%Y-%m-%d %H:%M %Z} · {os.cpu_count()} CPUs · "
        f"load average {os.getloadavg()[0]:.1f} · Python {platform.python_version()} · "
        f"{platform.platform()}"
    )


def main(argv: list[str] | None = None) -> int:
    options = parse_args(argv)
    wrk_path = wrk.ensure_wrk()
    raise_open_files_limit()
    started = time.monotonic()
    print(machine(), file=sys.stderr)
    outcome = asyncio.run(compare(options, wrk_path))
    wall = time.monotonic() - started
    threads = ", ".join(f"c={c}: -t{wrk.threads_for(c)} -c{c}" for c in options.concurrency)
    print(f"{machine()}\n")
    print(
        f"{options.tasks} tasks (seeded in {outcome.seed_seconds:.1f} s) · "
        f"{options.repetitions} repetition(s) x {options.duration:g} s after {options.warmup:g} s "
        f"warm-up · wrk {threads} · baton serve --workers 1"
        + (f" and --workers {options.baton_workers}" if options.baton_workers > 1 else "")
        + " · "
        f"{outcome.versions or 'no PostGraphile'} · database: {outcome.where}\n"
    )
    print("### Per core: one Baton process against one PostGraphile process\n")
    if {"baton", "postgraphile"} <= set(options.targets):
        print(report.per_core(outcome.rows))
        print(
            "\nEach pair: Baton / PostGraphile, medians. CPU per request from /proc: the server "
            "process (`baton serve --workers 1`; Node), and PostgreSQL's postmaster and backends."
        )
    else:
        print("(needs both targets baton and postgraphile)")
    print("\n### Per core, against PostGraphile with no authorization\n")
    if {"baton", FREE} <= set(options.targets):
        print(report.per_core(outcome.rows, FREE))
        print(
            f"\nThe same, against `{FREE}` ({', '.join(FREE_WORKLOADS)} only): PostGraphile "
            "as the tables' owner, no role, no settings, no row-level security; its move one "
            "UPDATE guarded by the state and one INSERT of the event (no lock, no "
            "notification). PostgreSQL CPU ÷ is Baton's ÷ its own."
        )
    else:
        print(f"(needs both targets baton and {FREE})")
    scaled = SCALED if options.baton_workers > 1 and "baton" in options.targets else "baton"
    print(f"\n### Scaled: Baton as `baton serve --workers {options.baton_workers}`\n")
    if scaled == SCALED:
        print(f"(target `{SCALED}`; `baton` is the one-process server of the table above)\n")
    else:
        print("(one Baton process: the same measurements as the per-core table)\n")
    print("#### Every measurement\n")
    print(report.measurements(outcome.rows))
    print("\n#### Medians\n")
    print(report.summary(outcome.rows))
    print(f"\n#### {scaled}'s req/s ÷ the others' (median, then each repetition)\n")
    print(report.ratios(outcome.rows, scaled))
    if options.pooler:
        print(f"\n### Through PgBouncer: `baton` against `{POOLED}`\n")
        if "baton" in options.targets:
            print(report.pooler(outcome.rows))
            print(
                "\nEach pair: direct / through the pooler, medians. PgBouncer (transaction "
                "mode, as many server sessions as Baton's pool) runs on the same machine; the "
                "pooler's cost is all three processes' CPU per request through it less Baton's "
                "and PostgreSQL's without it."
            )
        else:
            print("(needs the target baton)")
    print("\n#### SQL per request (statements / round trips, after a warm-up)\n")
    counted = options.targets + ([POOLED] if options.pooler and "baton" in options.targets else [])
    print(report.counts(outcome, options.workloads, counted))
    for note in outcome.notes:
        print(f"\nNOTE: {note}")
    print(f"\nwall time {wall:.0f} s")
    errors = sum(r.errors for r in outcome.rows)
    if errors or outcome.notes:
        print(f"bench.compare: {errors} errors in measurements", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
