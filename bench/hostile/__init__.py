"""Hostile use of every door: what each attack costs the server, and what it does to others.

    .venv/bin/python -m bench.hostile [--doors graphql,...] [--seconds 8] [--attackers 2]
                                      [--database-url URL] [--src DIR]

One `baton serve` process; a victim sends `{ viewer { handle } }` over GraphQL one request at a
time while one kind of attack runs. Per kind: the attack's answers, the victim's latency
(p50 / p99 / max), the server's CPU per attacking request and its peak memory while it ran.
Each door's attacks live in a module of this package named for the door. `--src DIR` runs the
server from another checkout's `src` (its code, this harness), to measure an older version in
the same sitting.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import subprocess
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path

from bench.server import Server, bench_database, start_server, stop_server

from . import graphql, mcp_sessions, mcp_tools, webhooks
from .common import Row, measure, table

# A door's attacks: (server, a token of the owner `bench`, seconds per attack, attackers).
Door = Callable[[Server, str, float, int], Awaitable[list[Row]]]
DOORS: dict[str, Door] = {
    "graphql": graphql.attacks,
    "mcp-tools": mcp_tools.attacks,
    "mcp-sessions": mcp_sessions.attacks,
    "webhooks": webhooks.attacks,
}


async def bench_token(url: str, env: dict[str, str]) -> str:
    """A token of the owner `bench`, minted by the server's own code (`baton token create`
    from `--src` when given: the tokens table may differ between versions)."""
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "baton.cli", "token", "create", "--principal", "bench"],
        env={**os.environ, "BATON_DATABASE_URL": url, **env},
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip().splitlines()[-1]


async def main_async(args: argparse.Namespace) -> int:
    async with bench_database(args.database_url, "baton_hostile") as (url, where):
        env = {"PYTHONPATH": args.src} if args.src else {}
        if "webhooks" in args.doors:
            env.update(webhooks.SERVER_ENV)  # its receivers are on this machine, over http
        log = Path(tempfile.mkdtemp(prefix="baton-hostile-"), "serve.log")
        server = start_server(url, log, env=env)
        try:
            token = await bench_token(url, env)
            rows = [await measure(server, token, "none (the victim alone)", None, args.seconds)]
            for door in args.doors:
                for row in await DOORS[door](server, token, args.seconds, args.attackers):
                    rows.append(row)
                    print(f"  {door}: {row.kind}: done", file=sys.stderr)
        finally:
            stop_server(server)
    print(
        f"bench.hostile: {args.seconds:g} s per kind, {args.attackers} attackers, one server "
        f"process ({'src ' + args.src if args.src else 'this checkout'}), {where}, "
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}\n"
    )
    print(table(rows))
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.hostile", description=__doc__.split("\n")[0])
    p.add_argument(
        "--doors",
        type=lambda text: text.split(","),
        default=list(DOORS),
        help=f"comma-separated, of: {', '.join(DOORS)} (default: all)",
    )
    p.add_argument("--seconds", type=float, default=8.0)
    p.add_argument("--attackers", type=int, default=2)
    p.add_argument(
        "--database-url",
        default=os.environ.get("BATON_BENCH_DATABASE_URL"),
        help="a server to create the bench database on (default: an embedded PostgreSQL)",
    )
    p.add_argument("--src", default=None, help="run the server from this `src` directory")
    args = p.parse_args(argv)
    unknown = set(args.doors) - set(DOORS)
    if unknown:
        p.error(f"unknown door(s): {', '.join(sorted(unknown))}")
    if args.src:
        args.src = os.path.abspath(args.src)
    return asyncio.run(main_async(args))
