"""The A2A door against GraphQL and MCP: a hand-off, and a streamed event, one server each.

    .venv/bin/python -m bench.a2a [--calls 500] [--events 200] [--subscribers 20] [--rounds 3]
                                  [--doors graphql,mcp,a2a-jsonrpc,a2a-rest] [--database-url URL]

On one fresh database (an embedded PostgreSQL unless `--database-url` / BATON_BENCH_DATABASE_URL
names a server), each row is measured on a `baton serve` of its own, started for it and stopped
after it, so that no door's work or warm caches count in another's process; rows are taken in
turn, `--rounds` times, and the table gives each figure's median with its spread (min-max) over
the rounds. Server CPU is the whole `baton serve` process's, from /proc. `--calls 0` or
`--events 0` leaves out the hand-offs or the streams.

1. **A hand-off** (SendMessage): `--calls` hand-offs one after another, each a new task from an
   agent to another agent of the same owner (the gate routes it), with the same packet and a
   client id of its own:
   - GraphQL over HTTP: `handOff`, selecting the task and the events it appended (what the
     other doors answer, or more);
   - MCP over Streamable HTTP, the official SDK's client (2026-07-28 era): the `handOff` tool;
   - A2A JSON-RPC `SendMessage` and A2A HTTP+JSON `POST /message:send` to the assignee's card
     base, with `returnImmediately` (the answer is the task as the gate left it; a blocking call
     would wait on a worker), a message id of its own per call (the door derives the task's
     client id from it), the text part the task and a data part the packet's other fields.
   Reported: p50 latency and server CPU per call, and each over GraphQL's.
2. **A streamed event**: on a working task, `--events` checkpoints (`saveCheckpoint` over
   GraphQL, one after another) with no subscriber, then the same with `--subscribers` streams
   following the task, each with a token of its own (a fan-out to that many clients, below the
   per-token bounds): A2A `SubscribeToTask` (JSON-RPC and HTTP+JSON, Server-Sent Events; a
   checkpoint is a status update carrying it) against GraphQL's `taskEvents(filter: {taskIds:
   [id]})` over SSE and over WebSocket (graphql-transport-ws), selecting what A2A's update
   carries (the state and the checkpoint), and against MCP's way (2026-07-28
   `subscriptions/listen` on the task's resource, which only says that it changed, then
   `resources/read` for what it is; wakes that come while a read runs are one). Server CPU
   per event = (CPU with the streams - CPU without) / (events x subscribers). Every A2A and
   GraphQL stream must receive every event, and every stream the last checkpoint.

The clients run in this process; only the server's CPU is compared. Server-Sent Events are read
with asyncio's streams, as lean a reader as the WebSocket client (`websockets`): with httpx's,
this process spent about three times the CPU per event, its checkpoints (made on the same loop)
came slower, and the server's CPU per event was that of other work. With the server on a core of
its own (taskset), GraphQL SSE ÷ WebSocket was 1.24 and 1.34 read by httpx, 0.97 and 1.00 read
so (2026-12-05).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import secrets
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

import httpx
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from websockets.asyncio.client import connect
from websockets.typing import Subprotocol

from baton.access.principals import Principal, PrincipalKind
from baton.store import migrate
from mcp import Client

from .runs import percentile, table, token
from .server import Server, bench_database, start_server, stop_server

A2A_VERSION = {"A2A-Version": "1.0"}
HAND_OFF_DOORS = ("graphql", "mcp", "a2a-jsonrpc", "a2a-rest")
STREAM_DOORS = ("graphql-sse", "graphql-ws", "mcp-listen", "a2a-jsonrpc", "a2a-rest")
COALESCING = {"mcp-listen"}  # a wake per change, several changes per wake when the reader lags
LABELS = {
    "graphql": "GraphQL HTTP",
    "mcp": "MCP HTTP, 2026-07-28",
    "a2a-jsonrpc": "A2A JSON-RPC",
    "a2a-rest": "A2A HTTP+JSON",
    "graphql-sse": "GraphQL SSE",
    "graphql-ws": "GraphQL WebSocket",
    "mcp-listen": "MCP listen + read",
}
WARM_CALLS = 20
STREAM_TIMEOUT = 60.0

PACKET = {"task": "bench", "deliverableType": "doc", "acceptanceCriteria": ["fast"]}
TASK = """id project state waitingOn requester assignee verification version
  packet { task deliverableType acceptanceCriteria context files dependsOn }
  result { summary evidence { kind summary url content } provenance returnedBy returnedAt }
  latestCheckpoint { progress decisions filesTouched nextSteps openQuestions }
  createdAt updatedAt"""
HAND_OFF = f"""mutation($in: HandOffInput!) {{ handOff(input: $in) {{
  ... on HandOffSuccess {{ task {{ {TASK} }}
    events {{ id kind taskId move fromState toState actor reason at version }} }}
  ... on Error {{ code message }} }} }}"""
MOVE = """mutation($id: ID!) { %s(input: {id: $id}) { ... on Error { code message } } }"""
CHECKPOINT = """mutation($id: ID!, $c: CheckpointInput!) {
  saveCheckpoint(input: {id: $id, checkpoint: $c}) { ... on Error { code message } } }"""
FOLLOW = """subscription($f: TaskEventFilter, $after: ID) { taskEvents(filter: $f, after: $after) {
  id kind toState at task { id state version latestCheckpoint { progress nextSteps } } } }"""

Call = Callable[[str], Awaitable[None]]


@dataclass
class World:
    """The principals of one measurement: a requester and an assignee of one owner."""

    tag: str
    requester: str
    assignee: str
    bearer: str  # the requester's token
    assignee_bearer: str

    @property
    def project(self) -> str:
        return f"p{self.tag}"


async def make_world(url: str) -> World:
    tag = secrets.token_hex(3)
    requester, assignee = f"a2a{tag}/requester", f"a2a{tag}/worker"
    return World(
        tag,
        requester,
        assignee,
        await token(url, Principal(PrincipalKind.AGENT, requester)),
        await token(url, Principal(PrincipalKind.AGENT, assignee)),
    )


def a2a_base(server: Server, world: World) -> str:
    return f"{server.url}/a2a/agents/{world.assignee}"


def a2a_message(world: World, message_id: str) -> dict[str, Any]:
    """The hand-off as an A2A message: the packet's text, then its other fields as data."""
    fields = {k: v for k, v in PACKET.items() if k != "task"}
    return {
        "role": "ROLE_USER",
        "messageId": message_id,
        "parts": [{"text": PACKET["task"]}, {"data": {**fields, "project": world.project}}],
    }


def check_a2a(answer: httpx.Response) -> None:
    body = answer.json()
    task = body.get("result", body) if isinstance(body, dict) else None
    if answer.status_code != 200 or not isinstance(task, dict) or "task" not in task:
        raise RuntimeError(f"HTTP {answer.status_code}: {answer.text[:500]}")


async def open_hand_off(door: str, server: Server, world: World, stack: AsyncExitStack) -> Call:
    """`call(client_id)` hands off one new task through `door`."""
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

        async def mcp(client_id: str) -> None:
            arguments = {
                "id": client_id,
                "project": world.project,
                "requester": world.requester,
                "assignee": world.assignee,
                "packet": PACKET,
            }
            result = await client.call_tool("handOff", arguments)
            if result.is_error:
                raise RuntimeError(result.structured_content)

        return mcp
    http = await stack.enter_async_context(
        httpx.AsyncClient(base_url=server.url, headers=headers, timeout=60)
    )
    if door == "graphql":

        async def graphql(client_id: str) -> None:
            variables = {
                "in": {
                    "id": client_id,
                    "project": world.project,
                    "requester": world.requester,
                    "assignee": world.assignee,
                    "packet": PACKET,
                }
            }
            answer = await http.post("/graphql", json={"query": HAND_OFF, "variables": variables})
            if "task" not in answer.json()["data"]["handOff"]:
                raise RuntimeError(answer.text)

        return graphql
    base = a2a_base(server, world)
    ids = itertools.count(1)
    configuration = {"returnImmediately": True}
    if door == "a2a-jsonrpc":

        async def jsonrpc(client_id: str) -> None:
            params = {"message": a2a_message(world, client_id), "configuration": configuration}
            body = {"jsonrpc": "2.0", "id": next(ids), "method": "SendMessage", "params": params}
            check_a2a(await http.post(base, json=body, headers=A2A_VERSION))

        return jsonrpc

    async def rest(client_id: str) -> None:
        body = {"message": a2a_message(world, client_id), "configuration": configuration}
        check_a2a(await http.post(f"{base}/message:send", json=body, headers=A2A_VERSION))

    return rest


async def measure_hand_offs(door: str, server: Server, url: str, calls: int) -> dict[str, float]:
    world = await make_world(url)
    async with AsyncExitStack() as stack:
        call = await open_hand_off(door, server, world, stack)
        for i in range(WARM_CALLS):  # the connection, the session, the engine's caches
            await call(f"warm-{i}")
        latencies = []
        cpu = server.cpu_seconds()
        for i in range(calls):
            started = time.perf_counter()
            await call(f"m{i}")
            latencies.append(time.perf_counter() - started)
        spent = server.cpu_seconds() - cpu
    return {"p50 ms": percentile(latencies, 0.5) * 1000, "CPU µs/call": spent * 1e6 / calls}


# --- streams -----------------------------------------------------------------------------------


def progress(i: int | str) -> str:
    """A checkpoint's progress: a marker each door's payload carries verbatim."""
    return f"bench step {i}."


@dataclass
class Stream:
    """One subscriber: counts the updates it receives (after `skip` leading ones: A2A's task)
    and notes when one carries the progress `wanted`."""

    skip: int = 0
    received: int = 0
    wanted: str = ""
    error: str | None = None
    opened: asyncio.Event = field(default_factory=asyncio.Event)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def expect(self, wanted: str) -> None:
        self.wanted, self.received = wanted, 0
        self.arrived.clear()

    def got(self, payload: str) -> None:
        if self.skip:
            self.skip -= 1
            self.opened.set()
            return
        self.received += 1
        if self.wanted and self.wanted in payload:
            self.arrived.set()

    def failed(self, error: str) -> None:
        self.error = error
        self.opened.set()
        self.arrived.set()

    async def until_arrived(self) -> None:
        await self.arrived.wait()
        if self.error is not None:
            raise RuntimeError(self.error)


async def follow_sse(
    http: httpx.AsyncClient, stream: Stream, url: str, body: Any, headers: dict[str, str]
) -> None:
    """Follow an event stream (`url`, relative to `http`'s base, POSTed `body` as JSON or
    nothing), read with asyncio's streams: a chunked body, split into lines. httpx's reader
    cost this process about three times the CPU per event of the WebSocket client's, which
    slowed the checkpoints made on the same loop, so that the server was measured doing
    differently paced work (see the module's text)."""
    target = urlsplit(urljoin(str(http.base_url), url))
    writer: asyncio.StreamWriter | None = None
    try:
        reader, writer = await asyncio.open_connection(target.hostname, target.port)
        payload = b"" if body is None else json.dumps(body).encode()
        lines = [
            f"POST {target.path}{'?' + target.query if target.query else ''} HTTP/1.1",
            f"host: {target.netloc}",
            "accept: text/event-stream",
            f"content-length: {len(payload)}",
            *(f"{name}: {value}" for name, value in headers.items()),
        ]
        if body is not None:
            lines.append("content-type: application/json")
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + payload)
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
        status = int(head.split(" ", 2)[1])
        if status != 200 or "transfer-encoding: chunked" not in head.lower():
            raise RuntimeError(f"HTTP {status}: {head[:300]!r}")
        if not stream.skip:  # GraphQL: replays from `after`, so open is enough
            stream.opened.set()
        rest = b""  # the last line's start, not yet ended
        while size := int((await reader.readline()).split(b";")[0], 16):
            rest += (await reader.readexactly(size + 2))[:-2]
            *whole, rest = rest.split(b"\n")
            for line in whole:
                if line.startswith(b"data:"):
                    stream.got(line.decode())
        raise RuntimeError("the server ended the stream")
    except Exception as exc:  # reported by `until_arrived`
        stream.failed(repr(exc))
    finally:
        if writer is not None:
            writer.close()


async def follow_ws(server: Server, bearer: str, stream: Stream, variables: dict[str, Any]) -> None:
    url = server.url.replace("http://", "ws://", 1) + "/graphql"
    try:
        async with connect(url, subprotocols=[Subprotocol("graphql-transport-ws")]) as ws:
            init = {"type": "connection_init", "payload": {"authorization": f"Bearer {bearer}"}}
            await ws.send(json.dumps(init))
            payload = {"query": FOLLOW, "variables": variables}
            async for raw in ws:
                message = json.loads(raw)
                if message["type"] == "connection_ack":
                    await ws.send(json.dumps({"id": "1", "type": "subscribe", "payload": payload}))
                    stream.opened.set()  # it replays from `after`
                elif message["type"] == "next":
                    stream.got(str(raw))
                elif message["type"] == "ping":
                    await ws.send(json.dumps({"type": "pong"}))
                elif message["type"] in ("error", "complete"):
                    raise RuntimeError(raw)
    except Exception as exc:  # reported by `until_arrived`
        stream.failed(repr(exc))


async def follow_mcp(server: Server, bearer: str, stream: Stream, task_id: str) -> None:
    """MCP's way to follow a task: `subscriptions/listen` on its resource, which says only that
    it changed, then `resources/read` for what it is now. The SDK coalesces wakes that arrive
    while the last read runs, so `received` counts reads, not events."""
    uri = f"baton://tasks/{task_id}"
    try:
        async with (
            create_mcp_http_client(headers={"Authorization": f"Bearer {bearer}"}) as http,
            Client(
                streamable_http_client(f"{server.url}/mcp", http_client=http),
                mode="auto",
                cache=None,
            ) as client,
            client.listen(resource_subscriptions=[uri]) as changes,
        ):
            stream.opened.set()
            async for _ in changes:
                read = await client.read_resource(uri)
                stream.got(" ".join(getattr(c, "text", "") for c in read.contents))
        raise RuntimeError("the server ended the stream")
    except Exception as exc:  # reported by `until_arrived`
        stream.failed(repr(exc))


def open_stream(
    door: str, server: Server, world: World, task_id: str, after: str, bearer: str
) -> tuple[Stream, Callable[[httpx.AsyncClient], Coroutine[Any, Any, None]]]:
    """A subscriber to `task_id` with a token of its own; GraphQL's start after the event id
    `after`. Answers the stream and the coroutine that follows it (given an HTTP client)."""
    headers = {"Authorization": f"Bearer {bearer}"}
    variables = {"f": {"taskIds": [task_id]}, "after": after}
    if door == "graphql-ws":
        stream = Stream()
        return stream, lambda http: follow_ws(server, bearer, stream, variables)
    if door == "mcp-listen":
        stream = Stream()
        return stream, lambda http: follow_mcp(server, bearer, stream, task_id)
    if door == "graphql-sse":
        stream = Stream()
        query = {"query": FOLLOW, "variables": variables}
        return stream, lambda http: follow_sse(http, stream, "/graphql/stream", query, headers)
    stream = Stream(skip=1)  # the current task comes first
    base = a2a_base(server, world)
    a2a = {**headers, **A2A_VERSION}
    if door == "a2a-jsonrpc":
        call = {"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask", "params": {"id": task_id}}
        return stream, lambda http: follow_sse(http, stream, base, call, a2a)
    url = f"{base}/tasks/{task_id}:subscribe"
    return stream, lambda http: follow_sse(http, stream, url, None, a2a)


async def working_task(http: httpx.AsyncClient, world: World) -> str:
    """A task handed from the requester to the worker (routed by the gate), accepted, started."""
    variables = {
        "in": {
            "project": world.project,
            "requester": world.requester,
            "assignee": world.assignee,
            "packet": PACKET,
        }
    }
    headers = {"Authorization": f"Bearer {world.bearer}"}
    answer = await http.post(
        "/graphql", json={"query": HAND_OFF, "variables": variables}, headers=headers
    )
    task_id: str = answer.json()["data"]["handOff"]["task"]["id"]
    headers = {"Authorization": f"Bearer {world.assignee_bearer}"}
    for move in ("acceptTask", "startTask"):
        answer = await http.post(
            "/graphql", json={"query": MOVE % move, "variables": {"id": task_id}}, headers=headers
        )
        if answer.json()["data"][move]:
            raise RuntimeError(answer.text)
    return task_id


async def cursor(http: httpx.AsyncClient, bearer: str) -> str:
    answer = await http.post(
        "/graphql",
        json={"query": "{ streamCursors { taskEvents } }"},
        headers={"Authorization": f"Bearer {bearer}"},
    )
    after: str = answer.json()["data"]["streamCursors"]["taskEvents"]
    return after


async def checkpoints(
    http: httpx.AsyncClient, world: World, task_id: str, steps: Iterable[int | str]
) -> None:
    """`saveCheckpoint` on the task for each step, one after another, as its assignee."""
    headers = {"Authorization": f"Bearer {world.assignee_bearer}"}
    for i in steps:
        variables = {"id": task_id, "c": {"progress": progress(i), "nextSteps": ["more"]}}
        answer = await http.post(
            "/graphql", json={"query": CHECKPOINT, "variables": variables}, headers=headers
        )
        if answer.json()["data"]["saveCheckpoint"]:
            raise RuntimeError(answer.text)


async def measure_stream(
    door: str, server: Server, url: str, events: int, subscribers: int
) -> dict[str, float]:
    world = await make_world(url)
    bearers = [
        await token(url, Principal(PrincipalKind.AGENT, world.requester))
        for _ in range(subscribers)
    ]
    async with httpx.AsyncClient(base_url=server.url, timeout=None) as http:
        task_id = await working_task(http, world)
        await checkpoints(http, world, task_id, (f"warm {i}" for i in range(WARM_CALLS)))
        cpu = server.cpu_seconds()
        await checkpoints(http, world, task_id, range(events))
        alone = server.cpu_seconds() - cpu
        after = await cursor(http, world.bearer)
        async with httpx.AsyncClient(base_url=server.url, timeout=None) as reader:
            opened = [open_stream(door, server, world, task_id, after, b) for b in bearers]
            streams = [s for s, _ in opened]
            following = [asyncio.create_task(follow(reader)) for _, follow in opened]
            try:
                await asyncio.wait_for(asyncio.gather(*(s.opened.wait() for s in streams)), 30)
                # One checkpoint that every stream shows: each is delivering.
                for s in streams:
                    s.expect(progress("ready"))
                await checkpoints(http, world, task_id, ["ready"])
                await asyncio.wait_for(asyncio.gather(*(s.until_arrived() for s in streams)), 30)
                for s in streams:
                    s.expect(progress(events - 1))
                cpu = server.cpu_seconds()
                await checkpoints(http, world, task_id, range(events))
                wanted = asyncio.gather(*(s.until_arrived() for s in streams))
                await asyncio.wait_for(wanted, STREAM_TIMEOUT)
                followed = server.cpu_seconds() - cpu
            finally:
                for f in following:
                    f.cancel()
                await asyncio.gather(*following, return_exceptions=True)
    received = sum(s.received for s in streams)
    if door not in COALESCING and received != events * subscribers:
        raise RuntimeError(f"{door}: {received} updates for {events * subscribers} events")
    return {
        "CPU ms/move, no stream": alone * 1000 / events,
        f"CPU ms/move, {subscribers} streams": followed * 1000 / events,
        "updates/stream": received / subscribers,
        "CPU µs/event": (followed - alone) * 1e6 / (events * subscribers),
    }


# --- the sitting -------------------------------------------------------------------------------


def summarise(rounds: list[dict[str, float]], spread: str) -> dict[str, Any]:
    """Each figure's median over the rounds, and the min-max of `spread`."""
    row: dict[str, Any] = {}
    for key in rounds[0]:
        values = [r[key] for r in rounds]
        row[key] = statistics.median(values)
        if key == spread:
            digits = 0 if "µs" in key else 2
            row[f"{key} min-max"] = f"{min(values):.{digits}f}-{max(values):.{digits}f}"
    return row


async def sitting(
    url: str,
    doors: list[str],
    rounds: int,
    measure: Callable[[str, Server], Awaitable[dict[str, float]]],
    what: str,
) -> dict[str, list[dict[str, float]]]:
    results: dict[str, list[dict[str, float]]] = {door: [] for door in doors}
    logs = Path(tempfile.mkdtemp(prefix="baton-bench-a2a-"))
    for r in range(rounds):
        for door in doors:
            print(f"bench.a2a: {what}, {LABELS[door]}, round {r + 1}", file=sys.stderr)
            server = start_server(url, logs / f"{door}-{r}.log")
            try:
                results[door].append(await measure(door, server))
            finally:
                stop_server(server)
    return results


def ratio_rows(
    results: dict[str, list[dict[str, float]]], base: str, key: str, head: str
) -> list[dict[str, Any]]:
    rows = []
    for door, rounds in results.items():
        row: dict[str, Any] = {head: LABELS[door], **summarise(rounds, key)}
        if base in results:
            ratios = [
                mine[key] / theirs[key]
                for mine, theirs in zip(rounds, results[base], strict=True)
                if theirs[key] > 0
            ]
            row[f"{key} / {LABELS[base]}"] = statistics.median(ratios) if ratios else float("nan")
        rows.append(row)
    return rows


async def main_async(args: argparse.Namespace) -> int:
    database = args.database_url or os.environ.get("BATON_BENCH_DATABASE_URL")
    doors = args.doors.split(",")
    async with bench_database(database, prefix="baton_bench_a2a") as (url, where):
        print(f"bench.a2a: database {where}", file=sys.stderr)
        await migrate.upgrade_url(url)
        hand_offs = [d for d in HAND_OFF_DOORS if d in doors and args.calls > 0]
        streams = [d for d in STREAM_DOORS if d in doors and args.events > 0]

        async def one_hand_off(door: str, server: Server) -> dict[str, float]:
            return await measure_hand_offs(door, server, url, args.calls)

        async def one_stream(door: str, server: Server) -> dict[str, float]:
            return await measure_stream(door, server, url, args.events, args.subscribers)

        sent = await sitting(url, hand_offs, args.rounds, one_hand_off, "hand-offs")
        followed = await sitting(url, streams, args.rounds, one_stream, "streams")
    if sent:
        print(
            f"\nA hand-off, {args.calls} calls one after another, median of {args.rounds} rounds:"
        )
        print("\n" + table(ratio_rows(sent, "graphql", "CPU µs/call", "door (hand-off)")))
    if followed:
        print(
            f"\nA streamed event: {args.events} checkpoints, {args.subscribers} streams on the "
            f"task, median of {args.rounds} rounds:"
        )
        base = "graphql-sse" if "graphql-sse" in followed else streams[0]
        print("\n" + table(ratio_rows(followed, base, "CPU µs/event", "stream")))
    return 0


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.a2a", description=__doc__.split("\n")[0])
    p.add_argument("--calls", type=int, default=500, help="hand-offs per door and round (0: none)")
    p.add_argument(
        "--events", type=int, default=200, help="checkpoints per stream measurement (0: none)"
    )
    p.add_argument("--subscribers", type=int, default=20, help="streams following the task")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--doors", default=",".join(dict.fromkeys(HAND_OFF_DOORS + STREAM_DOORS)))
    p.add_argument("--database-url", default=None)
    args = p.parse_args(argv)
    unknown = set(args.doors.split(",")) - set(HAND_OFF_DOORS + STREAM_DOORS)
    if unknown:
        p.error(f"unknown doors: {', '.join(sorted(unknown))}")
    return args


def main(argv: list[str] | None = None) -> int:
    return asyncio.run(main_async(arguments(argv)))


if __name__ == "__main__":
    raise SystemExit(main())
