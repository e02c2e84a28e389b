"""The MCP door against GraphQL: the same move, the same server, the same sitting.

    .venv/bin/python -m bench.mcp [--calls 500] [--concurrency 8] [--slice 25] [--read]
                                  [--database-url URL]

Against one fresh `baton serve` on a fresh database (an embedded PostgreSQL unless
`--database-url` / BATON_BENCH_DATABASE_URL names a server), the move is `saveCheckpoint` on a
working task (one task per client, so calls never wait on each other's row lock), made:

- over GraphQL HTTP (POST /graphql, httpx), selecting what the MCP tool answers: the task
  (every field the `task` tool gives, `allowedMoves` included) and the events;
- over MCP Streamable HTTP with the official SDK's client, in both protocol eras: 2026-07-28
  (one POST per call, the SDK's default; the door answers it past the SDK's dispatch,
  `baton.mcp.direct`) and the initialize handshake (a session, served by the SDK);
- and the 2026-07-28 call as the SDK writes it, from a plain HTTP client (httpx, like
  GraphQL's): the server's work is the same, the client's far less. On a shared machine the
  SDK's client takes CPU the server then lacks, and at `--concurrency` it bounds the calls per
  second, which changes what a call costs the server (fewer calls share each wake-up and
  write); this row shows the door's cost without that.

With `--read` the call is a read of the task instead, what following a task over MCP costs per
update besides its notification: GraphQL's `task(id)` selecting what the resource holds, against
MCP's `resources/read` of `baton://tasks/{id}` (the 2026-07-28 era's answered by the door past the
SDK's dispatch, the handshake era's by the SDK).

For each door: `--calls` calls one after another (latency p50/p99, server CPU per call), then
`--calls` calls from `--concurrency` clients at once (calls/s, server CPU per call). The doors
take turns in slices (`--slice` calls one after another, or a fifth of that from each client
at once), so that each sees the same load of a shared machine; the server's CPU per slice is
the scheduler's account of its threads (`bench.cpu`, to the ns). The clients run in this
process, so calls/s is bounded by their CPU as well as the server's; the server's CPU per call
is the cost the door adds. The ratios are each door's CPU per call over GraphQL's, over the
whole measurement and (range) over each fifth of it.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import secrets
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from baton.access.principals import Principal, PrincipalKind
from baton.store import migrate
from mcp import Client

from .cpu import on_cpu
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
READ = f"""query($id: ID!) {{ task(id: $id) {{ {TASK} }} }}"""
CHECKPOINT = {"progress": "benchmarking", "nextSteps": ["measure again"]}
BLOCKS = 5  # the ratios' range: over each fifth of a measurement

Call = Callable[[str], Awaitable[None]]
MODERN = "2026-07-28"
PLAIN_HEADERS = {
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": MODERN,
    "Mcp-Method": "tools/call",
}
PLAIN_META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "0"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


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

    def __init__(
        self, label: str, server: Server, bearer: str, mode: str | None, read: bool = False
    ) -> None:
        self.label = label
        self.server = server
        self.bearer = bearer
        self.mode = (
            mode  # None: GraphQL; "plain": MCP from a plain HTTP client; else the SDK's mode
        )
        self.read = read  # a read of the task, not the move

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

            async def graphql_read(task_id: str) -> None:
                answer = await http.post(
                    "/graphql", json={"query": READ, "variables": {"id": task_id}}
                )
                if not (answer.json().get("data") or {}).get("task"):
                    raise RuntimeError(answer.text)

            return graphql_read if self.read else graphql
        if self.mode == "plain":
            return await self._plain(stack, headers)
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

        async def mcp_read(task_id: str) -> None:
            read = await client.read_resource(f"baton://tasks/{task_id}")
            if task_id not in getattr(read.contents[0], "text", ""):
                raise RuntimeError(read)

        return mcp_read if self.read else mcp

    async def _plain(self, stack: AsyncExitStack, headers: dict[str, str]) -> Call:
        """The 2026-07-28 era's `tools/call` as the SDK's client writes it (one POST, the
        same headers, body and `_meta`), from a plain HTTP client: the server does the same
        work, the client a fraction of the SDK's."""
        http = await stack.enter_async_context(
            httpx.AsyncClient(
                base_url=self.server.url,
                headers={**headers, **PLAIN_HEADERS},
                timeout=60,
            )
        )
        ids = itertools.count(1)

        async def mcp_read(task_id: str) -> None:
            uri = f"baton://tasks/{task_id}"
            params = {"uri": uri, "_meta": PLAIN_META}
            call = {"jsonrpc": "2.0", "id": next(ids), "method": "resources/read", "params": params}
            headers = {"Mcp-Method": "resources/read", "Mcp-Name": uri}
            answer = await http.post("/mcp", json=call, headers=headers)
            result = answer.json().get("result") if answer.status_code == 200 else None
            if not isinstance(result, dict) or task_id not in result["contents"][0]["text"]:
                raise RuntimeError(answer.text[:500])

        if self.read:
            return mcp_read

        async def mcp(task_id: str) -> None:
            params = {
                "name": "saveCheckpoint",
                "arguments": {"id": task_id, "checkpoint": CHECKPOINT},
                "_meta": PLAIN_META,
            }
            call = {"jsonrpc": "2.0", "id": next(ids), "method": "tools/call", "params": params}
            answer = await http.post("/mcp", json=call, headers={"Mcp-Name": "saveCheckpoint"})
            result = answer.json().get("result") if answer.status_code == 200 else None
            if not isinstance(result, dict) or result.get("isError") is not False:
                raise RuntimeError(answer.text[:500])

        return mcp


@dataclass
class Tally:
    """What a door's slices of one measurement add up to."""

    cpu: float = 0.0  # server CPU seconds
    wall: float = 0.0
    calls: int = 0
    latencies: list[float] = field(default_factory=list)
    # Server CPU of each block of passes (`BLOCKS` of them), for the spread of the ratios.
    blocks: list[float] = field(default_factory=list)


async def interleaved(
    doors: list[Door], clients: dict[str, list[tuple[Call, str]]], per_client: int, passes: int
) -> dict[str, Tally]:
    """`passes` passes; in each, every door in turn (the order turning by one) makes a slice of
    calls: each of its clients `per_client` calls one after another, the clients at once."""
    tallies = {door.label: Tally(blocks=[0.0] * BLOCKS) for door in doors}
    pid = doors[0].server.pid
    for n in range(passes):
        turn = n % len(doors)
        for door in doors[turn:] + doors[:turn]:
            tally = tallies[door.label]

            async def client(call: Call, task_id: str, latencies: list[float]) -> None:
                for _ in range(per_client):
                    started = time.perf_counter()
                    await call(task_id)
                    latencies.append(time.perf_counter() - started)

            pairs = clients[door.label]
            cpu, started = on_cpu(pid), time.perf_counter()
            await asyncio.gather(*(client(c, t, tally.latencies) for c, t in pairs))
            tally.wall += time.perf_counter() - started
            spent = on_cpu(pid) - cpu
            tally.cpu += spent
            tally.blocks[n * BLOCKS // passes] += spent
            tally.calls += per_client * len(pairs)
    return tallies


async def measure(
    server: Server, url: str, calls: int, concurrency: int, slice_calls: int, read: bool = False
) -> list[dict[str, Any]]:
    tag = secrets.token_hex(3)
    agent = f"mcp{tag}/bench"
    bearer = await token(url, Principal(PrincipalKind.AGENT, agent))
    async with httpx.AsyncClient(
        base_url=server.url, headers={"Authorization": f"Bearer {bearer}"}, timeout=60
    ) as http:
        tasks = [await working_task(http, agent, f"b{tag}") for _ in range(concurrency)]
    doors = [
        Door("GraphQL HTTP", server, bearer, None, read),
        Door("MCP HTTP, 2026-07-28", server, bearer, "auto", read),
        Door("MCP HTTP, handshake", server, bearer, "legacy", read),
        Door("MCP HTTP, 2026-07-28, plain client", server, bearer, "plain", read),
    ]
    async with AsyncExitStack() as stack:
        clients: dict[str, list[tuple[Call, str]]] = {}
        for door in doors:
            clients[door.label] = [(await door.open(stack), task_id) for task_id in tasks]
            # Warm: the connections, the sessions, the engine's caches.
            await asyncio.gather(*(call(task_id) for call, task_id in clients[door.label]))
        print(f"bench.mcp: {calls} calls one after another, each door", file=sys.stderr)
        one = await interleaved(
            doors, {k: v[:1] for k, v in clients.items()}, slice_calls, max(1, calls // slice_calls)
        )
        print(f"bench.mcp: {calls} calls from {concurrency} clients, each door", file=sys.stderr)
        per_client = max(1, slice_calls // 5)
        many = await interleaved(
            doors, clients, per_client, max(1, calls // (per_client * concurrency))
        )
    return rows_of(doors[0].label, one, many, concurrency, "read of a task" if read else None)


def rows_of(
    base: str,
    one: dict[str, Tally],
    many: dict[str, Tally],
    concurrency: int,
    what: str | None = None,
) -> list[dict[str, Any]]:
    """Each door's figures, and its CPU per call over `base`'s: over the whole measurement,
    and the range of that ratio over its blocks of passes."""
    rows = []
    for label in one:
        alone, together = one[label], many[label]
        row: dict[str, Any] = {
            f"door ({what or 'saveCheckpoint'})": label,
            "p50 ms": percentile(alone.latencies, 0.5) * 1000,
            "p99 ms": percentile(alone.latencies, 0.99) * 1000,
            "CPU µs/call (1)": round(alone.cpu * 1e6 / alone.calls),
            f"calls/s ({concurrency})": together.calls / together.wall,
            f"CPU µs/call ({concurrency})": round(together.cpu * 1e6 / together.calls),
        }
        for name, tallies in (("1", one), (str(concurrency), many)):
            mine, theirs = tallies[label], tallies[base]
            ratio = (mine.cpu / mine.calls) / (theirs.cpu / theirs.calls)
            blocks = [m / t for m, t in zip(mine.blocks, theirs.blocks, strict=True) if m and t]
            row[f"CPU ({name}) / GraphQL"] = f"{ratio:.2f}"
            row[f"({name}) range"] = f"{min(blocks):.2f}-{max(blocks):.2f}" if blocks else "n/a"
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
            rows = await measure(server, url, args.calls, args.concurrency, args.slice, args.read)
        finally:
            stop_server(server)
    print(table(rows))
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.mcp", description=__doc__.split("\n")[0])
    p.add_argument("--calls", type=int, default=500)
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument(
        "--slice", type=int, default=25, help="calls a door makes before the next one's turn"
    )
    p.add_argument(
        "--read", action="store_true", help="a read of the task (resources/read), not the move"
    )
    p.add_argument("--database-url", default=None)
    return asyncio.run(main_async(p.parse_args(argv)))


if __name__ == "__main__":
    raise SystemExit(main())
