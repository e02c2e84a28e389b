"""Live delivery benchmark: how fast and how completely `taskEvents` reaches N subscribers.

    .venv/bin/python -m bench.live_delivery [--subscribers 1,100,1000,10000] [--events 200]
        [--transport ws|sse] [--processes 4] [--per-event]

For each subscriber level: a fresh `baton serve` process (or `--processes N` of them,
`baton serve --workers N` with Redis between them); N WebSocket (or Server-Sent Events)
subscribers in worker processes, all on one project; a steady stream of moves over HTTP;
latency = receive time at a subscriber - arrival of the mutation's HTTP response. See
bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import multiprocessing
import os
import platform
import secrets
import sys
import tempfile
import time
from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from multiprocessing.connection import Connection
from multiprocessing.context import SpawnProcess
from pathlib import Path
from typing import Any

import httpx
import psutil  # type: ignore[import-untyped, unused-ignore]

from baton.access.principals import ADMIN, Principal, PrincipalKind
from baton.access.tokens import create_token
from baton.store import migrate
from baton.store.db import Database

from .server import Server, bench_database, raise_open_files_limit, start_server, stop_server
from .subscribers import WorkerResult, WorkerSpec, run_worker

DEFAULT_LEVELS = "1,100,1000,10000"
WORKER_TIMEOUT = 180.0
GROWTH_NOTE_BYTES = 20 * 2**20
OPENING_MANY = 20  # subscriptions each worker opens at once, past 20,000 subscribers

PACKET = {
    "task": "Benchmark live delivery",
    "deliverableType": "doc",
    "acceptanceCriteria": ["every subscriber gets every event once"],
}
HAND_OFF = """
mutation($project: String!, $requester: String!, $assignee: String!, $packet: PacketInput!) {
  handOff(input: {project: $project, requester: $requester, assignee: $assignee,
                  packet: $packet}) {
    __typename
    ... on HandOffSuccess { task { id state } events { id } }
    ... on Error { code message }
  }
}
"""
# `id` first: the subscribers find it in the raw frame with a regex.
TASK_EVENTS = """
subscription($filter: TaskEventFilter, $after: ID) {
  taskEvents(filter: $filter, after: $after) {
    id kind taskId move fromState toState actor task { id state version }
  }
}
"""


def move_mutation(name: str, extra: str = "") -> str:
    return f"""
mutation($id: ID!) {{
  {name}(input: {{id: $id{extra}}}) {{
    __typename
    ... on MoveSuccess {{ task {{ state version }} events {{ id at }} }}
    ... on Error {{ code message }}
  }}
}}
"""


START = move_mutation("startTask")
ACCEPT = move_mutation("acceptTask")
PAUSE = move_mutation("pauseTask", ", waitingOn: human")
RESUME = move_mutation("resumeTask")


# --- moves over HTTP ---------------------------------------------------------------------------


@dataclass
class Commit:
    """One move's event. Its commit happened after `began` and before `committed`."""

    event_id: int
    began: float  # the event's `at`: its transaction's start (PostgreSQL now(), same clock)
    sent: float  # time.time() when the request went out
    committed: float  # time.time() when the response arrived: the commit time we report


class Mover:
    """Drives one task through moves, one HTTP request at a time; each move commits one event."""

    def __init__(self, base_url: str, token: str) -> None:
        self.http = httpx.AsyncClient(
            base_url=base_url, headers={"Authorization": f"Bearer {token}"}, timeout=60
        )
        self.task_id = ""

    async def aclose(self) -> None:
        await self.http.aclose()

    async def _call(self, query: str, **variables: Any) -> tuple[dict[str, Any], float, float]:
        sent = time.time()
        response = await self.http.post("/graphql", json={"query": query, "variables": variables})
        arrived = time.time()
        body = response.json()
        if response.status_code != 200 or "errors" in body:
            raise RuntimeError(f"GraphQL call failed: {body}")
        (answer,) = body["data"].values()
        if answer["__typename"] not in ("HandOffSuccess", "MoveSuccess"):
            raise RuntimeError(f"move refused: {answer}")
        return answer, sent, arrived

    async def hand_off(self, project: str, requester: str, assignee: str) -> int:
        """Creates the task (routed); returns the last event id."""
        answer, _, _ = await self._call(
            HAND_OFF, project=project, requester=requester, assignee=assignee, packet=PACKET
        )
        self.task_id = answer["task"]["id"]
        return max(int(e["id"]) for e in answer["events"])

    async def move(self, query: str) -> Commit:
        answer, sent, arrived = await self._call(query, id=self.task_id)
        (event,) = answer["events"]
        at = datetime.fromisoformat(event["at"])
        began = (at if at.tzinfo else at.replace(tzinfo=UTC)).timestamp()
        return Commit(int(event["id"]), began, sent, arrived)

    async def drive(self, count: int, rate: float) -> list[Commit]:
        """`count` moves at `rate` per second (start, then pause/resume cycles)."""
        commits: list[Commit] = []
        begin = time.monotonic()
        for i, query in zip(range(count), _working_moves(), strict=False):
            delay = begin + i / rate - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            commits.append(await self.move(query))
        return commits


def _working_moves() -> Iterator[str]:
    yield START
    while True:
        yield PAUSE
        yield RESUME


# --- subscriber workers ------------------------------------------------------------------------


def workers_for(subscribers: int) -> int:
    """Worker processes for a level: one per ~1,250 subscribers, at least 1, at most 4."""
    return max(1, min(4, math.ceil(subscribers / 1250)))


def split(total: int, parts: int) -> list[int]:
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


class WorkerPool:
    """K worker processes holding the subscribers; talks to each over a pipe. Worker i
    connects from 127.0.0.(2 + i) when `sources`: past ~28,000 sockets, one address runs out
    of ports to the server's."""

    def __init__(
        self, spec: WorkerSpec, subscribers: int, workers: int, *, sources: bool = False
    ) -> None:
        context = multiprocessing.get_context("spawn")
        self.processes: list[SpawnProcess] = []
        self.pipes: list[Connection] = []
        # Opening tens of thousands of subscriptions takes minutes on two cores.
        self.timeout = max(WORKER_TIMEOUT, subscribers / 200)
        for i, count in enumerate(split(subscribers, workers)):
            if count == 0:
                continue
            parent_end, child_end = context.Pipe()
            source = f"127.0.0.{2 + i}" if sources else None
            process = context.Process(
                target=run_worker, args=(child_end, replace(spec, count=count, source=source))
            )
            process.start()
            child_end.close()
            self.processes.append(process)
            self.pipes.append(parent_end)

    async def _gather(self, expected: str) -> list[Any]:
        replies = await asyncio.gather(*(self._receive(pipe, self.timeout) for pipe in self.pipes))
        for reply in replies:
            if reply[0] != expected:
                raise RuntimeError(f"worker said {reply[0]!r}, expected {expected!r}")
        return [reply[1] for reply in replies]

    @staticmethod
    async def _receive(pipe: Connection, seconds: float) -> Any:
        def receive() -> Any:
            try:
                if not pipe.poll(seconds):
                    raise TimeoutError("a subscriber worker did not answer")
                return pipe.recv()
            except EOFError:
                raise RuntimeError("a subscriber worker died (see its traceback above)") from None

        return await asyncio.to_thread(receive)

    async def subscribed(self) -> None:
        errors = [e for errs in await self._gather("subscribed") for e in errs]
        if errors:
            raise RuntimeError(f"{len(errors)} subscribers failed to subscribe, e.g. {errors[0]}")

    async def warm(self, event_id: int) -> None:
        for pipe in self.pipes:
            pipe.send(("warm", event_id))
        replies = await self._gather("warm")
        missing = sum(count for count, _ in replies)
        if missing:
            told = [error for _, errors in replies for error in errors][:3]
            raise RuntimeError(
                f"{missing} subscribers never received the warm-up event (some were told: "
                f"{told or 'nothing'})"
            )

    async def collect(self, commits: list[Commit]) -> list[WorkerResult]:
        ids = [c.event_id for c in commits]
        for pipe in self.pipes:
            pipe.send(("expect", ids))
        results: list[WorkerResult] = await self._gather("result")
        return results

    def stop(self) -> None:
        for pipe in self.pipes:  # a worker still waiting for an order gets EOF and ends
            pipe.close()
        for process in self.processes:
            process.join(timeout=10)
            if process.is_alive():
                process.kill()
                process.join()


# --- one level ---------------------------------------------------------------------------------


@dataclass
class Level:
    subscribers: int
    events: int
    workers: int
    rate: float
    processes: int = 1  # server processes (`baton serve --workers`), Redis between them
    spread: list[int] = field(default_factory=list)  # sockets per server process
    rss_idle: int = 0
    rss_subscribed: int = 0
    rss_end: int = 0  # after the last delivery
    server_cpu: float = 0.0
    subscribe_seconds: float = 0.0  # from starting the workers until all had the warm-up event
    commits: list[Commit] = field(default_factory=list)
    results: list[WorkerResult] = field(default_factory=list)
    error: str | None = None

    @property
    def deliveries(self) -> int:
        return sum(r.deliveries for r in self.results)

    def latencies(self, *, from_transaction_start: bool = False) -> list[float]:
        """Sorted latencies in ms over all (event, subscriber) deliveries: from the mutation's
        response (default), or from the event's transaction start (an upper bound)."""
        merged = array("d")
        for commit in self.commits:
            origin = commit.began if from_transaction_start else commit.committed
            for result in self.results:
                merged.extend((t - origin) * 1000 for t in result.received[commit.event_id])
        return sorted(merged)

    @property
    def wall_seconds(self) -> float:
        """From the first commit to the last delivery."""
        last = max((max(ts) for r in self.results for ts in r.received.values() if ts), default=0)
        return max(last - self.commits[0].committed, 1e-9) if self.commits else 0.0

    def count(self, name: str) -> int:
        return sum(int(getattr(r, name)) for r in self.results)


@dataclass(frozen=True)
class Setup:
    database_url: str
    admin_token: str
    watcher_token: str
    requester: str
    assignee: str
    logs: Path
    transport: str = "ws"
    broadcast_url: str = ""  # for levels of several processes


def tree_rss(server: Server) -> int:
    """RSS of the server and its worker processes (`--workers`), summed."""
    root = psutil.Process(server.pid)
    return sum(int(p.memory_info().rss) for p in (root, *root.children(recursive=True)))


def tree_cpu(server: Server) -> float:
    """CPU seconds of the server and its worker processes so far (those alive now)."""
    root = psutil.Process(server.pid)
    total = 0.0
    for process in (root, *root.children(recursive=True)):
        times = process.cpu_times()
        total += float(times.user + times.system)
    return total


def sockets_per_process(server: Server) -> list[int]:
    """Established connections to the server's port, per worker process (with one process,
    the server's own)."""
    port = int(server.url.rsplit(":", 1)[1])
    root = psutil.Process(server.pid)
    workers = root.children(recursive=True) or [root]
    return [
        sum(
            1
            for c in w.net_connections(kind="tcp")
            if c.laddr and c.laddr.port == port and c.status == psutil.CONN_ESTABLISHED
        )
        for w in workers
    ]


def progress(message: str) -> None:
    """What the run is doing, on stderr (the table goes to stdout)."""
    print(f"  [{datetime.now():%H:%M:%S}] {message}", file=sys.stderr, flush=True)


async def run_level(setup: Setup, level: Level) -> Level:
    n = level.subscribers
    # One token stands for every subscriber here: lift the per-token caps on sockets and
    # streams (and the process's caps on both).
    caps = {
        "BATON_MAX_SOCKETS_PER_TOKEN": "1000000",
        "BATON_MAX_SOCKETS": str(n + 10),
        "BATON_SSE_MAX_STREAMS": str(n + 10),
        "BATON_SSE_MAX_STREAMS_PER_TOKEN": str(n + 10),
    }
    args: list[str] = []
    if level.processes > 1:
        args = ["--workers", str(level.processes)]
        caps["BATON_BROADCAST_URL"] = setup.broadcast_url
        # The workers share the pool size: each gets the one-process default's 16, or tens
        # of thousands of subscriptions opening at once wait past the pool's 2 s for a
        # connection and are refused (`unavailable`).
        size = os.environ.get("BATON_DATABASE_POOL_SIZE", str(16 * level.processes))
        caps["BATON_DATABASE_POOL_SIZE"] = size
    server = await asyncio.to_thread(
        start_server, setup.database_url, setup.logs / f"{n}.log", args, caps
    )
    progress(f"{n} subscribers: baton serve {' '.join(args)} pid {server.pid} at {server.url}")
    mover = Mover(server.url, setup.admin_token)
    pool: WorkerPool | None = None
    try:
        project = f"bench-{n}-{secrets.token_hex(3)}"
        cursor = await mover.hand_off(project, setup.requester, setup.assignee)
        await asyncio.sleep(0.5)
        level.rss_idle = tree_rss(server)
        started = time.monotonic()
        spec = _spec(setup, server, project, cursor)
        if n > 20_000:
            # Tens of thousands opening at once saturate two cores: some would be refused
            # (`unavailable`, the pool's 2 s past) before the first event.
            spec = replace(spec, opening=OPENING_MANY)
        pool = WorkerPool(spec, n, level.workers, sources=n > 20_000)
        await pool.subscribed()
        await pool.warm((await mover.move(ACCEPT)).event_id)
        level.subscribe_seconds = time.monotonic() - started
        level.rss_subscribed = tree_rss(server)
        if level.processes > 1:
            level.spread = sockets_per_process(server)
        progress(
            f"{n} subscribers: all subscribed in {level.subscribe_seconds:.1f} s "
            f"(sockets per process: {level.spread or [n]}); "
            f"driving {level.events} moves at {level.rate:g}/s"
        )
        await _measure(server, mover, pool, level)
    except (RuntimeError, OSError, TimeoutError):
        progress(f"{n} subscribers: server log tail:\n{_tail(server.log)}")
        raise
    finally:
        if pool is not None:
            pool.stop()
        await mover.aclose()
        await asyncio.to_thread(stop_server, server)
    return level


def _tail(log: Path, lines: int = 20) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _spec(setup: Setup, server: Server, project: str, cursor: int) -> WorkerSpec:
    """Every subscriber: the bench project's events after `cursor` (none yet), then live."""
    variables = {"filter": {"projects": [project]}, "after": str(cursor)}
    return WorkerSpec(
        server.url, setup.watcher_token, TASK_EVENTS, variables, count=0, transport=setup.transport
    )


async def _measure(server: Server, mover: Mover, pool: WorkerPool, level: Level) -> None:
    cpu_before = tree_cpu(server)
    level.commits = await mover.drive(level.events, level.rate)
    level.results = await pool.collect(level.commits)
    level.server_cpu = tree_cpu(server) - cpu_before
    level.rss_end = tree_rss(server)


# --- report ------------------------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile of sorted `values`."""
    if not values:
        return math.nan
    return values[min(len(values) - 1, max(0, math.ceil(q / 100 * len(values)) - 1))]


HEADER = (
    f"{'subscribers':>11}  {'events':>6}  {'deliveries':>10}  {'p50 ms':>7}  {'p99 ms':>8}  "
    f"{'deliveries/s':>12}  {'RSS MB (idle→subscribed)':>24}  {'KB/subscriber':>13}  "
    f"{'lost/dup':>8}"
)
DETAIL_HEADER = (
    f"{'subscribers':>11}  {'workers':>7}  {'subscribe s':>11}  {'moves/s':>7}  "
    f"{'offered/s':>9}  {'max ms':>7}  {'tx-start p50/p99':>16}  {'RTT p50':>7}  "
    f"{'server µs':>9}  {'client µs':>9}  {'RSS end MB':>10}  {'kept B/deliv':>12}"
)


def row(level: Level) -> str:
    if level.error is not None:
        return f"{level.subscribers:>11}  FAILED: {level.error}"
    lat = level.latencies()
    mb = 1024 * 1024
    rss = f"{level.rss_idle / mb:.1f} → {level.rss_subscribed / mb:.1f}"
    per_sub = (level.rss_subscribed - level.rss_idle) / 1024 / level.subscribers
    lost_dup = f"{level.count('lost')}/{level.count('duplicates')}"
    return (
        f"{level.subscribers:>11}  {len(level.commits):>6}  {level.deliveries:>10}  "
        f"{percentile(lat, 50):>7.1f}  {percentile(lat, 99):>8.1f}  "
        f"{level.deliveries / level.wall_seconds:>12.0f}  {rss:>24}  {per_sub:>13.1f}  "
        f"{lost_dup:>8}"
    )


def detail_row(level: Level) -> str:
    if level.error is not None:
        return f"{level.subscribers:>11}  FAILED"
    commits = level.commits
    span = commits[-1].committed - commits[0].committed if len(commits) > 1 else 0.0
    moves_per_s = (len(commits) - 1) / span if span > 0 else 0.0
    rtt = sorted((c.committed - c.sent) * 1000 for c in commits)
    upper = level.latencies(from_transaction_start=True)
    deliveries = max(level.deliveries, 1)
    client_cpu = sum(r.cpu_seconds for r in level.results)
    bracket = f"{percentile(upper, 50):.1f} / {percentile(upper, 99):.1f}"
    kept = (level.rss_end - level.rss_subscribed) / deliveries
    return (
        f"{level.subscribers:>11}  {level.workers:>7}  {level.subscribe_seconds:>11.1f}  "
        f"{moves_per_s:>7.2f}  {moves_per_s * level.subscribers:>9.0f}  "
        f"{(upper[-1] if upper else math.nan):>7.1f}  {bracket:>16}  "
        f"{percentile(rtt, 50):>7.1f}  {level.server_cpu / deliveries * 1e6:>9.0f}  "
        f"{client_cpu / deliveries * 1e6:>9.0f}  {level.rss_end / 1024 / 1024:>10.1f}  "
        f"{kept:>12.0f}"
    )


def per_event_rows(level: Level) -> list[str]:
    """Each event's latencies over its subscribers (ms from the move's response): where a
    level's p99 comes from, one slow event or every event's tail."""
    rows = [
        f"{level.subscribers} subscribers, per event:",
        f"{'event':>5}  {'first ms':>8}  {'p50 ms':>7}  {'p99 ms':>7}  {'last ms':>8}",
    ]
    if level.error is not None:
        return rows[:1]
    for n, commit in enumerate(level.commits, 1):
        times = sorted(
            (t - commit.committed) * 1000
            for result in level.results
            for t in result.received[commit.event_id]
        )
        if not times:
            rows.append(f"{n:>5}  none")
            continue
        rows.append(
            f"{n:>5}  {times[0]:>8.1f}  {percentile(times, 50):>7.1f}  "
            f"{percentile(times, 99):>7.1f}  {times[-1]:>8.1f}"
        )
    return rows


def anomalies(level: Level) -> list[str]:
    name = f"{level.subscribers} subscribers"
    if level.error is not None:
        return [f"{name}: failed: {level.error}"]
    notes = [
        f"{name}: {level.count(kind)} {kind.replace('_', ' ')}"
        for kind in ("lost", "duplicates", "unexpected", "out_of_order")
        if level.count(kind)
    ]
    errors = [e for r in level.results for e in r.errors]
    if errors:
        notes.append(f"{name}: {len(errors)} connection errors, e.g. {errors[0]}")
    return notes


FOOTER = """
p50/p99: from the arrival of the mutation's HTTP response (≈ commit) to a subscriber's receive
  time, over all (event, subscriber) deliveries; one clock (time.time()) on both sides. The commit
  lies between the event's transaction start and that response, so the true latency lies between
  p50/p99 and "tx-start p50/p99" (measured from the transaction start; max ms likewise).
deliveries/s: deliveries / (last delivery - first commit). At a modest rate that is the offered
  load, not the capacity; the capacity is about 1e6 / "server µs" per core ("server µs" = server
  CPU per delivery during the run, the moves themselves included).
lost/dup: (event, subscriber) pairs never received / received more than once.
subscribe s: opening every connection and subscription until all had the warm-up event.
RTT p50: the moves' HTTP round trip. kept B/deliv: server RSS growth during the run per delivery.
Rate: each level drives min(--rate, --max-offered / subscribers) moves per second, so that no
  level is pushed past what one server process can deliver; events per level are capped at
  --max-deliveries / subscribers.
CAVEAT: the subscribers are Python (frames read by hand after the handshake, or a regex over
  the event stream's bytes, on uvloop; no JSON parse per event) in worker processes on the SAME
  {cpus} CPUs as the server and PostgreSQL; their CPU per delivery is "client µs". With remote
  clients the server would have those cycles to itself."""


def notes(level: Level) -> list[str]:
    """Findings that are not delivery errors: how the sockets spread over the server
    processes, memory the server kept while delivering."""
    found = []
    if level.spread:
        found.append(
            f"{level.subscribers} subscribers: {level.processes} server processes, sockets "
            f"per process {level.spread}; RSS and server µs are summed over them"
        )
    grown = level.rss_end - level.rss_subscribed
    if level.error is None and grown > GROWTH_NOTE_BYTES:
        per = grown / max(level.deliveries, 1)
        found.append(
            f"{level.subscribers} subscribers: server RSS grew {grown / 2**20:.0f} MB during the "
            f"run ({per:.0f} B per delivery) with a constant set of subscriptions"
        )
    return found


def footer(levels: list[Level], capped: list[str], where: str) -> str:
    lines = [FOOTER.format(cpus=os.cpu_count()).rstrip(), f"database: {where}"]
    if capped:
        lines.append("fewer events for large levels: " + ", ".join(capped))
    for level in levels:
        lines.extend("ANOMALY: " + note for note in anomalies(level))
        lines.extend("NOTE: " + note for note in notes(level))
    return "\n".join(lines)


# --- main --------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m bench.live_delivery",
        description="Live delivery of taskEvents to N WebSocket (or SSE) subscribers; see "
        "bench/README.md.",
    )
    p.add_argument(
        "--transport",
        choices=("ws", "sse"),
        default="ws",
        help="ws: graphql-transport-ws; sse: GraphQL over Server-Sent Events (graphql-sse)",
    )
    p.add_argument("--subscribers", default=DEFAULT_LEVELS, help="comma-separated levels")
    p.add_argument("--events", type=int, default=200, help="measured events per level")
    p.add_argument("--rate", type=float, default=10.0, help="moves (= events) per second")
    p.add_argument(
        "--max-offered",
        type=float,
        default=1500.0,
        help="cap the rate so that rate x subscribers stays under this many deliveries/s",
    )
    p.add_argument(
        "--max-deliveries",
        type=int,
        default=60_000,
        help="cap events per level so that events x subscribers stays under this",
    )
    p.add_argument("--workers", type=int, default=0, help="subscriber processes (0: by level)")
    p.add_argument(
        "--processes",
        type=int,
        default=1,
        help="server processes (baton serve --workers N), Redis between them when more than 1",
    )
    p.add_argument(
        "--broadcast-url",
        default=os.environ.get("BATON_BENCH_BROADCAST_URL", "redis://127.0.0.1:6379"),
        help="BATON_BROADCAST_URL of a level of several processes "
        "(default: $BATON_BENCH_BROADCAST_URL, else redis://127.0.0.1:6379)",
    )
    p.add_argument(
        "--per-event", action="store_true", help="also each event's latencies, level by level"
    )
    p.add_argument(
        "--database-url",
        default=os.environ.get("BATON_BENCH_DATABASE_URL"),
        help="a PostgreSQL server to create the bench database on "
        "(default: $BATON_BENCH_DATABASE_URL, else an embedded PostgreSQL under /tmp)",
    )
    args = p.parse_args(argv)
    args.levels = [int(x) for x in args.subscribers.split(",") if x.strip()]
    return args


def plan(args: argparse.Namespace) -> tuple[list[Level], list[str]]:
    levels, capped = [], []
    for n in args.levels:
        events = max(2, min(args.events, args.max_deliveries // n))
        if events < args.events:
            capped.append(f"{n} subscribers: {events}")
        rate = min(args.rate, args.max_offered / n)
        workers = args.workers or workers_for(n)
        levels.append(
            Level(
                subscribers=n, events=events, workers=workers, rate=rate, processes=args.processes
            )
        )
    return levels, capped


async def prepare(
    database_url: str, logs: Path, transport: str = "ws", broadcast_url: str = ""
) -> Setup:
    await migrate.upgrade_url(database_url)
    db = await Database.connect(database_url, min_size=1, max_size=1)
    try:
        tag = secrets.token_hex(3)
        requester, assignee = f"bench{tag}/requester", f"bench{tag}/watcher"
        admin = await create_token(db, ADMIN)
        watcher = await create_token(db, Principal(PrincipalKind.AGENT, assignee))
    finally:
        await db.close()
    return Setup(database_url, admin, watcher, requester, assignee, logs, transport, broadcast_url)


def machine() -> str:
    return (
        f"{datetime.now().astimezone():%Y-%m-%d %H:%M %Z}, nproc {os.cpu_count()}, "
        f"Python {platform.python_version()}, {platform.platform()}"
    )


async def run_levels(args: argparse.Namespace, levels: list[Level], logs: Path) -> str:
    """Runs every level on one fresh database; returns where the database lived."""
    async with bench_database(args.database_url) as (url, where):
        setup = await prepare(url, logs, args.transport, args.broadcast_url)
        print(HEADER, flush=True)
        for level in levels:
            try:
                await run_level(setup, level)
            except (RuntimeError, OSError, TimeoutError) as exc:
                level.error = f"{type(exc).__name__}: {exc}"[:500]
            print(row(level), flush=True)
    return where


async def main_async(args: argparse.Namespace) -> int:
    started = time.monotonic()
    levels, capped = plan(args)
    print(machine())
    transport = "Server-Sent Events" if args.transport == "sse" else "graphql-transport-ws"
    servers = "one server process"
    if args.processes > 1:
        servers = f"{args.processes} server processes (baton serve --workers), broadcast over "
        servers += args.broadcast_url
    print(
        f"levels {args.levels} over {transport}; {servers}; "
        f"open-files limit {raise_open_files_limit()}\n",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="baton-bench-", dir="/tmp") as logs:
        where = await run_levels(args, levels, Path(logs))
    print("\n" + DETAIL_HEADER)
    for level in levels:
        print(detail_row(level))
    if args.per_event:
        for level in levels:
            print("\n" + "\n".join(per_event_rows(level)))
    print(footer(levels, capped, where))
    print(f"\nwall time {time.monotonic() - started:.0f} s")
    return 1 if any(anomalies(level) for level in levels) else 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    raise_open_files_limit()
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    sys.exit(main())
