"""Every door side by side: server CPU per operation and per delivered event, in one table.

    .venv/bin/python -m bench.doors [--calls 300] [--slice 25] [--events 200]
                                    [--subscribers 50] [--endpoints 20] [--rounds 3]
                                    [--database-url URL]

One `baton serve` for the whole sitting, on one fresh database (an embedded PostgreSQL unless
`--database-url` / BATON_BENCH_DATABASE_URL names a server), with webhooks to this machine
allowed. Server CPU is the scheduler's account of the process's threads (`bench.cpu`, to the
ns), so short slices count.

**Operations**, `--calls` per door one after another, the doors taking turns in slices of
`--slice` calls (the order turning by one each pass) so that each sees the same load of a
shared machine; against GraphQL over HTTP (the clients are `bench.a2a`'s):
- a hand-off, a new task between two agents of one owner (the gate routes it): GraphQL
  `handOff` selecting the task and its events; MCP's `handOff` tool (2026-07-28, the official
  SDK's client); A2A JSON-RPC `SendMessage` with `returnImmediately`;
- a read of one task: GraphQL `task(id)` selecting what MCP's `task` tool answers (its moves
  included); MCP's `task` tool; A2A JSON-RPC `GetTask`.
The spread is the CPU per call over each fifth of the passes; the ratio, over all of them.

**Deliveries**, `--rounds` rounds (the order turning by one each round), against a WebSocket
delivery: `--events` checkpoints (`saveCheckpoint` over GraphQL, one after another) on a
working task with nobody following it, then as many with `--subscribers` followers: GraphQL
`taskEvents(filter: {taskIds})` over WebSocket (graphql-transport-ws) and over Server-Sent
Events, A2A `SubscribeToTask` over both bindings, MCP's `subscriptions/listen` on the task's
resource with a `resources/read` per update (`bench.a2a`'s `measure_stream`, each stream
with a token of its own; MCP's updates alone may be fewer than the events), or `--endpoints`
webhook endpoints of the task's owner taking every task event (a receiver in this process
answering 200, `bench.webhooks`'). CPU per delivery = (CPU with the followers - CPU without)
/ (events x followers); for webhooks, whose deliveries go on after the last checkpoint, the
server's idle CPU over the extra time is taken off. Every stream and endpoint must get every
checkpoint, or the sitting fails. The figure is the median over the rounds, the spread their
min-max, the ratio the median of the rounds' ratios.

The clients and the receiver run in this process, on the same cores as the server: only the
server's CPU is compared.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg  # type: ignore[import-untyped, unused-ignore]
import httpx
import uvicorn
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from starlette.applications import Starlette
from starlette.routing import Route

from baton.store import migrate
from baton.store.db import libpq_url
from mcp import Client

from .a2a import (
    A2A_VERSION,
    WARM_CALLS,
    World,
    a2a_base,
    checkpoints,
    make_world,
    measure_stream,
    open_hand_off,
    working_task,
)
from .cpu import on_cpu
from .mcp import BLOCKS, TASK
from .server import Server, bench_database, start_server, stop_server
from .webhooks import Receiver, seed_endpoints, table

Call = Callable[[], Awaitable[None]]
# How long the server is left idle to learn its idle CPU rate (hubs' and workers' polling).
IDLE_SECONDS = 2.0
DELIVERY_TIMEOUT = 120.0
READ = f"query($id: ID!) {{ task(id: $id) {{ {TASK} }} }}"


@dataclass(frozen=True)
class Row:
    """One line of the table: how a door does one thing, and what it is compared with."""

    key: str
    door: str
    what: str
    base: str  # the key of the row it is compared with


OPERATIONS = (
    Row("handoff-graphql", "GraphQL over HTTP", "a hand-off", "handoff-graphql"),
    Row("handoff-mcp", "MCP, 2026-07-28", "a hand-off", "handoff-graphql"),
    Row("handoff-a2a-jsonrpc", "A2A JSON-RPC", "a hand-off", "handoff-graphql"),
    Row("read-graphql", "GraphQL over HTTP", "a read of a task", "read-graphql"),
    Row("read-mcp", "MCP, 2026-07-28", "a read of a task", "read-graphql"),
    Row("read-a2a-jsonrpc", "A2A JSON-RPC", "a read of a task", "read-graphql"),
)
DELIVERIES = (
    Row("graphql-ws", "GraphQL WebSocket", "a delivered event", "graphql-ws"),
    Row("graphql-sse", "GraphQL Server-Sent Events", "a delivered event", "graphql-ws"),
    Row("webhook", "Webhook", "a delivered message", "graphql-ws"),
    Row("a2a-jsonrpc", "A2A JSON-RPC stream", "a delivered event", "graphql-ws"),
    Row("a2a-rest", "A2A HTTP+JSON stream", "a delivered event", "graphql-ws"),
    # MCP only says that the task changed; the client then reads it: a notification and a
    # read per event (fewer when changes come while a read is under way).
    Row("mcp-listen", "MCP listen + read", "an event followed", "graphql-ws"),
)
ROWS = OPERATIONS + DELIVERIES


# --- operations --------------------------------------------------------------------------------


async def open_read(
    door: str, server: Server, world: World, task_id: str, stack: AsyncExitStack
) -> Call:
    """`call()` reads the task `task_id` through `door`, as its requester."""
    headers = {"Authorization": f"Bearer {world.bearer}"}
    if door == "mcp":
        client_http = await stack.enter_async_context(create_mcp_http_client(headers=headers))
        client = await stack.enter_async_context(
            Client(
                streamable_http_client(f"{server.url}/mcp", http_client=client_http),
                mode="auto",
                cache=None,
            )
        )

        async def mcp() -> None:
            result = await client.call_tool("task", {"id": task_id})
            if result.is_error:
                raise RuntimeError(result.structured_content)

        return mcp
    http = await stack.enter_async_context(
        httpx.AsyncClient(base_url=server.url, headers=headers, timeout=60)
    )
    if door == "graphql":
        body = {"query": READ, "variables": {"id": task_id}}

        async def graphql() -> None:
            answer = await http.post("/graphql", json=body)
            if answer.status_code != 200 or not answer.json()["data"]["task"]:
                raise RuntimeError(answer.text[:500])

        return graphql
    base = a2a_base(server, world)
    ids = itertools.count(1)

    async def a2a() -> None:
        call = {"jsonrpc": "2.0", "id": next(ids), "method": "GetTask", "params": {"id": task_id}}
        answer = await http.post(base, json=call, headers=A2A_VERSION)
        if answer.status_code != 200 or "result" not in answer.json():
            raise RuntimeError(answer.text[:500])

    return a2a


@dataclass
class Tally:
    """What a row's slices add up to."""

    cpu: float = 0.0  # server CPU seconds
    calls: int = 0
    # Server CPU and calls of each fifth of the passes, for the spread.
    blocks: list[float] = field(default_factory=lambda: [0.0] * BLOCKS)
    block_calls: list[int] = field(default_factory=lambda: [0] * BLOCKS)


class Exact(Server):
    """The server, its CPU read to the ns (what `bench.a2a`'s measurements read too)."""

    def cpu_seconds(self) -> float:
        return on_cpu(self.pid)


async def open_operation(
    row: Row, server: Server, url: str, http: httpx.AsyncClient, stack: AsyncExitStack
) -> Call:
    """`call()` makes `row`'s operation once, in a world of its own."""
    kind, _, door = row.key.partition("-")
    world = await make_world(url)
    if kind == "handoff":
        hand_off = await open_hand_off(door, server, world, stack)
        ids = itertools.count()

        async def call() -> None:
            await hand_off(f"h{next(ids)}")

        return call
    return await open_read(door, server, world, await working_task(http, world), stack)


async def operations(server: Server, url: str, calls: int, slice_calls: int) -> dict[str, Tally]:
    """Every operation's row: `calls` calls each, the rows taking turns in slices."""
    async with AsyncExitStack() as stack:
        http = await stack.enter_async_context(httpx.AsyncClient(base_url=server.url, timeout=60))
        opened = {
            row.key: await open_operation(row, server, url, http, stack) for row in OPERATIONS
        }
        for call in opened.values():
            for _ in range(WARM_CALLS):  # the connections, the engine's caches
                await call()
        passes = max(1, calls // slice_calls)
        tallies = {row.key: Tally() for row in OPERATIONS}
        for n in range(passes):
            if n % max(1, passes // 5) == 0:
                print(f"bench.doors: operations, pass {n + 1} of {passes}", file=sys.stderr)
            turn = n % len(OPERATIONS)
            for row in OPERATIONS[turn:] + OPERATIONS[:turn]:
                call, tally = opened[row.key], tallies[row.key]
                cpu = server.cpu_seconds()
                for _ in range(slice_calls):
                    await call()
                spent = server.cpu_seconds() - cpu
                block = n * BLOCKS // passes
                tally.cpu += spent
                tally.calls += slice_calls
                tally.blocks[block] += spent
                tally.block_calls[block] += slice_calls
    return tallies


# --- webhook deliveries ------------------------------------------------------------------------


class Hooks:
    """The receiver of the webhook deliveries, served by uvicorn in this process."""

    def __init__(self) -> None:
        self.receiver = Receiver()
        app = Starlette(routes=[Route("/{path:path}", self.receiver.handle, methods=["POST"])])
        config = uvicorn.Config(
            app, host="127.0.0.1", port=0, log_level="warning", lifespan="off", backlog=4096
        )
        self.web = uvicorn.Server(config)
        self.serving: asyncio.Task[None] | None = None

    async def start(self) -> str:
        self.serving = asyncio.create_task(self.web.serve())
        while not self.web.started:  # noqa: ASYNC110  # uvicorn has a flag for it, no event
            await asyncio.sleep(0.05)
        (socket,) = self.web.servers[0].sockets
        return f"http://127.0.0.1:{socket.getsockname()[1]}"

    async def stop(self) -> None:
        self.web.should_exit = True
        if self.serving is not None:
            await self.serving

    async def until(self, deliveries: int) -> None:
        deadline = time.monotonic() + DELIVERY_TIMEOUT
        while len(self.receiver.arrivals) < deliveries:
            if time.monotonic() > deadline:
                got = len(self.receiver.arrivals)
                raise RuntimeError(f"webhooks: {got} of {deliveries} deliveries arrived")
            self.receiver.changed.clear()
            try:
                await asyncio.wait_for(self.receiver.changed.wait(), 1.0)
            except TimeoutError:
                continue


async def idle_rate(server: Server) -> float:
    """The server's CPU seconds per second while nothing is asked of it."""
    cpu, started = server.cpu_seconds(), time.monotonic()
    await asyncio.sleep(IDLE_SECONDS)
    return (server.cpu_seconds() - cpu) / (time.monotonic() - started)


async def measure_webhooks(
    server: Server, url: str, hooks: Hooks, at: str, events: int, endpoints: int
) -> float:
    """CPU per webhook message: `events` checkpoints with no endpoint, then with `endpoints`
    endpoints of the task's owner taking every task event, until each has every one."""
    world = await make_world(url)
    owner = world.requester.split("/")[0]
    idle = await idle_rate(server)
    async with httpx.AsyncClient(base_url=server.url, timeout=None) as http:
        task_id = await working_task(http, world)
        await checkpoints(http, world, task_id, (f"warm {i}" for i in range(WARM_CALLS)))
        cpu, started = server.cpu_seconds(), time.monotonic()
        await checkpoints(http, world, task_id, range(events))
        alone = server.cpu_seconds() - cpu - idle * (time.monotonic() - started)
        await seed_endpoints(url, owner, at, endpoints, down=False)
        try:
            hooks.receiver.arrivals.clear()
            await checkpoints(http, world, task_id, ["ready"])  # each endpoint is delivering
            await hooks.until(endpoints)
            hooks.receiver.arrivals.clear()
            cpu, started = server.cpu_seconds(), time.monotonic()
            await checkpoints(http, world, task_id, range(events))
            await hooks.until(events * endpoints)
            followed = server.cpu_seconds() - cpu - idle * (time.monotonic() - started)
            if len(hooks.receiver.arrivals) != events * endpoints:
                raise RuntimeError(
                    f"webhooks: {len(hooks.receiver.arrivals)} messages for "
                    f"{events * endpoints} deliveries"
                )
        finally:
            await forget_endpoints(url, owner)
    return (followed - alone) * 1e6 / (events * endpoints)


async def forget_endpoints(url: str, owner: str) -> None:
    conn = await asyncpg.connect(libpq_url(url))
    try:
        await conn.execute("DELETE FROM webhook_endpoints WHERE owner = $1", owner)
    finally:
        await conn.close()


# --- the sitting -------------------------------------------------------------------------------


async def deliveries(args: argparse.Namespace, url: str, server: Server) -> dict[str, list[float]]:
    """Every delivery row's CPU per delivery, once per round."""
    hooks = Hooks()
    at = await hooks.start()
    figures: dict[str, list[float]] = {row.key: [] for row in DELIVERIES}
    try:
        for r in range(args.rounds):
            turn = r % len(DELIVERIES)
            for row in DELIVERIES[turn:] + DELIVERIES[:turn]:
                print(f"bench.doors: {row.door}, round {r + 1}", file=sys.stderr)
                if row.key == "webhook":
                    cpu = await measure_webhooks(
                        server, url, hooks, at, args.events, args.endpoints
                    )
                else:
                    measured = await measure_stream(
                        row.key, server, url, args.events, args.subscribers
                    )
                    cpu = measured["CPU µs/event"]
                figures[row.key].append(cpu)
    finally:
        await hooks.stop()
    return figures


def rows_of(ops: dict[str, Tally], delivered: dict[str, list[float]]) -> list[dict[str, Any]]:
    """The table: every row's CPU, its spread, and its ratio to its base row."""
    out = []
    for row in ROWS:
        if row.key in ops:
            mine, theirs = ops[row.key], ops[row.base]
            figure = mine.cpu * 1e6 / mine.calls
            spread = [b * 1e6 / n for b, n in zip(mine.blocks, mine.block_calls, strict=True) if n]
            # A base below a µs is a sitting too short to count: no ratio.
            base = theirs.cpu * 1e6 / theirs.calls
            ratio = f"{figure / base:.2f}" if base >= 1 else "n/a"
        else:
            values, bases = delivered[row.key], delivered[row.base]
            figure, spread = statistics.median(values), values
            # A delivery's figure is a difference of two CPU readings; in a sitting too short
            # for it, noise can make either side negative, and that pair has no ratio.
            ratios = [m / b for m, b in zip(values, bases, strict=True) if b >= 1 and m >= 0]
            ratio = f"{statistics.median(ratios):.2f}" if ratios else "n/a"
        out.append(
            {
                "door": row.door,
                "per": row.what,
                "server CPU µs": f"{figure:.0f}",
                "min-max": f"{min(spread):.0f}-{max(spread):.0f}",
                "ratio": ratio,
                "to": next(r.door for r in ROWS if r.key == row.base),
            }
        )
    return out


async def main_async(args: argparse.Namespace) -> int:
    database = args.database_url or os.environ.get("BATON_BENCH_DATABASE_URL")
    async with bench_database(database, prefix="baton_bench_doors") as (url, where):
        print(f"bench.doors: database {where}", file=sys.stderr)
        await migrate.upgrade_url(url)
        logs = Path(tempfile.mkdtemp(prefix="baton-bench-doors-"))
        env = {"BATON_WEBHOOK_ALLOW_PRIVATE": "true", "BATON_WEBHOOK_ALLOW_HTTP": "true"}
        started = start_server(url, logs / "serve.log", env=env)
        server = Exact(started.url, started.process, started.log)
        print(f"bench.doors: baton serve pid {server.pid}, log {server.log}", file=sys.stderr)
        try:
            ops = await operations(server, url, args.calls, args.slice)
            delivered = await deliveries(args, url, server)
        finally:
            stop_server(server)
    print(
        f"\nOne `baton serve`. Operations: {args.calls} per door one after another, in slices "
        f"of {args.slice} in turn. Deliveries: {args.events} checkpoints to "
        f"{args.subscribers} streams or {args.endpoints} webhook endpoints, {args.rounds} "
        "rounds.\n"
    )
    print(table(rows_of(ops, delivered)))
    return 0


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.doors", description=__doc__.split("\n")[0])
    p.add_argument("--calls", type=int, default=300, help="operations per door")
    p.add_argument("--slice", type=int, default=25, help="calls a door makes in its turn")
    p.add_argument("--events", type=int, default=200, help="checkpoints per delivery measurement")
    # Enough followers that what an event costs apart from its deliveries (its announcement,
    # the shared execution) weighs little in the difference.
    p.add_argument("--subscribers", type=int, default=50, help="WebSocket or SSE streams")
    p.add_argument("--endpoints", type=int, default=20, help="webhook endpoints")
    p.add_argument("--rounds", type=int, default=3, help="delivery measurements per kind")
    p.add_argument("--database-url", default=None)
    args = p.parse_args(argv)
    for name in ("calls", "slice", "events", "subscribers", "endpoints", "rounds"):
        if getattr(args, name) < 1:  # a delivery with no checkpoint would wait for ever
            p.error(f"--{name} must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    return asyncio.run(main_async(arguments(argv)))


if __name__ == "__main__":
    raise SystemExit(main())
