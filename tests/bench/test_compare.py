"""The comparison harness (`python -m bench.compare`) against Baton's current schema: the seed's
shape, each workload's Baton document against a real `baton serve` and the bare endpoint's
answer for the same ids, the counting proxy, and the load generator's output. What needs npm
or wrk skips without them, except under CI, where `.ci/run` installs them (tests/tools.py)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg  # type: ignore[import-untyped, unused-ignore]
import httpx
import pytest
from bench.compare import ceiling, postgraphile, postgraphile_sql, report, targets, wire, wrk
from bench.compare.procs import stop
from bench.compare.run import Options, Row
from bench.compare.seed import Seeded, reset_pools, seed
from bench.compare.workloads import (
    FREE,
    FREE_WORKLOADS,
    MARK,
    POOLED,
    SCALED,
    WORKLOADS,
    Workload,
    answers,
    principals,
    value_at,
    workloads,
)

from baton.store.db import Database, libpq_url
from tests.conftest import LiveServer
from tests.pgbouncer import pgbouncer_in_front
from tests.tools import require

TASKS, POOL, WARM = 400, 40, 10


@pytest.fixture(scope="module")
async def world(database_url: str, db: Database) -> AsyncIterator[Seeded]:
    conn = await asyncpg.connect(libpq_url(database_url))
    try:
        yield await seed(conn, TASKS, POOL, WARM)
    finally:
        await conn.close()


@pytest.fixture(scope="module")
async def tokens(world: Seeded, live_server: LiveServer) -> dict[str, str]:
    return {role: await live_server.token(p) for role, p in principals(world).items()}


async def test_the_seed_has_the_promised_shape(database_url: str, world: Seeded) -> None:
    conn = await asyncpg.connect(libpq_url(database_url))
    try:
        like = f"s{world.tag}%"
        states = await conn.fetch(
            "SELECT state, count(*) AS n FROM tasks WHERE id LIKE $1 GROUP BY state", like
        )
        assert len(states) == 10 and sum(r["n"] for r in states) == TASKS
        per_task = await conn.fetch(
            "SELECT t.version, count(e.id) AS events FROM tasks t JOIN task_events e "
            "ON e.task_id = t.id WHERE t.id LIKE $1 GROUP BY t.id",
            like,
        )
        assert len(per_task) == TASKS
        assert all(r["version"] == r["events"] for r in per_task)  # one event per version
        mean = sum(r["events"] for r in per_task) / TASKS
        assert 2.5 <= mean <= 4.5, mean
        depends = await conn.fetchval(
            "SELECT count(*) FROM tasks WHERE id LIKE $1 AND cardinality(depends_on) > 0", like
        )
        assert depends > TASKS / 3
        pool = world.pool_project
        routed = await conn.fetchval(
            "SELECT count(*) FROM tasks WHERE project = $1 AND state = 'routed'", pool
        )
        leased = await conn.fetchval(
            "SELECT count(*) FROM runs r JOIN run_leases l ON l.run_id = r.id "
            "WHERE r.project = $1 AND r.status = 'in_progress' AND r.checkpoint = 'none'",
            pool,
        )
        assert routed == POOL and leased == POOL
    finally:
        await conn.close()


def _normalise(value: Any, *, drop_ids: bool) -> Any:
    """For moves the two sides consume different ids: compare everything else."""
    if isinstance(value, dict):
        return {
            k: _normalise(v, drop_ids=drop_ids)
            for k, v in value.items()
            if not (drop_ids and k == "id")
        }
    if isinstance(value, list):
        return [_normalise(v, drop_ids=drop_ids) for v in value]
    return value


async def _baton(live_server: LiveServer, token: str, w: Workload, value: str) -> Any:
    body = w.body("baton").replace(json.dumps(MARK), json.dumps(value))
    async with httpx.AsyncClient(timeout=30) as http:
        response = await http.post(
            f"{live_server.url}/graphql",
            content=body,
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        )
    answer = response.json()
    assert response.status_code == 200 and "errors" not in answer, answer
    return answer["data"]


@pytest.mark.parametrize("name", WORKLOADS)
async def test_each_workload_answers_like_the_bare_endpoint(
    name: str, world: Seeded, tokens: dict[str, str], live_server: LiveServer, db: Database
) -> None:
    moves = name in ("W3", "W4", "W6")
    w = workloads(world, 1000 + WORKLOADS.index(name))[name]
    baton = await _baton(live_server, tokens[w.who], w, value_at(w.values, 0, 2, 0))
    assert w.expect.strip('"') in json.dumps(baton)
    extra = {
        "project": world.handoff_project,
        "requester": world.agent(1, 0),
        "assignee": world.agent(2, 1),
    }
    who = principals(world)[w.who]
    bare_value = value_at(w.values, 1 if moves else 0, 2, 0)  # another id for a move
    bare = await ceiling.HANDLERS[name](db, who, bare_value, extra)
    assert _normalise(bare, drop_ids=moves) == _normalise(baton, drop_ids=moves)


async def test_reset_pools_puts_consumed_ones_back(
    database_url: str, world: Seeded, db: Database
) -> None:
    conn = await asyncpg.connect(libpq_url(database_url))
    try:
        await reset_pools(conn, world)
        agent = principals(world)["agent"]
        w = workloads(world, 2000)
        await ceiling.w3(db, agent, value_at(w["W3"].values, 0, 1, 5), {})
        await ceiling.w6(db, agent, value_at(w["W6"].values, 0, 1, 5), {})
        assert await reset_pools(conn, world) == (1, 1)
    finally:
        await conn.close()


async def test_the_proxy_counts_statements_and_round_trips(database_url: str) -> None:
    with wire.CountingProxy(database_url) as proxy:
        database = database_url.split("?")[0].rsplit("/", 1)[1]
        conn = await asyncpg.connect(proxy.url(database))
        try:
            await conn.fetchval("SELECT 1")  # prepared on first use: one round trip more
            proxy.take()
            await conn.fetchval("SELECT 1")
            # No wait needed: the proxy counts each message as it forwards it, before its
            # loop can pass the answer back, so the count is complete when the answer is here.
            counts = proxy.take()
        finally:
            await conn.close()
    assert (wire.statements(counts), wire.round_trips(counts)) == (1, 1)


RECORDED = """Running 1s test @ http://127.0.0.1:8000/graphql
  1 threads and 1 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency   512.00us  100.00us   2.00ms   90.00%
    Req/Sec     1.90k   100.00     2.00k    80.00%
  1900 requests in 1.00s, 1.00MB read
Requests/sec:   1899.00
Transfer/sec:      1.00MB
BENCH_RESULT {"requests": 1900, "duration_us": 1000500, "p50_us": 480, "p99_us": 1900, \
"bad": 2, "socket_errors": 1, "status_errors": 0, "sample": "200 {\\"errors\\": []}"}
"""


def test_the_wrk_result_line_is_parsed() -> None:
    result = wrk.parse(RECORDED)
    assert result.requests == 1900 and result.errors == 3
    assert result.p50_ms == 0.48 and result.p99_ms == 1.9
    assert round(result.rate) == 1899
    assert result.sample == '200 {"errors": []}'


async def test_wrk_drives_a_workload_without_errors(
    world: Seeded, tokens: dict[str, str], live_server: LiveServer, tmp_path: Path
) -> None:
    program = require("wrk", "apt-get install wrk")
    w = workloads(world, 3000)["W1"]
    lua = wrk.script(w.body("baton"), tokens[w.who], w.values, w.expect)
    url = f"{live_server.url}/graphql"
    result = await asyncio.to_thread(wrk.run, program, url, lua, tmp_path, concurrency=2, seconds=1)
    assert result.requests > 10 and result.errors == 0, result


@pytest.fixture(scope="module")
async def pgl(
    database_url: str, world: Seeded, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[tuple[postgraphile.Installed, str]]:
    """PostGraphile installed, and its SQL (both targets') in the database: (install, role)."""
    require("npm", "apt-get install npm; bench.compare installs Node 22 and PostGraphile with it")
    role = f"baton_compare_test_{world.tag}"
    conn = await asyncpg.connect(libpq_url(database_url))
    try:
        for statement in [
            *postgraphile_sql.install_sql(role),
            *postgraphile_sql.free_install_sql(),
        ]:
            await conn.execute(statement)
        folder = tmp_path_factory.mktemp("pgl")
        yield await asyncio.to_thread(postgraphile.install, folder), role
    finally:
        for statement in [
            *postgraphile_sql.free_uninstall_sql(),
            *postgraphile_sql.uninstall_sql(role),
        ]:
            await conn.execute(statement)
        await conn.close()


async def _postgraphile(url: str, w: Workload, value: str, token: str | None) -> str:
    body = w.body("postgraphile").replace(json.dumps(MARK), json.dumps(value))
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    async with httpx.AsyncClient(timeout=30) as http:
        response = await http.post(f"{url}/graphql", content=body, headers=headers)
    return response.text


async def test_postgraphile_answers_every_workload(
    database_url: str, world: Seeded, pgl: tuple[postgraphile.Installed, str], tmp_path: Path
) -> None:
    installed, role = pgl
    tokens = {f"t-{r}": p for r, p in principals(world).items()}
    server = postgraphile.start(
        installed, database_url, role, tokens, tmp_path / "pgl.log", pool_size=2
    )
    try:
        for name, w in workloads(world, 4000).items():
            value = value_at(w.values, 0, 2, 1)  # not the ids the other tests took
            text = await _postgraphile(server.url, w, value, f"t-{w.who}")
            assert w.expect in text and '"errors"' not in text, (name, text[:500])
    finally:
        stop(server)


async def test_postgraphile_without_authorization_answers_its_workloads_with_no_token(
    database_url: str, world: Seeded, pgl: tuple[postgraphile.Installed, str], tmp_path: Path
) -> None:
    installed, role = pgl
    server = postgraphile.start(
        installed, database_url, role, {}, tmp_path / "free.log", pool_size=2, free=True
    )
    conn = await asyncpg.connect(libpq_url(database_url))
    try:
        for name in FREE_WORKLOADS:
            w = workloads(world, 4500)[name]
            value = value_at(w.values, 1, 2, 2)  # not the ids the other tests took
            text = await _postgraphile(server.url, w, value, None)
            assert w.expect in text and '"errors"' not in text, (name, text[:500])
        # Its move is the plain one: one event, by the assignee, and a second try changes
        # nothing (the state is checked) and answers no task.
        events = await conn.fetch(
            "SELECT move, actor FROM task_events WHERE task_id = $1 AND move = 'ACCEPT'", value
        )
        assert [tuple(e) for e in events] == [("ACCEPT", world.agent(0, 0))]
        text = await _postgraphile(server.url, w, value, None)
        assert '"result":null' in text.replace(" ", ""), text[:500]
    finally:
        await conn.close()
        stop(server)


def _row(target: str, requests: int, server: float, pg: float, rep: int = 1) -> Row:
    return Row(rep, "W2", 32, target, requests, 1.0, 1.0, 2.0, server, pg, 0)


def test_the_per_core_table_sets_one_baton_process_against_postgraphile() -> None:
    rows = [
        _row("baton", 1000, 0.9, 0.2),  # 0.90 / 0.20 ms per request
        _row(SCALED, 3000, 2.7, 0.6),  # more processes: not in the per-core table
        _row("postgraphile", 2000, 1.0, 0.6),  # 0.50 / 0.30 ms per request
    ]
    lines = report.per_core(rows).splitlines()
    assert len(lines) == 3, lines
    cells = [c.strip() for c in lines[2].strip("|").split("|")]
    assert cells == [
        "W2",
        "32",
        "**0.50** (0.50)",
        "1000 / 2000",
        "0.90 / 0.50",
        "0.20 / 0.30",
        "1.10 / 0.80",
        "0.67",
    ]
    scaled = report.ratios(rows, SCALED).splitlines()[2]
    assert "**1.50** (1.50)" in scaled


def test_the_second_per_core_table_sets_baton_against_postgraphile_without_authorization() -> None:
    rows = [
        _row("baton", 1000, 0.9, 0.2),
        _row("postgraphile", 2000, 1.0, 0.6),
        _row(FREE, 800, 0.4, 0.1),  # 0.50 / 0.125 ms per request
    ]
    lines = report.per_core(rows, FREE).splitlines()
    assert "Baton ÷ PostGraphile, no authorization" in lines[0]
    cells = [c.strip() for c in lines[2].strip("|").split("|")]
    assert cells == [
        "W2",
        "32",
        "**1.25** (1.25)",
        "1000 / 800",
        "0.90 / 0.50",
        "0.20 / 0.12",
        "1.10 / 0.62",
        "1.60",
    ]
    assert "**1.25** (1.25)" in report.ratios(rows).splitlines()[2]


def test_the_authorization_free_target_is_measured_only_on_what_it_answers() -> None:
    assert [w for w in WORKLOADS if answers(FREE, w)] == list(FREE_WORKLOADS)
    assert all(answers(t, w) for t in ("baton", "postgraphile") for w in WORKLOADS)


def test_more_baton_workers_add_a_scaled_target_beside_the_single_process() -> None:
    options = Options(
        tasks=10,
        duration=1,
        warmup=1,
        repetitions=1,
        workloads=["W1"],
        targets=["baton", "postgraphile"],
        concurrency=[1],
        baton_workers=2,
        database_url=None,
    )
    assert options.measured == ["baton", SCALED, "postgraphile"]
    options.baton_workers = 1
    assert options.measured == ["baton", "postgraphile"]


def test_the_pooler_option_measures_baton_through_pgbouncer_beside_it() -> None:
    options = Options(
        tasks=10,
        duration=1,
        warmup=1,
        repetitions=1,
        workloads=["W1"],
        targets=["baton", "postgraphile"],
        concurrency=[1],
        baton_workers=1,
        database_url=None,
        pooler=True,
    )
    assert options.measured == ["baton", POOLED, "postgraphile"]


def test_the_pooler_table_prices_the_pooler_per_request() -> None:
    direct = _row("baton", 1000, 0.9, 0.2)  # 0.90 + 0.20 ms per request
    pooled = _row(POOLED, 800, 0.96, 0.24)  # 1.20 + 0.30 ms per request
    pooled.pooler_cpu = 0.08  # 0.10 ms per request in PgBouncer
    lines = report.pooler([direct, pooled, _row("postgraphile", 2000, 1.0, 0.6)]).splitlines()
    assert len(lines) == 3, lines
    cells = [c.strip() for c in lines[2].strip("|").split("|")]
    assert cells == [
        "W2",
        "32",
        "1000 / 800",
        "**0.80** (0.80)",
        "1.00 / 1.00",
        "0.90 / 1.20",
        "0.10",
        "0.20 / 0.30",
        "1.10 / 1.60",
        "+0.50",
    ]


async def test_the_pooled_target_answers_every_workload_through_pgbouncer(
    server_url: str, database_url: str, world: Seeded, tokens: dict[str, str], tmp_path: Path
) -> None:
    with pgbouncer_in_front(server_url, pool_size=4) as bouncer:
        before = bouncer.transactions(database_url.split("?")[0].rsplit("/", 1)[1])
        server = targets.start_baton(
            bouncer.url(database_url), tmp_path / "pooled.log", 1, direct_url=database_url
        )
        try:
            pooled = LiveServer(server.url, None, server.process)  # type: ignore[arg-type]
            for name, w in workloads(world, 6000).items():
                value = value_at(w.values, 1, 2, 1)  # not the ids the other tests took
                answer = await _baton(pooled, tokens[w.who], w, value)
                assert w.expect.strip('"') in json.dumps(answer), (name, answer)
        finally:
            stop(server)
        assert bouncer.transactions(database_url.split("?")[0].rsplit("/", 1)[1]) > before
