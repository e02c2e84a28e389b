"""One comparison: the database, the seed, the targets, the counts and the measurements."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import asyncpg  # type: ignore[import-untyped, unused-ignore]
import httpx

from baton.access.tokens import create_token
from baton.store import migrate
from baton.store.db import Database, libpq_url
from bench.pgbouncer import PgBouncer
from bench.server import bench_database

from . import ceiling, postgraphile, postgraphile_sql, targets, wire, wrk
from .measure import cpu_between, postmaster_pid, tree_cpu
from .procs import Process, stop
from .seed import Seeded, reset_pools, seed
from .workloads import (
    FREE,
    MARK,
    POOLED,
    SCALED,
    STORED_PACKET,
    Workload,
    answers,
    principals,
    value_at,
    workloads,
)

COUNT_REQUESTS = 10  # requests per (workload, target) whose statements are counted
WRITE_RATE_CAP = 4000  # moves/s no target reaches here; sizes the pools


def progress(message: str) -> None:
    print(f"  [{datetime.now():%H:%M:%S}] {message}", file=sys.stderr, flush=True)


@dataclass
class Options:
    tasks: int
    duration: float
    warmup: float
    repetitions: int
    workloads: list[str]
    targets: list[str]
    concurrency: list[int]
    baton_workers: int
    database_url: str | None
    logs: Path | None = None
    pooler: bool = False  # also Baton through PgBouncer in transaction mode (`POOLED`)

    @property
    def measured(self) -> list[str]:
        """The targets measured: those asked for, with Baton at `baton_workers` processes
        (`SCALED`) right after the one-process `baton` when more than one is asked for, and
        the one-process Baton through PgBouncer (`POOLED`) with `pooler`."""
        out: list[str] = []
        for target in self.targets:
            out.append(target)
            if target == "baton" and self.pooler:
                out.append(POOLED)
            if target == "baton" and self.baton_workers > 1:
                out.append(SCALED)
        return out


@dataclass
class Row:
    repetition: int
    workload: str
    concurrency: int
    target: str
    requests: int
    seconds: float
    p50_ms: float
    p99_ms: float
    server_cpu: float  # seconds, the target's process tree (the client itself for asyncpg)
    pg_cpu: float | None  # seconds, the PostgreSQL cluster's processes
    errors: int
    sample: str = ""
    pooler_cpu: float | None = None  # seconds, PgBouncer's process (`POOLED` only)

    @property
    def rate(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0

    def per_request_ms(self, seconds: float | None) -> float | None:
        return None if seconds is None or not self.requests else seconds * 1000 / self.requests


@dataclass
class Outcome:
    rows: list[Row] = field(default_factory=list)
    counts: dict[tuple[str, str], tuple[float, float]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    seed_seconds: float = 0.0
    versions: str = ""
    where: str = ""


@dataclass
class Bench:
    options: Options
    url: str
    world: Seeded
    tokens: targets.Tokens
    role: str
    folder: Path
    wrk_path: str
    pg_pid: int | None
    servers: targets.Servers = field(default_factory=targets.Servers)
    installed: postgraphile.Installed | None = None
    pooler: PgBouncer | None = None  # with `--pooler`
    measurement: int = 0
    seed_seconds: float = 0.0

    @property
    def hand_off(self) -> dict[str, Any]:
        """W4's fixed inputs for the ceiling, as PostGraphile takes them."""
        return {
            "project": self.world.handoff_project,
            "requester": self.world.agent(1, 0),
            "assignee": self.world.agent(2, 1),
            "packet": STORED_PACKET,
        }

    def workload(self, name: str, *, warm: bool = False) -> Workload:
        self.measurement += 1
        return workloads(self.world, self.measurement, warm=warm)[name]

    # --- targets ------------------------------------------------------------------------------

    def start(self, name: str, database_url: str, log: Path, *, pooled_url: str = "") -> Process:
        """Target `name` on `database_url`; `POOLED` takes its pool's URL from `pooled_url`
        (default: the pooler's for `database_url`) and `database_url` as its direct one."""
        if name == "baton":  # one process: the per-core comparison
            return targets.start_baton(database_url, log, 1)
        if name == POOLED:
            assert self.pooler is not None
            pooled_url = pooled_url or self.pooler.url(database_url)
            return targets.start_baton(pooled_url, log, 1, direct_url=database_url)
        if name == SCALED:
            return targets.start_baton(database_url, log, self.options.baton_workers)
        if name == "bare":
            return targets.start_bare(database_url, log, self.tokens, self.hand_off)
        assert self.installed is not None
        return targets.start_postgraphile(
            self.installed,
            database_url,
            self.role,
            self.tokens,
            log,
            ceiling.POOL_SIZE,
            free=name == FREE,
        )

    def endpoint(self, target: str, workload: Workload) -> str:
        server = self.servers.processes[target]
        return (
            f"{server.url}/{workload.name.lower()}" if target == "bare" else f"{server.url}/graphql"
        )

    def token(self, workload: Workload) -> str:
        return self.tokens.by_role[workload.who]

    # --- one request, for checks and counts ---------------------------------------------------

    async def once(self, http: httpx.AsyncClient, target: str, workload: Workload, n: int) -> Any:
        value = value_at(workload.values, 0, 1, n)
        body = workload.body(target).replace(f'"{MARK}"', _json_string(value))
        response = await http.post(
            self.endpoint(target, workload),
            content=body,
            headers={
                "Authorization": f"Bearer {self.token(workload)}",
                "Content-Type": "application/json",
            },
        )
        try:
            return response.json()
        except ValueError:
            return {"errors": [f"HTTP {response.status_code}: {response.text[:300]}"]}

    # --- measurements -------------------------------------------------------------------------

    async def measure(self, repetition: int, name: str, concurrency: int, target: str) -> Row:
        if name in ("W3", "W6"):
            await asyncio.sleep(1)  # the previous run's last requests may still be committing
            async with _connection(self.url) as conn:
                await reset_pools(conn, self.world)
        if target == "asyncpg":
            return await self._measure_client(repetition, name, concurrency)
        pid = self.servers.processes[target].pid
        rows = []
        for warm in (True, False):
            workload = self.workload(name, warm=warm)
            url = self.endpoint(target, workload)
            body, token = workload.body(target), self.token(workload)
            lua = wrk.script(body, token, workload.values, workload.expect)
            cpu, pg, pooler = tree_cpu(pid), self._pg_cpu(), self._pooler_cpu(target)
            result = await asyncio.to_thread(
                wrk.run,
                self.wrk_path,
                url,
                lua,
                self.folder,
                concurrency=concurrency,
                seconds=self.options.warmup if warm else self.options.duration,
            )
            server_cpu, pg_cpu = cpu_between(cpu, tree_cpu(pid)), _minus(self._pg_cpu(), pg)
            pooler_cpu = _minus(self._pooler_cpu(target), pooler)
            rows.append(
                Row(
                    repetition,
                    name,
                    concurrency,
                    target,
                    result.requests,
                    result.seconds,
                    result.p50_ms,
                    result.p99_ms,
                    server_cpu,
                    pg_cpu,
                    result.errors,
                    result.sample,
                    pooler_cpu,
                )
            )
        return rows[-1]

    async def _measure_client(self, repetition: int, name: str, concurrency: int) -> Row:
        workload = self.workload(name)
        client = targets.start_client(
            self.url,
            name,
            self.tokens.principals[self.token(workload)],
            workload.values,
            self.hand_off,
            concurrency=concurrency,
            seconds=self.options.duration,
            warmup=self.options.warmup,
        )
        assert client.stdin is not None and client.stdout is not None
        try:
            if (await asyncio.to_thread(client.stdout.readline)).strip() != "warm":
                raise RuntimeError("the asyncpg client failed during its warm-up")
            if name in ("W3", "W6"):  # it starts its values again: the pools put back
                async with _connection(self.url) as conn:
                    await reset_pools(conn, self.world)
            pg = self._pg_cpu()
            client.stdin.write("go\n")
            client.stdin.flush()
            result = json.loads(await asyncio.to_thread(client.stdout.readline))
            pg_cpu = _minus(self._pg_cpu(), pg)
            client.stdin.write("done\n")
            client.stdin.flush()
        finally:
            client.stdin.close()
            await asyncio.to_thread(client.wait, 30)
        return Row(
            repetition,
            name,
            concurrency,
            "asyncpg",
            result["requests"],
            result["seconds"],
            result["p50_ms"],
            result["p99_ms"],
            result["cpu_seconds"],
            pg_cpu,
            result["errors"],
        )

    def _pg_cpu(self) -> dict[int, float] | None:
        return None if self.pg_pid is None else tree_cpu(self.pg_pid)

    def _pooler_cpu(self, target: str) -> dict[int, float] | None:
        if target != POOLED or self.pooler is None:
            return None
        return tree_cpu(self.pooler.pid)


def _minus(after: dict[int, float] | None, before: dict[int, float] | None) -> float | None:
    return None if after is None or before is None else cpu_between(before, after)


def _json_string(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


@contextlib.asynccontextmanager
async def _connection(url: str) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(libpq_url(url))
    try:
        yield conn
    finally:
        await conn.close()


# --- setting up ----------------------------------------------------------------------------------


GATE_RULES = """
INSERT INTO gate_rules (owner, requester, project, deliverable_types, decision, priority)
SELECT o, '*/*', 'archive-*', '{}'::text[], 'DENY', 10 FROM unnest($1::text[]) AS o
UNION ALL SELECT o, '*/*', 'docs-*', '{doc}'::text[], 'ALLOW', 5 FROM unnest($1::text[]) AS o
"""


async def prepare(options: Options, url: str, folder: Path, wrk_path: str) -> Bench:
    await migrate.upgrade_url(url)
    warm_pool = int(WRITE_RATE_CAP * options.warmup)
    pool = warm_pool + int(WRITE_RATE_CAP * options.duration)
    async with _connection(url) as conn:
        started = time.monotonic()
        world = await seed(conn, options.tasks, pool, warm_pool)
        elapsed = time.monotonic() - started
        await conn.execute(GATE_RULES, world.owners)
        events = await conn.fetchval("SELECT count(*) FROM task_events")
    progress(
        f"seeded {options.tasks} tasks, {pool} routed and {pool} claimed runs in the pools, "
        f"{events} events, in {elapsed:.1f} s"
    )
    db = await Database.connect(url, min_size=1, max_size=1)
    try:
        by_role, by_token = {}, {}
        for role, principal in principals(world).items():
            token = await create_token(db, principal)
            by_role[role], by_token[token] = token, principal
    finally:
        await db.close()
    bench = Bench(
        options,
        url,
        world,
        targets.Tokens(by_role, by_token),
        f"baton_compare_{world.tag}",
        folder,
        wrk_path,
        await postmaster_pid(url),
    )
    bench.seed_seconds = elapsed
    return bench


@contextlib.asynccontextmanager
async def postgraphile_installed(bench: Bench) -> AsyncIterator[None]:
    """PostGraphile's SQL in the bench database, for both targets (removed with its role at the
    end), and its npm packages in the bench's temporary folder."""
    async with _connection(bench.url) as conn:
        for statement in postgraphile_sql.install_sql(bench.role):
            await conn.execute(statement)
        for statement in postgraphile_sql.free_install_sql():
            await conn.execute(statement)
    try:
        progress("installing PostGraphile and Node 22 with npm")
        bench.installed = await asyncio.to_thread(postgraphile.install, bench.folder / "pgl")
        progress(bench.installed.version().strip())
        yield
    finally:
        async with _connection(bench.url) as conn:
            for statement in postgraphile_sql.free_uninstall_sql():
                await conn.execute(statement)
            for statement in postgraphile_sql.uninstall_sql(bench.role):
                await conn.execute(statement)


# PgBouncer's server sessions for `--pooler`: as many as Baton's own pool, so that the pooler's
# cost is measured, not a smaller pool's.
POOLER_SESSIONS = 16


@contextlib.contextmanager
def pooler_running(url: str, folder: Path) -> Iterator[PgBouncer]:
    bouncer = PgBouncer(url, pool_size=POOLER_SESSIONS)
    bouncer.start(folder / "pgbouncer.log")
    progress(f"PgBouncer (transaction mode, {POOLER_SESSIONS} server sessions) on {bouncer.port}")
    try:
        yield bouncer
    finally:
        bouncer.stop()


@contextlib.contextmanager
def running(bench: Bench) -> Iterator[None]:
    try:
        for name in bench.options.measured:
            if name != "asyncpg":
                progress(f"starting {name}")
                bench.servers.processes[name] = bench.start(
                    name, bench.url, bench.folder / f"{name}.log"
                )
        yield
    finally:
        bench.servers.stop()


# --- checks and counts -----------------------------------------------------------------------


async def check(bench: Bench) -> list[str]:
    """One request of each workload on each server: the problems found (before measuring)."""
    problems = []
    async with httpx.AsyncClient(timeout=30) as http:
        for name in bench.options.workloads:
            for target in [t for t in bench.servers.processes if answers(t, name)]:
                workload = bench.workload(name)
                answer = await bench.once(http, target, workload, 0)
                text = str(answer)
                if "errors" in answer or workload.expect.strip('"') not in text:
                    problems.append(f"{name} on {target}: {text[:400]}")
                async with _connection(bench.url) as conn:  # the next target, the same ids
                    await reset_pools(conn, bench.world)
    return problems


async def count(bench: Bench) -> dict[tuple[str, str], tuple[float, float]]:
    """Statements and round trips per request of each workload on each target, through a
    counting proxy (each server started again on it; the direct client in this process)."""
    found: dict[tuple[str, str], tuple[float, float]] = {}
    database = urlsplit(bench.url).path.lstrip("/")
    with wire.CountingProxy(bench.url) as proxy:
        url = proxy.url(database)
        for target in bench.options.targets:  # SCALED runs the same statements as `baton`
            progress(f"counting statements of {target}")
            if target == "asyncpg":
                await _count_client(bench, url, proxy, found)
                continue
            server = bench.start(target, url, bench.folder / f"{target}-count.log")
            saved = bench.servers.processes.get(target)
            bench.servers.processes[target] = server
            try:
                async with httpx.AsyncClient(timeout=30) as http:
                    for name in [w for w in bench.options.workloads if answers(target, w)]:
                        workload = bench.workload(name)
                        for n in range(3):  # warm-up: prepared statements, caches, pools
                            answer = await bench.once(http, target, workload, n)
                            if n == 0 and "errors" in answer:
                                progress(f"{name} on {target} failed: {str(answer)[:500]}")
                        await asyncio.sleep(0.2)
                        proxy.take()
                        for n in range(3, 3 + COUNT_REQUESTS):
                            await bench.once(http, target, workload, n)
                        await asyncio.sleep(0.2)
                        counts = proxy.take()
                        found[name, target] = _per_request(counts)
            finally:
                async with _connection(bench.url) as conn:
                    await reset_pools(conn, bench.world)
                stop(server)
                if saved is not None:
                    bench.servers.processes[target] = saved
                else:
                    del bench.servers.processes[target]
    if bench.pooler is not None and "baton" in bench.options.targets:
        found.update(await _count_pooled(bench, database))
    async with _connection(bench.url) as conn:
        await reset_pools(conn, bench.world)
    return found


async def _count_pooled(bench: Bench, database: str) -> dict[tuple[str, str], tuple[float, float]]:
    """`POOLED`'s statements and round trips, counted between Baton and PgBouncer."""
    assert bench.pooler is not None
    found: dict[tuple[str, str], tuple[float, float]] = {}
    progress(f"counting statements of {POOLED}")
    with wire.CountingProxy(bench.pooler.url(bench.url)) as proxy:
        log = bench.folder / f"{POOLED}-count.log"
        server = bench.start(POOLED, bench.url, log, pooled_url=proxy.url(database))
        try:
            async with httpx.AsyncClient(timeout=30) as http:
                bench.servers.processes[POOLED] = server
                for name in bench.options.workloads:
                    workload = bench.workload(name)
                    for n in range(3):
                        await bench.once(http, POOLED, workload, n)
                    await asyncio.sleep(0.2)
                    proxy.take()
                    for n in range(3, 3 + COUNT_REQUESTS):
                        await bench.once(http, POOLED, workload, n)
                    await asyncio.sleep(0.2)
                    found[name, POOLED] = _per_request(proxy.take())
        finally:
            del bench.servers.processes[POOLED]
            async with _connection(bench.url) as conn:
                await reset_pools(conn, bench.world)
            stop(server)
    return found


async def _count_client(
    bench: Bench,
    url: str,
    proxy: wire.CountingProxy,
    found: dict[tuple[str, str], tuple[float, float]],
) -> None:
    db = await Database.connect(url, min_size=1, max_size=ceiling.POOL_SIZE)
    try:
        for name in bench.options.workloads:
            workload = bench.workload(name)
            who = bench.tokens.principals[bench.token(workload)]
            handler = ceiling.HANDLERS[name]
            for n in range(3):
                await handler(db, who, value_at(workload.values, 0, 1, n), bench.hand_off)
            await asyncio.sleep(0.2)
            proxy.take()
            for n in range(3, 3 + COUNT_REQUESTS):
                await handler(db, who, value_at(workload.values, 0, 1, n), bench.hand_off)
            await asyncio.sleep(0.2)
            found[name, "asyncpg"] = _per_request(proxy.take())
    finally:
        await db.close()


def _per_request(counts: Any) -> tuple[float, float]:
    return wire.statements(counts) / COUNT_REQUESTS, wire.round_trips(counts) / COUNT_REQUESTS


# --- the whole run ---------------------------------------------------------------------------


async def compare(options: Options, wrk_path: str) -> Outcome:
    outcome = Outcome()
    with tempfile.TemporaryDirectory(prefix="baton-compare-", dir="/tmp") as tmp:
        folder = Path(tmp)
        if options.logs is not None:
            folder = options.logs
            folder.mkdir(parents=True, exist_ok=True)
        async with bench_database(options.database_url, "baton_compare") as (url, where):
            outcome.where = where
            progress(f"database on {where}")
            bench = await prepare(options, url, folder, wrk_path)
            outcome.seed_seconds = bench.seed_seconds
            async with contextlib.AsyncExitStack() as stack:
                if options.pooler:
                    bench.pooler = stack.enter_context(pooler_running(url, folder))
                if {"postgraphile", FREE} & set(options.targets):
                    await stack.enter_async_context(postgraphile_installed(bench))
                    assert bench.installed is not None
                    outcome.versions = bench.installed.version().strip()
                outcome.counts = await count(bench)
                stack.enter_context(running(bench))
                problems = await check(bench)
                for problem in problems:
                    progress(f"CHECK FAILED: {problem}")
                outcome.notes.extend(f"check failed: {p}" for p in problems)
                await _measure_all(bench, options, outcome)
    return outcome


async def _measure_all(bench: Bench, options: Options, outcome: Outcome) -> None:
    pairs = sum(answers(t, w) for t in options.measured for w in options.workloads)
    total = options.repetitions * len(options.concurrency) * pairs
    done = 0
    for repetition in range(1, options.repetitions + 1):
        for name in options.workloads:
            for concurrency in options.concurrency:
                # Rotate the targets' order each repetition, so none always goes first.
                measured = [t for t in options.measured if answers(t, name)]
                shift = (repetition - 1) % len(measured)
                order = measured[shift:] + measured[:shift]
                for target in order:
                    done += 1
                    row = await bench.measure(repetition, name, concurrency, target)
                    outcome.rows.append(row)
                    progress(
                        f"[{done}/{total}] rep {repetition} {name} c={concurrency} {target}: "
                        f"{row.rate:.0f} req/s, p50 {row.p50_ms:.1f} ms, errors {row.errors}"
                        + (f" (first: {row.sample[:200]})" if row.errors and row.sample else "")
                    )
