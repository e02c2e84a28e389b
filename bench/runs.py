"""The run queue benchmark: claim throughput, and what a run event costs beside a task move.

    .venv/bin/python -m bench.runs [--runs 10000] [--daemons 1,8,32] [--events 2000]

Against one fresh `baton serve` on a fresh database (an embedded PostgreSQL unless
`--database-url` / BATON_BENCH_DATABASE_URL names a server):

1. Claims: for each daemon count, a queue of `--runs` runs in one project (inserted in bulk at
   the initial position, with their `created` events); that many daemons (HTTP clients with
   their own agent tokens) call `claimRun(project)` in a loop until the queue answers
   NotFoundError. Reported: claims/s, p50/p99 claim latency, and duplicates (a run claimed
   twice; must be 0) and misses (a run left unclaimed; must be 0).
2. One event: `--events` sequential `acceptTask` moves (one routed task each) against as many
   `reachCheckpoint` events (one claimed run each): requests/s, server CPU per request, and
   SQL statements per request (from the server's /metrics).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import asyncpg  # type: ignore[import-untyped, unused-ignore]
import httpx

from baton.access.principals import ADMIN, Principal, PrincipalKind
from baton.access.tokens import create_token
from baton.store import migrate
from baton.store.db import Database, libpq_url

from .server import Server, bench_database, start_server, stop_server

CLAIM = """mutation($p: String) { claimRun(input: {project: $p}) { __typename
  ... on RunMoveSuccess { run { id } } ... on Error { code } } }"""
REACH = """mutation($id: ID!) { reachCheckpoint(input: {id: $id, checkpoint: plans_complete}) {
  __typename } }"""
ACCEPT = """mutation($id: ID!) { acceptTask(input: {id: $id}) { __typename } }"""


async def seed_runs(url: str, owner: str, project: str, count: int, tag: str) -> list[str]:
    """`count` runs at backlog / idle / none with their `created` events, in bulk."""
    conn = await asyncpg.connect(libpq_url(url))
    try:
        ids = [f"r{tag}{i:07d}" for i in range(count)]
        async with conn.transaction():
            await conn.execute(
                """INSERT INTO runs (id, owner, project, title, status, phase, checkpoint,
                       created_by, version, created_at, updated_at)
                   SELECT id, $2, $3, 'bench run', 'backlog', 'idle', 'none', $2, 1,
                       now() + n * interval '1 microsecond', now()
                   FROM unnest($1::text[]) WITH ORDINALITY AS t(id, n)""",
                ids,
                owner,
                project,
            )
            await conn.execute("SELECT pg_advisory_xact_lock(7412003)")
            await conn.execute(
                """INSERT INTO run_events (run_id, kind, to_status, phase, checkpoint, actor,
                       version, at)
                   SELECT id, 'created', 'backlog', 'idle', 'none', $2, 1, now()
                   FROM unnest($1::text[]) AS t(id)""",
                ids,
                owner,
            )
        return ids
    finally:
        await conn.close()


async def seed_tasks(url: str, agent: str, project: str, count: int, tag: str) -> list[str]:
    """`count` routed tasks (inserted in `requested`, then routed, as the guard allows)."""
    conn = await asyncpg.connect(libpq_url(url))
    try:
        ids = [f"t{tag}{i:07d}" for i in range(count)]
        owner = agent.split("/")[0]
        packet = (
            '{"task": "bench", "deliverable_type": "doc", "acceptance_criteria": ["a"], '
            '"context": "", "files": [], "depends_on": []}'
        )
        async with conn.transaction():
            await conn.execute(
                """INSERT INTO tasks (id, project, state, requester, assignee, requester_owner,
                       assignee_owner, deliverable_type, depends_on, packet, verification,
                       version, input_digest, created_at, updated_at)
                   SELECT id, $3, 'requested', $2, $2, $4, $4, 'doc', '{}', $5::jsonb, 'AUTO',
                       1, id, now(), now() FROM unnest($1::text[]) AS t(id)""",
                ids,
                agent,
                project,
                owner,
                packet,
            )
            await conn.execute(
                "UPDATE tasks SET state = 'routed', version = 2 WHERE id = ANY($1::text[])", ids
            )
        return ids
    finally:
        await conn.close()


async def token(url: str, principal: Principal) -> str:
    db = await Database.connect(url, min_size=1, max_size=1)
    try:
        return await create_token(db, principal)
    finally:
        await db.close()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


async def drain(server: Server, url: str, daemons: int, runs: int) -> dict[str, Any]:
    tag = secrets.token_hex(3)
    owner, project = f"bench{tag}", f"q{tag}"
    queued = await seed_runs(url, owner, project, runs, tag)
    tokens = [
        await token(url, Principal(PrincipalKind.AGENT, f"{owner}/d{i}")) for i in range(daemons)
    ]
    claimed: list[str] = []
    latencies: list[float] = []

    async def daemon(bearer: str) -> None:
        async with httpx.AsyncClient(
            base_url=server.url, headers={"Authorization": f"Bearer {bearer}"}, timeout=60
        ) as http:
            while True:
                started = time.perf_counter()
                body = (
                    await http.post("/graphql", json={"query": CLAIM, "variables": {"p": project}})
                ).json()
                latencies.append(time.perf_counter() - started)
                answer = body["data"]["claimRun"]
                if answer["__typename"] != "RunMoveSuccess":
                    return
                claimed.append(answer["run"]["id"])

    started = time.perf_counter()
    await asyncio.gather(*(daemon(t) for t in tokens))
    elapsed = time.perf_counter() - started
    counts = Counter(claimed)
    return {
        "daemons": daemons,
        "runs": runs,
        "claims/s": len(claimed) / elapsed,
        "p50 ms": percentile(latencies, 0.5) * 1000,
        "p99 ms": percentile(latencies, 0.99) * 1000,
        "duplicates": sum(c - 1 for c in counts.values() if c > 1),
        "missed": len(set(queued) - set(counts)),
    }


def statements(server: Server, admin: str) -> float:
    """The server's statement count so far, from /metrics (which needs an admin token)."""
    answer = httpx.get(f"{server.url}/metrics", headers={"Authorization": f"Bearer {admin}"})
    answer.raise_for_status()
    for line in answer.text.splitlines():
        if line.startswith("baton_db_statements_total "):
            return float(line.split()[1])
    return 0.0


async def one_event_each(server: Server, url: str, count: int) -> list[dict[str, Any]]:
    tag = secrets.token_hex(3)
    owner, project = f"cost{tag}", f"c{tag}"
    agent = Principal(PrincipalKind.AGENT, f"{owner}/a")
    bearer = await token(url, agent)
    admin = await token(url, ADMIN)
    task_ids = await seed_tasks(url, agent.handle, project, count, tag)
    run_ids = await seed_runs(url, owner, project, count, tag)
    rows = []
    async with httpx.AsyncClient(
        base_url=server.url, headers={"Authorization": f"Bearer {bearer}"}, timeout=60
    ) as http:
        for _ in run_ids:  # claim every run first: reachCheckpoint needs one in progress
            await http.post("/graphql", json={"query": CLAIM, "variables": {"p": project}})
        for label, query, ids, ok in (
            ("acceptTask (task move)", ACCEPT, task_ids, "MoveSuccess"),
            ("reachCheckpoint (run event)", REACH, run_ids, "RunMoveSuccess"),
        ):
            cpu, sql = server.cpu_seconds(), statements(server, admin)
            started = time.perf_counter()
            failures = 0
            for item in ids:
                body = (
                    await http.post("/graphql", json={"query": query, "variables": {"id": item}})
                ).json()
                failures += next(iter(body["data"].values()))["__typename"] != ok
            elapsed = time.perf_counter() - started
            rows.append(
                {
                    "operation": label,
                    "count": len(ids),
                    "req/s": len(ids) / elapsed,
                    "server CPU ms/req": (server.cpu_seconds() - cpu) * 1000 / len(ids),
                    "statements/req": (statements(server, admin) - sql) / len(ids),
                    "failures": failures,
                }
            )
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    headers = list(rows[0])
    cells = [[f"{v:.1f}" if isinstance(v, float) else str(v) for v in row.values()] for row in rows]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(headers)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(headers, widths, strict=True))]
    lines += ["  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)) for row in cells]
    return "\n".join(lines)


async def main_async(args: argparse.Namespace) -> int:
    database = args.database_url or os.environ.get("BATON_BENCH_DATABASE_URL")
    async with bench_database(database) as (url, where):
        print(f"bench.runs: database {where}", file=sys.stderr)
        await migrate.upgrade_url(url)
        logs = Path(tempfile.mkdtemp(prefix="baton-bench-runs-"))
        # The daemons here claim and never heartbeat: with the default 60 s lease, runs claimed
        # early in a slow drain would expire and (rightly) be claimed again, which this bench
        # counts as duplicates. Lease expiry has its own tests.
        server = start_server(url, logs / "serve.log", env={"BATON_RUN_LEASE_SECONDS": "3600"})
        try:
            claims = []
            for daemons in args.daemons:
                print(f"bench.runs: {daemons} daemons draining {args.runs} runs", file=sys.stderr)
                claims.append(await drain(server, url, daemons, args.runs))
            costs = await one_event_each(server, url, args.events)
        finally:
            stop_server(server)
    print(table(claims))
    print()
    print(table(costs))
    bad = any(row["duplicates"] or row["missed"] for row in claims) or any(
        row["failures"] for row in costs
    )
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.runs", description=__doc__.split("\n")[0])
    p.add_argument("--runs", type=int, default=10_000)
    p.add_argument("--daemons", type=lambda s: [int(x) for x in s.split(",")], default=[1, 8, 32])
    p.add_argument("--events", type=int, default=2000)
    p.add_argument("--database-url", default=None)
    return asyncio.run(main_async(p.parse_args(argv)))


if __name__ == "__main__":
    raise SystemExit(main())
