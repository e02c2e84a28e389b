"""Hostile requests: what each costs the server, and what it does to an unrelated client.

    .venv/bin/python -m bench.hostile [--seconds 8] [--attackers 2] [--database-url URL]
                                      [--src DIR]

One `baton serve` process; a victim sends `{ viewer { handle } }` one request at a time while
`--attackers` clients send one kind of hostile request as fast as they are answered, each
document new to the server (a counter in a comment or a literal defeats a cache keyed by text).
Per kind: the attackers' answers, the victim's latency (p50 / p99 / max), the server's CPU per
hostile request and its peak memory while they ran. `--src DIR` runs the server from another
checkout's `src` (its code, this harness), to measure an older version in the same sitting.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import os
import platform
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from baton.access.principals import Principal
from baton.access.tokens import create_token
from baton.store.db import Database

from .server import Server, bench_database, start_server, stop_server

BIG = "x" * 490
Request = tuple[str, dict[str, Any] | None]


def repeated_names(n: int) -> Request:
    """450 copies of one field: quadratic in graphql-core's overlapping-fields rule."""
    return "{ " + "viewer { handle } " * 450 + f"}} # {n}", None


def fragment_chain(n: int) -> Request:
    """600 fragment spreads in a chain: recursion in validation and execution."""
    chain = " ".join(f"fragment F{i} on Query {{ ...F{i + 1} }}" for i in range(599))
    return f"{{ ...F0 }} {chain} fragment F599 on Query {{ viewer {{ handle }} }} # {n}", None


def largest_valid(n: int) -> Request:
    """A document at the bounds that validates and runs: 30 fragments on one type, each
    selecting the same fields (as many merged copies as allowed), new each time."""
    fields = "id state version requester assignee project verification allowedMoves"
    fragments = " ".join(f"fragment T{i} on Task {{ {fields} }}" for i in range(30))
    spreads = " ".join(f"...T{i}" for i in range(30))
    query = (
        f'{{ tasks(first: 5, filter: {{project: "p{n}"}}) {{ edges {{ node {{ {spreads} }} }} }} }}'
    )
    return f"{query} {fragments}", None


def introspection_over_budget(n: int) -> Request:
    """Introspection whose answer is over the cost budget: twenty aliases of the schema's
    types in full (graphql-core's own rule bounds introspection's depth, not its breadth)."""
    type_ref = "name kind ofType { name kind ofType { name kind } }"
    value = f"name description defaultValue type {{ {type_ref} }}"
    field = f"name description isDeprecated args {{ {value} }} type {{ {type_ref} }}"
    one = (
        f"__schema {{ types {{ name kind description fields {{ {field} }} inputFields {{ {value} "
        f"}} enumValues {{ name description }} interfaces {{ name }} }} }}"
    )
    aliases = " ".join(f"s{i}: {one}" for i in range(20))
    return f"{{ {aliases} }} # {n}", None


def big_variables(n: int) -> Request:
    """Variables at the bound of values (about 200 KB), coerced before anything else."""
    ids = [f"t{n}-{i}" for i in range(1_999)]
    return "query($ids: [ID!]!) { taskGraph(ids: $ids) { nodes { id } } }", {"ids": ids}


def huge_response(task_id: str) -> Callable[[int], Request]:
    """Twenty aliases reading back a task's hundred maximal checkpoints (was ~378 MB)."""

    def make(n: int) -> Request:
        aliases = " ".join(
            f'a{i}: task(id: "{task_id}") {{ events(first: 100) {{ edges {{ node {{ task {{ '
            "protocolObject } } } } }"
            for i in range(20)
        )
        return f"{{ {aliases} }} # {n}", None

    return make


@dataclass
class Row:
    kind: str
    sent: int
    answers: str
    victim: list[float]
    cpu_ms: float
    peak_mib: float


async def post(client: httpx.AsyncClient, request: Request) -> tuple[int, str]:
    query, variables = request
    response = await client.post("/graphql", json={"query": query, "variables": variables})
    try:
        body = response.json()
        codes = {e.get("extensions", {}).get("code", "?") for e in body.get("errors", ())}
        code = ",".join(sorted(codes)) or "ok"
    except ValueError:
        code = "not json"
    return response.status_code, code


def reset_peak(pid: int) -> None:
    with contextlib.suppress(OSError):
        Path(f"/proc/{pid}/clear_refs").write_text("5")  # resets VmHWM to the current RSS


def peak_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def scenario(
    server: Server,
    token: str,
    kind: str,
    make: Callable[[int], Request] | None,
    seconds: float,
    attackers: int,
) -> Row:
    headers = {"Authorization": f"Bearer {token}"}
    counter = itertools.count()
    answers: Counter[str] = Counter()
    victim: list[float] = []
    stop = time.monotonic() + seconds
    async with (
        httpx.AsyncClient(base_url=server.url, headers=headers, timeout=120) as attack,
        httpx.AsyncClient(base_url=server.url, headers=headers, timeout=120) as calm,
    ):

        async def attacker() -> None:
            assert make is not None
            while time.monotonic() < stop:
                status, code = await post(attack, make(next(counter)))
                answers[f"{status} {code}"] += 1

        async def victim_loop() -> None:
            while time.monotonic() < stop:
                started = time.perf_counter()
                status, code = await post(calm, ("{ viewer { handle } }", None))
                assert (status, code) == (200, "ok"), (status, code)
                victim.append((time.perf_counter() - started) * 1000)

        await post(calm, ("{ viewer { handle } }", None))  # the victim's document is cached
        reset_peak(server.pid)
        cpu = server.cpu_seconds()
        tasks = [victim_loop()] + ([attacker() for _ in range(attackers)] if make else [])
        await asyncio.gather(*tasks)
        cpu = server.cpu_seconds() - cpu
    sent = sum(answers.values())
    shown = ", ".join(f"{n} x {a}" for a, n in answers.most_common()) or "-"
    return Row(kind, sent, shown, victim, cpu * 1000 / sent if sent else 0.0, peak_mib(server.pid))


def maximal_checkpoint(n: int) -> dict[str, Any]:
    return {
        "progress": f"{n} " + "p" * 1990,
        "decisions": [BIG] * 20,
        "filesTouched": [f"src/{'f' * 280}/{i}.py" for i in range(100)],
        "nextSteps": [BIG] * 20,
        "openQuestions": [BIG] * 20,
    }


async def seed_big_task(server: Server, token: str) -> str:
    """A task of `bench`'s with a hundred maximal checkpoints, made through the API."""
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=server.url, headers=headers, timeout=60) as client:

        async def call(query: str, **variables: Any) -> dict[str, Any]:
            response = await client.post("/graphql", json={"query": query, "variables": variables})
            body: dict[str, Any] = response.json()
            assert "errors" not in body, body
            data: dict[str, Any] = body["data"]
            return data

        handed = await call(
            """mutation($p: PacketInput!) { handOff(input: {project: "bench", requester:
            "bench/a", assignee: "bench/b", packet: $p}) { ... on HandOffSuccess { task { id }
            } ... on Error { code message } } }""",
            p={
                "task": "Hold big checkpoints",
                "deliverableType": "doc",
                "acceptanceCriteria": ["many"],
            },
        )
        task_id: str = handed["handOff"]["task"]["id"]
        for move in ("acceptTask", "startTask"):
            await call(f'mutation {{ {move}(input: {{id: "{task_id}"}}) {{ __typename }} }}')
        for n in range(100):
            await call(
                """mutation($id: ID!, $c: CheckpointInput!) { saveCheckpoint(input: {id: $id,
                checkpoint: $c}) { __typename } }""",
                id=task_id,
                c=maximal_checkpoint(n),
            )
        return task_id


def percentile(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def table(rows: list[Row]) -> str:
    lines = [
        "| hostile request | sent | answered | victim p50 / p99 / max ms | server CPU ms per "
        "hostile request | peak RSS MiB |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        latency = (
            f"{statistics.median(r.victim):.1f} / {percentile(r.victim, 99):.1f} / "
            f"{max(r.victim):.1f}"
        )
        cpu = f"{r.cpu_ms:.1f}" if r.sent else "—"
        lines.append(
            f"| {r.kind} | {r.sent} | {r.answers} | {latency} | {cpu} | {r.peak_mib:.0f} |"
        )
    return "\n".join(lines)


async def main_async(args: argparse.Namespace) -> int:
    async with bench_database(args.database_url, "baton_hostile") as (url, where):
        env = {"PYTHONPATH": args.src} if args.src else {}
        log = Path(tempfile.mkdtemp(prefix="baton-hostile-"), "serve.log")
        server = start_server(url, log, env=env)
        try:
            db = await Database.connect(url, min_size=1, max_size=1)
            try:
                token = await create_token(db, Principal.parse("bench"))
            finally:
                await db.close()
            task_id = await seed_big_task(server, token)
            kinds: list[tuple[str, Callable[[int], Request] | None]] = [
                ("none (the victim alone)", None),
                ("450 copies of one field, 8 KB", repeated_names),
                ("600 chained fragment spreads", fragment_chain),
                ("largest valid document (30 merged fragments)", largest_valid),
                ("introspection over the cost budget", introspection_over_budget),
                ("variables of 2,000 values", big_variables),
                ("20 aliases of 100 events' protocolObject", huge_response(task_id)),
            ]
            rows = []
            for kind, make in kinds:
                rows.append(await scenario(server, token, kind, make, args.seconds, args.attackers))
                print(f"  {kind}: done", file=sys.stderr)
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
    p.add_argument("--seconds", type=float, default=8.0)
    p.add_argument("--attackers", type=int, default=2)
    p.add_argument(
        "--database-url",
        default=os.environ.get("BATON_BENCH_DATABASE_URL"),
        help="a server to create the bench database on (default: an embedded PostgreSQL)",
    )
    p.add_argument("--src", default=None, help="run the server from this `src` directory")
    args = p.parse_args(argv)
    if args.src:
        args.src = os.path.abspath(args.src)
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    raise SystemExit(main())
