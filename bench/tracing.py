"""What traces and JSON logs cost: server CPU per request, off against on, in one sitting.

    .venv/bin/python -m bench.tracing [--requests 2000] [--concurrency 8] [--repetitions 2]
                                      [--database-url URL] [--baseline SRC]
    .venv/bin/python -m bench.tracing --front [--requests 2000]
    PYTHONPATH=SRC .venv/bin/python -m bench.tracing --front  # another tree's front door

One fresh database (an embedded PostgreSQL unless `--database-url` / BATON_BENCH_DATABASE_URL
names a server) and one `baton serve` per configuration, started in turn, `--repetitions`
times in rotating order:

- `off`: no OTEL_* variable, text logs (the default);
- `json logs`: BATON_LOG_FORMAT=json with `--access-log`, a line per request (to a file);
- `traces, sampled out`: OTLP configured, OTEL_TRACES_SAMPLER=always_off: the instrumentation
  runs and records nothing;
- `traces`: every request traced and exported over OTLP/HTTP to a receiver in this process
  (which counts the spans it gets);
- with `--baseline SRC`, `baseline`: the server of another source tree (an earlier commit's,
  say), with its defaults: what `off` costs against code that had none of this.

Each is measured on two requests over GraphQL HTTP: a query (`task(id)`, one task) and a move
(`saveCheckpoint` on a working task, one per client): `--requests` one after another (p50, p99,
server CPU per request), then `--requests` from `--concurrency` clients at once (requests/s,
server CPU per request). Server CPU is the whole `baton serve` process's from /proc, its span
exporter's thread included. The last column is the CPU per request (one client) over `off`'s,
from the same repetition. A table per repetition goes to stdout, then the medians over the
repetitions; progress to stderr.

`--front` measures, in this process and without a server, what the front door costs per
request with a door that answers at once, and a Baton span while tracing is off: the part of
`off` that is this code's own, too small for the servers' CPU to show.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from baton.access.principals import Principal, PrincipalKind
from baton.store import migrate

from .mcp import CHECKPOINT, SAVE, working_task
from .runs import percentile, table, token
from .server import Server, bench_database, start_server, stop_server

QUERY = "query Task($id: ID!) { task(id: $id) { id state assignee packet { task } updatedAt } }"

Call = Callable[[httpx.AsyncClient, str], Awaitable[None]]


@dataclass
class Sink:
    """An OTLP/HTTP receiver that counts what it is sent."""

    url: str = ""
    spans: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def take(self, body: bytes) -> None:
        request = ExportTraceServiceRequest.FromString(body)
        found = sum(len(s.spans) for r in request.resource_spans for s in r.scope_spans)
        with self.lock:
            self.spans += found


@contextmanager
def sink() -> Iterator[Sink]:
    got = Sink()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            got.take(self.rfile.read(int(self.headers.get("content-length", "0"))))
            self.send_response(200)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    got.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield got
    finally:
        server.shutdown()
        server.server_close()


def configurations(
    collector: str, baseline: str | None = None
) -> list[tuple[str, dict[str, str], tuple[str, ...]]]:
    """(label, environment, arguments) of each `baton serve`; with `baseline` (another source
    tree's `src`), first the server of that tree, with its defaults."""
    traced = {"OTEL_EXPORTER_OTLP_ENDPOINT": collector, "OTEL_BSP_SCHEDULE_DELAY": "500"}
    before = [("baseline", {"PYTHONPATH": baseline}, ())] if baseline else []
    return [
        *before,
        ("off", {}, ()),
        ("json logs", {"BATON_LOG_FORMAT": "json", "BATON_LOG_LEVEL": "info"}, ("--access-log",)),
        ("traces, sampled out", {**traced, "OTEL_TRACES_SAMPLER": "always_off"}, ()),
        ("traces", traced, ()),
    ]


async def query(http: httpx.AsyncClient, task_id: str) -> None:
    answer = await http.post("/graphql", json={"query": QUERY, "variables": {"id": task_id}})
    if answer.json()["data"]["task"]["id"] != task_id:
        raise RuntimeError(answer.text)


async def move(http: httpx.AsyncClient, task_id: str) -> None:
    variables = {"id": task_id, "c": CHECKPOINT}
    answer = await http.post("/graphql", json={"query": SAVE, "variables": variables})
    if "task" not in answer.json()["data"]["saveCheckpoint"]:
        raise RuntimeError(answer.text)


async def measure(
    server: Server, bearer: str, call: Call, tasks: list[str], requests: int
) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {bearer}"}
    clients = [httpx.AsyncClient(base_url=server.url, headers=headers, timeout=60) for _ in tasks]
    try:
        for http, task_id in zip(clients, tasks, strict=True):
            for _ in range(20):  # warm: connections, the engine's caches, the token's grant
                await call(http, task_id)
        cpu = server.cpu_seconds()
        latencies = []
        for _ in range(requests):
            started = time.perf_counter()
            await call(clients[0], tasks[0])
            latencies.append(time.perf_counter() - started)
        one = (server.cpu_seconds() - cpu) / requests
        each = max(1, requests // len(tasks))

        async def loop(http: httpx.AsyncClient, task_id: str) -> None:
            for _ in range(each):
                await call(http, task_id)

        cpu = server.cpu_seconds()
        started = time.perf_counter()
        await asyncio.gather(*(loop(c, t) for c, t in zip(clients, tasks, strict=True)))
        elapsed = time.perf_counter() - started
        many = (server.cpu_seconds() - cpu) / (each * len(tasks))
    finally:
        for http in clients:
            await http.aclose()
    return {
        "p50 ms": percentile(latencies, 0.5) * 1000,
        "p99 ms": percentile(latencies, 0.99) * 1000,
        "CPU µs/req (1)": one * 1e6,
        f"req/s ({len(tasks)})": each * len(tasks) / elapsed,
        f"CPU µs/req ({len(tasks)})": many * 1e6,
    }


async def sitting(
    url: str, logs: Path, collector: Sink, args: argparse.Namespace, turn: int
) -> list[dict[str, Any]]:
    tag = secrets.token_hex(3)
    agent = f"tr{tag}/bench"
    bearer = await token(url, Principal(PrincipalKind.AGENT, agent))
    configs = configurations(collector.url, args.baseline)
    configs = configs[turn % len(configs) :] + configs[: turn % len(configs)]
    rows: list[dict[str, Any]] = []
    for label, env, extra in configs:
        print(f"bench.tracing: {label} (repetition {turn + 1})", file=sys.stderr)
        server = start_server(url, logs / f"serve-{turn}-{len(rows)}.log", extra, env)
        try:
            async with httpx.AsyncClient(
                base_url=server.url, headers={"Authorization": f"Bearer {bearer}"}, timeout=60
            ) as http:
                tasks = [
                    await working_task(http, agent, f"b{tag}") for _ in range(args.concurrency)
                ]
            before = collector.spans
            for name, call in (("query", query), ("move", move)):
                row: dict[str, Any] = {"configuration": label, "request": name}
                row.update(await measure(server, bearer, call, tasks, args.requests))
                rows.append(row)
            await asyncio.sleep(1.0)  # the exporter's last batch
            rows[-1]["spans"] = rows[-2]["spans"] = collector.spans - before
        finally:
            stop_server(server)
    for row in rows:
        base = next(
            r for r in rows if r["configuration"] == "off" and r["request"] == row["request"]
        )
        # CPU time is counted in clock ticks: a short sitting may measure none.
        off = base["CPU µs/req (1)"]
        row["CPU / off"] = f"{row['CPU µs/req (1)'] / off:.2f}" if off > 0 else "n/a"
    order = [label for label, _, _ in configurations("", args.baseline)]
    rows.sort(key=lambda r: (r["request"] != "query", order.index(r["configuration"])))
    return rows


async def main_async(args: argparse.Namespace) -> int:
    database = args.database_url or os.environ.get("BATON_BENCH_DATABASE_URL")
    async with bench_database(database) as (url, where):
        print(f"bench.tracing: database {where}", file=sys.stderr)
        await migrate.upgrade_url(url)
        logs = Path(tempfile.mkdtemp(prefix="baton-bench-tracing-"))
        sittings = []
        with sink() as collector:
            for turn in range(args.repetitions):
                rows = await sitting(url, logs, collector, args, turn)
                sittings.append(rows)
                print(f"\nrepetition {turn + 1}\n")
                print(table(rows), flush=True)
        if len(sittings) > 1:
            print(f"\nmedians of {len(sittings)} repetitions\n")
            print(table(medians(sittings)), flush=True)
    return 0


def medians(sittings: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Each row's numbers, the median over the repetitions (rows in the same order in each);
    the last column recomputed from the medians."""
    out = []
    for rows in zip(*sittings, strict=True):
        row: dict[str, Any] = {}
        for key, value in rows[0].items():
            if isinstance(value, int | float):
                row[key] = statistics.median(r[key] for r in rows)
            else:
                row[key] = value
        out.append(row)
    for row in out:
        base = next(
            r for r in out if r["configuration"] == "off" and r["request"] == row["request"]
        )
        # CPU time is counted in clock ticks: a short sitting may measure none.
        off = base["CPU µs/req (1)"]
        row["CPU / off"] = f"{row['CPU µs/req (1)'] / off:.2f}" if off > 0 else "n/a"
    return out


def front_cost(calls: int) -> int:
    """Per call, the front door with a door that answers at once (`Front` of whichever Baton
    is imported: run it under PYTHONPATH=SRC for another tree's), and a Baton span while
    tracing is off; best of 5 rounds, in this process, without a server or a socket."""
    import timeit

    from baton.app import Front

    async def door(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    async def sent(message: Any) -> None:
        return None

    async def received() -> Any:
        return {"type": "http.request", "body": b"", "more_body": False}

    front = Front(door, door, door)
    headers = [(b"host", b"127.0.0.1"), (b"authorization", b"Bearer x"), (b"accept", b"*/*")]

    async def requests_(n: int) -> None:
        for _ in range(n):
            scope = {"type": "http", "path": "/graphql", "method": "POST", "headers": headers}
            await front(scope, received, sent)

    loop = asyncio.new_event_loop()
    try:
        best = min(
            timeit.timeit(lambda: loop.run_until_complete(requests_(calls)), number=1)
            for _ in range(5)
        )
    finally:
        loop.close()
    print(f"front door, a door that answers at once: {best / calls * 1e6:.2f} µs per request")
    try:
        from baton.telemetry.spans import span
    except ImportError:
        return 0

    def spans_(n: int) -> None:
        for _ in range(n):
            with span("baton.move") as traced:
                if traced is not None:
                    traced.set_attribute("baton.move", "ACCEPT")

    best = min(timeit.timeit(lambda: spans_(calls), number=1) for _ in range(5))
    print(f"a Baton span, tracing off: {best / calls * 1e9:.0f} ns")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.tracing", description=__doc__.split("\n")[0])
    p.add_argument("--requests", type=int, default=2000)
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--repetitions", type=int, default=2)
    p.add_argument("--database-url", default=None)
    p.add_argument(
        "--baseline",
        default=None,
        metavar="SRC",
        help="also measure the server of another source tree (its src folder, e.g. a `git "
        "archive` of an earlier commit), with its defaults, in the same sittings",
    )
    p.add_argument(
        "--front",
        action="store_true",
        help="measure only the front door's per-request cost and a span's, in this process",
    )
    args = p.parse_args(argv)
    if args.front:
        return front_cost(args.requests * 50)
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    raise SystemExit(main())
