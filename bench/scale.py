"""Past one process: 1, 2 and 4 `baton serve` processes on one address, Redis between them.

    .venv/bin/python -m bench.scale [--processes 1,2,4] [--tasks 10000] [--duration 5]

Each level starts N `baton serve --reuse-port` processes on one port (SO_REUSEPORT: the
kernel spreads connections among them; no proxy in the path), each with its own pool of
`--pool-size` connections and `BATON_BROADCAST_URL` pointing at Redis. bench.compare's seed and
workloads drive W2 (a read) and W3 (a move) through that one address with wrk; CPU per request
is summed over the N servers, PostgreSQL and Redis. One WebSocket subscriber sits on each
process (the bench opens sockets until it holds one per process, found from the servers'
connections), subscribed to every task event after the newest one; after W3 each must have
received every event committed since, once and in id order. Markdown to stdout, progress to
stderr; exit status 1 on any error, loss, repeat or disorder. See bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import resource
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import psutil  # type: ignore[import-untyped, unused-ignore]

from baton.access.principals import ADMIN
from baton.access.tokens import create_token
from baton.store.db import Database

from .compare import wrk
from .compare.measure import cpu_between, tree_cpu
from .compare.procs import Process, free_port, start_process, stop, wait_http
from .compare.run import Bench, Options, _connection, prepare, progress
from .compare.seed import reset_pools
from .server import bench_database, raise_open_files_limit
from .subscribers import Subscriber, WorkerSpec

EVERY_EVENT = "subscription($after: ID) { taskEvents(after: $after) { id } }"
SOCKET_ATTEMPTS = 64  # sockets opened at most to hold one on every process
DRAIN_SECONDS = 20.0  # how long subscribers may take to receive the last event
REQUESTS = re.compile(r'^baton_http_requests_total\{path="/graphql",status="200"\} (\S+)$', re.M)


@dataclass
class Cluster:
    url: str
    processes: list[Process]
    metrics_urls: list[str]

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.processes]


@dataclass
class Measured:
    processes: int
    workload: str
    concurrency: int
    requests: int
    seconds: float
    p50_ms: float
    p99_ms: float
    server_cpu: float
    pg_cpu: float | None
    redis_cpu: float | None
    errors: int
    wal_bytes: float
    shares: list[float] = field(default_factory=list)  # each process's part of the requests

    def per_request(self, seconds: float | None) -> str:
        if seconds is None or not self.requests:
            return "-"
        return f"{seconds * 1000 / self.requests:.2f}"


@dataclass
class Delivery:
    processes: int
    events: int
    received: list[int]  # per subscriber
    lost: int
    repeated: int
    disordered: int
    p50_ms: float
    p99_ms: float


# --- the processes ----------------------------------------------------------------------------


def start_cluster(
    url: str, n: int, folder: Path, pool_size: int, broadcast: str, tag: str
) -> Cluster:
    port = free_port()
    processes, metrics = [], []
    try:
        for i in range(n):
            metrics_port = free_port()
            env = {
                **os.environ,
                "BATON_DATABASE_URL": url,
                "BATON_LOG_LEVEL": "warning",
                "BATON_BROADCAST_URL": broadcast,
                "BATON_DATABASE_POOL_SIZE": str(pool_size),
                "BATON_MAX_SOCKETS_PER_TOKEN": str(SOCKET_ATTEMPTS + 10),
                # Its own address for /metrics: the way to reach this one process.
                "BATON_METRICS_ADDRESS": f"127.0.0.1:{metrics_port}",
            }
            command = [sys.executable, "-m", "baton.cli", "serve", "--port", str(port)]
            log = folder / f"scale-{tag}-{n}-{i}.log"
            process = start_process([*command, "--reuse-port"], env, log)
            processes.append(process)
            metrics_url = f"http://127.0.0.1:{metrics_port}/metrics"
            wait_http(process, metrics_url, f"baton serve {i + 1} of {n}")  # answers once ready
            metrics.append(metrics_url)
    except BaseException:
        for process in processes:
            stop(process)
        raise
    return Cluster(f"http://127.0.0.1:{port}", processes, metrics)


def stop_cluster(cluster: Cluster) -> None:
    for process in cluster.processes:
        stop(process)


def redis_pid(url: str) -> int | None:
    """The local redis-server's PID (None when Redis is elsewhere): its CPU is counted too."""
    port = url.rsplit(":", 1)[-1].split("/")[0] if url.count(":") > 1 else "6379"
    for proc in psutil.process_iter(["name", "cmdline"]):
        if proc.info["name"] == "redis-server" and port in " ".join(proc.info["cmdline"] or ()):
            return int(proc.pid)
    return None


def graphql_requests(cluster: Cluster, token: str) -> list[float]:
    """Each process's count of answered /graphql requests (from its own /metrics)."""
    counts = []
    for url in cluster.metrics_urls:
        request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
        with urllib.request.urlopen(request, timeout=10) as response:
            found = REQUESTS.search(response.read().decode())
        counts.append(float(found.group(1)) if found else 0.0)
    return counts


# --- subscribers, one per process -------------------------------------------------------------


def _owner(pids: list[int], local_port: int) -> int | None:
    """Which server process holds the other end of a connection from `local_port`."""
    for pid in pids:
        for conn in psutil.Process(pid).net_connections(kind="tcp"):
            if conn.raddr and conn.raddr.port == local_port:
                return pid
    return None


async def one_per_process(cluster: Cluster, token: str, after: int) -> list[Subscriber]:
    """Subscribers until every process holds one (the kernel picks the process)."""
    loop = asyncio.get_running_loop()
    host, port = "127.0.0.1", int(cluster.url.rsplit(":", 1)[1])
    spec = WorkerSpec(cluster.url, token, EVERY_EVENT, {"after": str(after)}, count=1)
    held: dict[int, Subscriber] = {}
    for _ in range(SOCKET_ATTEMPTS):
        subscribed: asyncio.Future[None] = loop.create_future()
        subscriber = Subscriber(spec, subscribed)
        transport, _ = await loop.create_connection(partial(_same, subscriber), host, port)
        await asyncio.wait_for(subscribed, 30)
        pid = _owner(cluster.pids, transport.get_extra_info("sockname")[1])
        if pid is None or pid in held:
            subscriber.close()
        else:
            held[pid] = subscriber
        if len(held) == len(cluster.pids):
            return [held[pid] for pid in cluster.pids]
    raise RuntimeError(f"{SOCKET_ATTEMPTS} sockets reached only {len(held)} processes")


def _same(subscriber: Subscriber) -> Subscriber:
    return subscriber


async def drain(subscribers: list[Subscriber], last: int) -> None:
    deadline = time.monotonic() + DRAIN_SECONDS
    # Polled: the subscribers are bare protocol objects with nothing to await.
    while time.monotonic() < deadline and any(s.last_id < last for s in subscribers):  # noqa: ASYNC110
        await asyncio.sleep(0.05)


def check_delivery(
    n: int, subscribers: list[Subscriber], committed: list[tuple[int, float]]
) -> Delivery:
    expected = [event_id for event_id, _ in committed]
    began = dict(committed)
    lost = repeated = disordered = 0
    latencies: list[float] = []
    for subscriber in subscribers:
        got = list(subscriber.ids)
        seen: set[int] = set()
        for i, event_id in enumerate(got):
            if event_id in seen:
                repeated += 1
            elif i and event_id < got[i - 1]:
                disordered += 1
            seen.add(event_id)
        lost += len(set(expected) - seen)
        for event_id, at in zip(subscriber.ids, subscriber.times, strict=True):
            if event_id in began:
                latencies.append((at - began[event_id]) * 1000)
    latencies.sort()

    def pct(q: float) -> float:
        return latencies[min(len(latencies) - 1, int(q * len(latencies)))] if latencies else 0

    return Delivery(
        n, len(expected), [len(s.ids) for s in subscribers], lost, repeated, disordered,
        pct(0.50), pct(0.99),
    )  # fmt: skip


# --- measuring --------------------------------------------------------------------------------


@contextlib.contextmanager
def cpu_window(pids: list[int], pg: int | None, redis: int | None) -> Iterator[dict[str, Any]]:
    """CPU seconds spent inside the block: the servers together, PostgreSQL, Redis."""
    servers = [tree_cpu(p) for p in pids]
    others = {"pg": pg, "redis": redis}
    before = {k: tree_cpu(pid) for k, pid in others.items() if pid is not None}
    found: dict[str, Any] = {"pg": None, "redis": None}
    yield found
    found["server"] = sum(cpu_between(b, tree_cpu(p)) for b, p in zip(servers, pids, strict=True))
    for k, pid in others.items():
        if pid is not None:
            found[k] = cpu_between(before[k], tree_cpu(pid))


async def measure(
    bench: Bench, cluster: Cluster, name: str, concurrency: int, redis: int | None, admin: str
) -> Measured:
    if name == "W3":
        async with _connection(bench.url) as conn:
            await reset_pools(conn, bench.world)
    result: wrk.WrkResult | None = None
    for warm in (True, False):
        workload = bench.workload(name, warm=warm)
        lua = wrk.script(workload.body("baton"), bench.token(workload), workload.values,
                         workload.expect)  # fmt: skip
        counts = graphql_requests(cluster, admin)
        wal = await wal_position(bench.url)
        with cpu_window(cluster.pids, bench.pg_pid, redis) as cpu:
            result = await asyncio.to_thread(
                wrk.run,
                bench.wrk_path,
                f"{cluster.url}/graphql",
                lua,
                bench.folder,
                concurrency=concurrency,
                seconds=bench.options.warmup if warm else bench.options.duration,
            )
        after = graphql_requests(cluster, admin)
        wal = await wal_position(bench.url) - wal
    assert result is not None
    done = [a - b for a, b in zip(after, counts, strict=True)]
    total = sum(done) or 1.0
    return Measured(
        len(cluster.processes), name, concurrency, result.requests, result.seconds,
        result.p50_ms, result.p99_ms, cpu["server"], cpu["pg"], cpu["redis"], result.errors,
        wal, [d / total for d in done],
    )  # fmt: skip


async def wal_position(url: str) -> float:
    """The cluster's WAL insert position in bytes (everything written on it, anyone's)."""
    async with _connection(url) as conn:
        return float(await conn.fetchval("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn"))


async def event_log_size(url: str) -> tuple[int, int, int]:
    """Task events: rows, bytes of the table (with TOAST), bytes of its indexes."""
    async with _connection(url) as conn:
        row = await conn.fetchrow(
            "SELECT count(*), pg_table_size('task_events'), pg_indexes_size('task_events') "
            "FROM task_events"
        )
    return int(row[0]), int(row[1]), int(row[2])


async def newest_event(url: str) -> int:
    async with _connection(url) as conn:
        return int(await conn.fetchval("SELECT coalesce(max(id), 0) FROM task_events"))


async def committed_after(url: str, cursor: int) -> list[tuple[int, float]]:
    async with _connection(url) as conn:
        rows = await conn.fetch(
            "SELECT id, extract(epoch FROM at)::float8 FROM task_events WHERE id > $1 ORDER BY id",
            cursor,
        )
    return [(int(r[0]), float(r[1])) for r in rows]


async def run_level(
    bench: Bench, args: argparse.Namespace, n: int, admin: str, redis: int | None
) -> tuple[list[Measured], Delivery]:
    progress(f"{n} process(es): starting")
    cluster = await asyncio.to_thread(
        start_cluster, bench.url, n, bench.folder, args.pool_size, args.broadcast_url,
        bench.world.tag,
    )  # fmt: skip
    subscribers: list[Subscriber] = []
    try:
        cursor = await newest_event(bench.url)
        subscribers = await one_per_process(cluster, admin, cursor)
        rows = []
        for name in args.workloads.split(","):
            row = await measure(bench, cluster, name, args.concurrency, redis, admin)
            progress(f"{n} process(es) {name}: {row.requests / row.seconds:.0f} req/s")
            rows.append(row)
        await asyncio.sleep(1)  # wrk's last requests may still be committing
        committed = await committed_after(bench.url, cursor)
        await drain(subscribers, committed[-1][0] if committed else cursor)
        delivery = check_delivery(n, subscribers, committed)
        return rows, delivery
    finally:
        for subscriber in subscribers:
            subscriber.close()
        await asyncio.sleep(0.2)
        await asyncio.to_thread(stop_cluster, cluster)


# --- report -----------------------------------------------------------------------------------


def throughput_table(rows: list[Measured]) -> str:
    base = {r.workload: r.requests / r.seconds for r in rows if r.processes == rows[0].processes}
    lines = [
        "| processes | workload | c | req/s | ÷ first | p50 ms | p99 ms | server CPU ms/req | "
        "PostgreSQL CPU ms/req | Redis CPU ms/req | WAL B/req | requests per process | errors |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        rate = r.requests / r.seconds
        shares = " / ".join(f"{s:.0%}" for s in r.shares)
        lines.append(
            f"| {r.processes} | {r.workload} | {r.concurrency} | {rate:.0f} | "
            f"{rate / base[r.workload]:.2f} | {r.p50_ms:.1f} | {r.p99_ms:.1f} | "
            f"{r.per_request(r.server_cpu)} | {r.per_request(r.pg_cpu)} | "
            f"{r.per_request(r.redis_cpu)} | {r.wal_bytes / max(r.requests, 1):.0f} | {shares} | "
            f"{r.errors} |"
        )
    return "\n".join(lines)


def delivery_table(deliveries: list[Delivery]) -> str:
    lines = [
        "| processes | events committed | received by each subscriber | lost | repeated | "
        "out of order | p50 ms | p99 ms |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for d in deliveries:
        lines.append(
            f"| {d.processes} | {d.events} | {' / '.join(map(str, d.received))} | {d.lost} | "
            f"{d.repeated} | {d.disordered} | {d.p50_ms:.1f} | {d.p99_ms:.1f} |"
        )
    return "\n".join(lines)


# --- main -------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.scale", description=__doc__.split("\n")[0])
    p.add_argument("--processes", default="1,2,4", help="levels: baton serve processes")
    p.add_argument("--workloads", default="W2,W3", help="bench.compare workloads (W3 last)")
    p.add_argument("--tasks", type=int, default=10_000)
    p.add_argument("--duration", type=float, default=5.0, help="seconds per measurement")
    p.add_argument("--warmup", type=float, default=2.0, help="seconds of warm-up before each")
    p.add_argument("--concurrency", type=int, default=32)
    p.add_argument("--pool-size", type=int, default=16, help="connections per process")
    p.add_argument(
        "--broadcast-url",
        default=os.environ.get("BATON_BENCH_BROADCAST_URL", "redis://127.0.0.1:6379"),
    )
    p.add_argument("--database-url", default=os.environ.get("BATON_BENCH_DATABASE_URL"))
    return p.parse_args(argv)


async def main_async(args: argparse.Namespace) -> int:
    levels = [int(x) for x in args.processes.split(",") if x.strip()]
    workloads = args.workloads.split(",")
    options = Options(
        tasks=args.tasks, duration=args.duration, warmup=args.warmup, repetitions=1,
        workloads=workloads, targets=["baton"], concurrency=[args.concurrency],
        baton_workers=1, database_url=args.database_url,
    )  # fmt: skip
    redis = redis_pid(args.broadcast_url)
    rows: list[Measured] = []
    deliveries: list[Delivery] = []
    started = time.monotonic()
    cpu_before = resource.getrusage(resource.RUSAGE_SELF)
    with tempfile.TemporaryDirectory(prefix="baton-scale-", dir="/tmp") as tmp:
        async with bench_database(args.database_url, "baton_scale") as (url, where):
            bench = await prepare(options, url, Path(tmp), wrk.ensure_wrk())
            db = await Database.connect(url, min_size=1, max_size=1)
            try:
                admin = await create_token(db, ADMIN)
            finally:
                await db.close()
            for n in levels:
                level_rows, delivery = await run_level(bench, args, n, admin, redis)
                rows += level_rows
                deliveries.append(delivery)
            events, table, indexes = await event_log_size(url)
    cpu_after = resource.getrusage(resource.RUSAGE_SELF)
    own = cpu_after.ru_utime + cpu_after.ru_stime - cpu_before.ru_utime - cpu_before.ru_stime
    print(
        f"{time.strftime('%Y-%m-%d %H:%M %Z')} · {os.cpu_count()} CPUs · load average "
        f"{os.getloadavg()[0]:.1f} · {args.tasks} tasks · {args.duration:g} s after "
        f"{args.warmup:g} s warm-up · wrk -c{args.concurrency} · {args.pool_size} connections "
        f"per process · broadcast {args.broadcast_url} · database: {where}\n"
    )
    print(throughput_table(rows))
    print("\nOne subscriber on each process, every task event after the level's start:\n")
    print(delivery_table(deliveries))
    print(
        f"\nserver CPU: the N baton serve processes together; Redis CPU: the local redis-server "
        f"(shared with anything else using it); requests per process: from each one's /metrics."
        f"\nWAL B/req: the cluster's WAL written during the measurement per request (anyone's: "
        f"exact on the embedded default). Event log at the end: {events} task events, "
        f"{table / events:.0f} B each in the table and {indexes / events:.0f} B in its indexes."
        f"\nThis process (subscribers, bookkeeping) used {own:.1f} s of CPU; wall time "
        f"{time.monotonic() - started:.0f} s."
    )
    bad = sum(r.errors for r in rows) + sum(d.lost + d.repeated + d.disordered for d in deliveries)
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    raise_open_files_limit()
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    sys.exit(main())
