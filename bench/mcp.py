"""The MCP door against GraphQL: the same move, the same server, the same sitting.

    .venv/bin/python -m bench.mcp [--calls 500] [--concurrency 8] [--rounds 3]
                                  [--database-url URL]

Against one fresh `baton serve` on a fresh database (an embedded PostgreSQL unless
`--database-url` / BATON_BENCH_DATABASE_URL names a server), the move is `saveCheckpoint` on a
working task (one task per client, so calls never wait on each other's row lock), made:

- over GraphQL HTTP (POST /graphql, httpx), selecting what the MCP tool answers: the task
  (every field the `task` tool gives, `allowedMoves` included) and the events;
- over MCP Streamable HTTP with the official SDK's client, in both protocol eras: 2026-07-28
  (one POST per call, the SDK's default) and the initialize handshake (a session).

For each door: `--calls` calls one after another (latency p50/p99, server CPU per call), then
`--calls` calls from `--concurrency` clients at once (calls/s, server CPU per call). The
clients run in this process, so calls/s is bounded by their CPU as well as the server's; the
server's CPU per call (from /proc, for the whole `baton serve` process, 10 ms ticks) is the
cost the door adds. The doors take turns, `--rounds` times; each figure is the median over the
rounds, and the last columns each door's CPU per call over GraphQL's, the median of the
rounds' ratios (a round's doors run minutes apart at most, on the same server).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import httpx
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from baton.access.principals import Principal, PrincipalKind
from baton.store import migrate
from mcp import Client

from .runs import percentile, table, token
from .server import Server, bench_database, start_server, stop_server

TASK = """id project state waitingOn requester assignee verification version
  packet { task deliverableType acceptanceCriteria context files dependsOn }
  result { summary evidence { kind summary url content } provenance returnedBy returnedAt }
  latestCheckpoint { progress decisions filesTouched nextSteps openQuestions }
  createdAt updatedAt allowedMoves"""
SAVE = f"""mutation($id: ID!, $c: CheckpointInput!) {{
  saveCheckpoint(input: {{id: $id, checkpoint: $c}}) {{
    ... on MoveSuccess {{ task {{ {TASK} }}
      events {{ id kind taskId move fromState toState actor reason at version }} }}
    ... on Error {{ code message }} }} }}"""
HAND_OFF = """mutation($in: HandOffInput!) { handOff(input: $in) {
  ... on HandOffSuccess { task { id } } ... on Error { code message } } }"""
MOVE = """mutation($id: ID!) { %s(input: {id: $id}) { ... on Error { code message } } }"""
CHECKPOINT = {"progress": "benchmarking", "nextSteps": ["measure again"]}

Call = Callable[[str], Awaitable[None]]


async def working_task(http: httpx.AsyncClient, agent: str, project: str) -> str:
    """A task handed to itself (the same owner's gate routes it), accepted and started."""
    packet = {"task": "bench", "deliverableType": "doc", "acceptanceCriteria": ["fast"]}
    answer = await http.post(
        "/graphql",
        json={
            "query": HAND_OFF,
            "variables": {
                "in": {"project": project, "requester": agent, "assignee": agent, "packet": packet}
            },
        },
    )
    task_id: str = answer.json()["data"]["handOff"]["task"]["id"]
    for move in ("acceptTask", "startTask"):
        await http.post("/graphql", json={"query": MOVE % move, "variables": {"id": task_id}})
    return task_id


class Door:
    """One way to make the move: `open()` a client, then `call(task_id)`."""

    def __init__(self, label: str, server: Server, bearer: str, mode: str | None) -> None:
        self.label = label
        self.server = server
        self.bearer = bearer
        self.mode = mode  # None: GraphQL

    async def open(self, stack: AsyncExitStack) -> Call:
        headers = {"Authorization": f"Bearer {self.bearer}"}
        if self.mode is None:
            http = await stack.enter_async_context(
                httpx.AsyncClient(base_url=self.server.url, headers=headers, timeout=60)
            )

            async def graphql(task_id: str) -> None:
                answer = await http.post(
                    "/graphql", json={"query": SAVE, "variables": {"id": task_id, "c": CHECKPOINT}}
                )
                if "task" not in answer.json()["data"]["saveCheckpoint"]:
                    raise RuntimeError(answer.text)

            return graphql
        client_http = await stack.enter_async_context(create_mcp_http_client(headers=headers))
        client = await stack.enter_async_context(
            Client(
                streamable_http_client(f"{self.server.url}/mcp", http_client=client_http),
                mode=self.mode,
                cache=None,
            )
        )

        async def mcp(task_id: str) -> None:
            result = await client.call_tool(
                "saveCheckpoint", {"id": task_id, "checkpoint": CHECKPOINT}
            )
            if result.is_error:
                raise RuntimeError(result.structured_content)

        return mcp


async def sequential(door: Door, task_id: str, calls: int) -> dict[str, float]:
    async with AsyncExitStack() as stack:
        call = await door.open(stack)
        await call(task_id)  # warm: the connection, the session, the engine's caches
        cpu = door.server.cpu_seconds()
        latencies = []
        for _ in range(calls):
            started = time.perf_counter()
            await call(task_id)
            latencies.append(time.perf_counter() - started)
        spent = door.server.cpu_seconds() - cpu
    return {
        "p50 ms": percentile(latencies, 0.5) * 1000,
        "p99 ms": percentile(latencies, 0.99) * 1000,
        "CPU µs/call (1)": spent * 1e6 / calls,
    }


async def concurrent(door: Door, task_ids: list[str], calls: int) -> dict[str, float]:
    per_client = max(1, calls // len(task_ids))
    async with AsyncExitStack() as stack:
        callers = [await door.open(stack) for _ in task_ids]
        await asyncio.gather(*(c(t) for c, t in zip(callers, task_ids, strict=True)))
        cpu = door.server.cpu_seconds()
        started = time.perf_counter()

        async def client(call: Call, task_id: str) -> None:
            for _ in range(per_client):
                await call(task_id)

        await asyncio.gather(*(client(c, t) for c, t in zip(callers, task_ids, strict=True)))
        elapsed = time.perf_counter() - started
        spent = door.server.cpu_seconds() - cpu
    total = per_client * len(task_ids)
    return {
        f"calls/s ({len(task_ids)})": total / elapsed,
        f"CPU µs/call ({len(task_ids)})": spent * 1e6 / total,
    }


async def measure(
    server: Server, url: str, calls: int, concurrency: int, rounds: int
) -> list[dict[str, Any]]:
    tag = secrets.token_hex(3)
    agent = f"mcp{tag}/bench"
    bearer = await token(url, Principal(PrincipalKind.AGENT, agent))
    async with httpx.AsyncClient(
        base_url=server.url, headers={"Authorization": f"Bearer {bearer}"}, timeout=60
    ) as http:
        tasks = [await working_task(http, agent, f"b{tag}") for _ in range(concurrency)]
    doors = [
        Door("GraphQL HTTP", server, bearer, None),
        Door("MCP HTTP, 2026-07-28", server, bearer, "auto"),
        Door("MCP HTTP, handshake", server, bearer, "legacy"),
    ]
    results: dict[str, list[dict[str, float]]] = {door.label: [] for door in doors}
    for r in range(rounds):
        for door in doors:
            print(f"bench.mcp: {door.label}, round {r + 1}", file=sys.stderr)
            figures = await sequential(door, tasks[0], calls)
            figures.update(await concurrent(door, tasks, calls))
            results[door.label].append(figures)
    return rows_of(results, doors[0].label, concurrency)


def rows_of(
    results: dict[str, list[dict[str, float]]], base: str, concurrency: int
) -> list[dict[str, Any]]:
    """Each door's figures, the median over the rounds (the spread of CPU per call beside it),
    and its CPU per call over `base`'s: the median of each round's ratio."""
    one, many = "CPU µs/call (1)", f"CPU µs/call ({concurrency})"
    rows = []
    for label, rounds in results.items():
        row: dict[str, Any] = {"door (saveCheckpoint)": label}
        for key in rounds[0]:
            values = [r[key] for r in rounds]
            row[key] = (
                round(statistics.median(values)) if "µs" in key else statistics.median(values)
            )
            if key == one:
                row["(1) min-max"] = f"{min(values):.0f}-{max(values):.0f}"
        for key, head in ((one, "CPU (1) / GraphQL"), (many, f"CPU ({concurrency}) / GraphQL")):
            ratios = [m[key] / b[key] for m, b in zip(rounds, results[base], strict=True)]
            row[head] = f"{statistics.median(ratios):.2f}"
        rows.append(row)
    return rows


async def main_async(args: argparse.Namespace) -> int:
    database = args.database_url or os.environ.get("BATON_BENCH_DATABASE_URL")
    async with bench_database(database) as (url, where):
        print(f"bench.mcp: database {where}", file=sys.stderr)
        await migrate.upgrade_url(url)
        logs = Path(tempfile.mkdtemp(prefix="baton-bench-mcp-"))
        server = start_server(url, logs / "serve.log")
        try:
            rows = await measure(server, url, args.calls, args.concurrency, args.rounds)
        finally:
            stop_server(server)
    print(table(rows))
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.mcp", description=__doc__.split("\n")[0])
    p.add_argument("--calls", type=int, default=500)
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--rounds", type=int, default=3, help="every door once per round, in turn")
    p.add_argument("--database-url", default=None)
    return asyncio.run(main_async(p.parse_args(argv)))


if __name__ == "__main__":
    raise SystemExit(main())
