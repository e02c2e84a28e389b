"""The webhook benchmark: events delivered to 100 endpoints, one of them down.

    .venv/bin/python -m bench.webhooks [--endpoints 100] [--burst 30] [--paced 20 --rate 0.25]

Against one fresh `baton serve` on a fresh database (an embedded PostgreSQL unless
`--database-url` / BATON_BENCH_DATABASE_URL names a server), with a receiver in this process
(Starlette under uvicorn on 127.0.0.1, answering 200 to every path) and `--endpoints`
endpoints of one owner, all taking every task event; one of them points at a closed port (down:
every attempt is refused, and it backs off). The endpoints are inserted with SQL (the API caps an
owner at 20; the cap is not what is measured).

1. Burst: `--burst` hand-offs (two events each: created, routed) as fast as 4 HTTP clients
   can make them; reported: deliveries acknowledged per second and events per second (an
   event counts once every live endpoint acknowledged it), until the last acknowledgement.
2. Paced: `--paced` hand-offs at `--rate` per second: latency from commit (the event's `at`,
   its transaction's time) to the receiver having the message, p50 / p99 / max.

Each row also counts duplicates (a message received twice at one endpoint; expected 0 here)
and the down endpoint's attempts. Baton, PostgreSQL and the receiver share the machine.
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
from datetime import datetime
from pathlib import Path
from typing import Any

import asyncpg  # type: ignore[import-untyped, unused-ignore]
import httpx
import orjson
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from baton.access.principals import Principal, PrincipalKind
from baton.access.tokens import create_token
from baton.services.webhook_secrets import new_secret
from baton.store import migrate
from baton.store.db import Database, libpq_url

from .server import Server, bench_database, start_server, stop_server

HAND_OFF = """mutation($input: HandOffInput!) { handOff(input: $input) { __typename } }"""


class Receiver:
    def __init__(self) -> None:
        self.arrivals: list[tuple[str, str, float, float]] = []  # path, id, at, event time
        self.changed = asyncio.Event()

    async def handle(self, request: Request) -> Response:
        body = await request.body()
        now = time.time()
        event = orjson.loads(body)["data"]["taskEvents"]
        at = datetime.fromisoformat(event["at"]).timestamp()
        self.arrivals.append((request.url.path, request.headers["webhook-id"], now, at))
        self.changed.set()
        return Response("ok")


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def seed_endpoints(
    url: str, owner: str, receiver: str, count: int, *, down: bool = True
) -> None:
    """`count` endpoints taking every task event from now on; the last one is down (unless
    not `down`)."""
    closed = f"http://127.0.0.1:{_free_port()}/down"  # nothing listens there
    conn = await asyncpg.connect(libpq_url(url))
    try:
        rows = [
            (
                f"wh_bench{n:04d}",
                owner,
                closed if down and n == count - 1 else f"{receiver}/e{n}",
                "plain:" + new_secret(),
            )
            for n in range(count)
        ]
        await conn.executemany(
            """INSERT INTO webhook_endpoints (id, owner, url, description, task_filter, secret,
                   enabled, task_cursor, run_cursor, failures, created_at, updated_at)
               VALUES ($1, $2, $3, 'bench', '{}'::jsonb, $4, TRUE,
                   (SELECT coalesce(max(id), 0) FROM task_events),
                   (SELECT coalesce(max(id), 0) FROM run_events), 0, now(), now())""",
            rows,
        )
    finally:
        await conn.close()


async def hand_offs(server: Server, token: str, owner: str, count: int, rate: float | None) -> None:
    async with httpx.AsyncClient(timeout=60) as client:

        async def one(n: int) -> None:
            variables = {
                "input": {
                    "project": "bench",
                    "requester": f"{owner}/r",
                    "assignee": f"{owner}/a",
                    "packet": {
                        "task": f"bench task {n}",
                        "deliverableType": "doc",
                        "acceptanceCriteria": ["done"],
                    },
                }
            }
            response = await client.post(
                f"{server.url}/graphql",
                json={"query": HAND_OFF, "variables": variables},
                headers={"authorization": f"Bearer {token}"},
            )
            assert response.json()["data"]["handOff"]["__typename"] == "HandOffSuccess"

        if rate is None:
            queue = list(range(count))

            async def worker() -> None:
                while queue:
                    await one(queue.pop())

            await asyncio.gather(*(worker() for _ in range(4)))
            return
        started = time.monotonic()
        pending = []
        for n in range(count):
            await asyncio.sleep(max(0.0, started + n / rate - time.monotonic()))
            pending.append(asyncio.create_task(one(n)))
        await asyncio.gather(*pending)


async def wait_all(receiver: Receiver, expected: int, seconds: float = 600.0) -> None:
    deadline = time.monotonic() + seconds
    while len(receiver.arrivals) < expected:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{len(receiver.arrivals)} of {expected} deliveries arrived")
        receiver.changed.clear()
        try:
            await asyncio.wait_for(receiver.changed.wait(), 1.0)
        except TimeoutError:
            continue


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))]


async def phase(
    name: str,
    server: Server,
    url: str,
    receiver: Receiver,
    token: str,
    owner: str,
    live: int,
    tasks: int,
    rate: float | None,
) -> dict[str, Any]:
    receiver.arrivals.clear()
    down_before = await _down_attempts(url)
    started = time.time()
    await hand_offs(server, token, owner, tasks, rate)
    expected = tasks * 2 * live
    await wait_all(receiver, expected)
    elapsed = max(a[2] for a in receiver.arrivals) - started
    latencies = [(a[2] - a[3]) * 1000 for a in receiver.arrivals]
    seen = Counter((a[0], a[1]) for a in receiver.arrivals)
    return {
        "phase": name,
        "events": tasks * 2,
        "endpoints": f"{live} + 1 down",
        "deliveries": len(receiver.arrivals),
        "seconds": round(elapsed, 1),
        "deliveries/s": round(len(receiver.arrivals) / elapsed),
        "events/s": round(tasks * 2 / elapsed, 1),
        "p50 ms": round(percentile(latencies, 0.5)),
        "p99 ms": round(percentile(latencies, 0.99)),
        "max ms": round(max(latencies)),
        "duplicates": sum(c - 1 for c in seen.values()),
        "down attempts": await _down_attempts(url) - down_before,
    }


async def _down_attempts(url: str) -> int:
    db = await Database.connect(url, min_size=1, max_size=1)
    try:
        value = await db.fetchval(
            "SELECT coalesce(sum(attempts), 0) FROM webhook_deliveries d "
            "JOIN webhook_endpoints w ON w.id = d.endpoint_id WHERE w.url LIKE '%/down'"
        )
        return int(value)
    finally:
        await db.close()


def table(rows: list[dict[str, Any]]) -> str:
    keys = list(rows[0])
    widths = [max(len(k), *(len(str(r[k])) for r in rows)) for k in keys]
    line = "| " + " | ".join(k.ljust(w) for k, w in zip(keys, widths, strict=True)) + " |"
    rule = "| " + " | ".join("-" * w for w in widths) + " |"
    body = [
        "| " + " | ".join(str(r[k]).ljust(w) for k, w in zip(keys, widths, strict=True)) + " |"
        for r in rows
    ]
    return "\n".join([line, rule, *body])


async def main_async(args: argparse.Namespace) -> int:
    database = args.database_url or os.environ.get("BATON_BENCH_DATABASE_URL")
    receiver = Receiver()
    app = Starlette(routes=[Route("/{path:path}", receiver.handle, methods=["POST"])])
    port = _free_port()
    web = uvicorn.Server(
        uvicorn.Config(
            app, host="127.0.0.1", port=port, log_level="warning", lifespan="off", backlog=4096
        )
    )
    serving = asyncio.create_task(web.serve())
    async with bench_database(database) as (url, where):
        print(f"bench.webhooks: database {where}", file=sys.stderr)
        await migrate.upgrade_url(url)
        owner = f"bench{secrets.token_hex(3)}"
        await seed_endpoints(url, owner, f"http://127.0.0.1:{port}", args.endpoints)
        db = await Database.connect(url, min_size=1, max_size=1)
        try:
            token = await create_token(db, Principal(PrincipalKind.OWNER, owner))
        finally:
            await db.close()
        logs = Path(tempfile.mkdtemp(prefix="baton-bench-webhooks-"))
        env = {
            "BATON_WEBHOOK_ALLOW_PRIVATE": "true",
            "BATON_WEBHOOK_ALLOW_HTTP": "true",
            "BATON_WEBHOOK_CONCURRENCY": str(args.concurrency),
        }
        server = start_server(url, logs / "serve.log", env=env)
        rows = []
        try:
            live = args.endpoints - 1
            print(f"bench.webhooks: burst of {args.burst} hand-offs", file=sys.stderr)
            rows.append(
                await phase("burst", server, url, receiver, token, owner, live, args.burst, None)
            )
            print(f"bench.webhooks: {args.paced} hand-offs at {args.rate}/s", file=sys.stderr)
            rows.append(
                await phase(
                    f"paced {args.rate:g}/s",
                    server,
                    url,
                    receiver,
                    token,
                    owner,
                    live,
                    args.paced,
                    args.rate,
                )
            )
            cpu = server.cpu_seconds()
        finally:
            stop_server(server)
    web.should_exit = True
    await serving
    print(table(rows))
    print(
        f"\nCPU: baton serve {cpu:.1f} s, this process (receiver and clients) "
        f"{time.process_time():.1f} s; --concurrency {args.concurrency}; {os.cpu_count()} cores"
    )
    return 1 if any(r["duplicates"] for r in rows) else 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.webhooks", description=__doc__.split("\n")[0])
    p.add_argument("--endpoints", type=int, default=100)
    p.add_argument("--burst", type=int, default=30, help="hand-offs made as fast as possible")
    p.add_argument("--paced", type=int, default=20, help="hand-offs made at --rate per second")
    p.add_argument("--rate", type=float, default=0.25)
    p.add_argument("--concurrency", type=int, default=16, help="BATON_WEBHOOK_CONCURRENCY")
    p.add_argument("--database-url", default=None)
    return asyncio.run(main_async(p.parse_args(argv)))


if __name__ == "__main__":
    raise SystemExit(main())
