"""Memory of `baton serve` while clients stop reading: WebSockets, HTTP answers, SSE streams.

    .venv/bin/python -m bench.slow_sockets [--attack sockets|http|sse] [--src DIR] [options]

`--attack sockets` (the default) seeds `--tasks` tasks with packets near the schema's largest
(about 36 KB each), then opens `--sockets` WebSockets that each start `--subscriptions`
`taskEvents` subscriptions replaying every event with its task's packet, and never read again
(4 KB receive buffer). It then makes live events for a while. Prints the server's RSS at each
step and how many of the stuck sockets the server closed (their TCP connection reset or ended).

`--attack http`: `--connections` connections of one token each ask for an answer of about
14 MB (four pages of 100 tasks with their packets, under the 16 MiB response budget) and never
read it. `--attack sse`: `--streams` event streams of one token replay events of about 12 MB
each (every event's task with four pages of its 100 dependents' packets) and never read. Both
print RSS and the server's `baton_queued_bytes` gauge before, during (the peak) and after the
stuck clients close, what the stuck clients were answered, and how another token fared
meanwhile. `--src DIR` runs the server from another checkout's `src` (the harness is this
one), to measure an older version in the same sitting. See bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from math import nan
from pathlib import Path
from typing import Any

import httpx
import orjson
from websockets.client import ClientProtocol
from websockets.frames import Frame, Opcode
from websockets.http11 import Response
from websockets.typing import Subprotocol
from websockets.uri import parse_uri

from .server import Server, bench_database, start_server, stop_server

TCP_ESTABLISHED = 1

HAND_OFF = """
mutation($input: HandOffInput!) { handOff(input: $input) {
  __typename ... on HandOffSuccess { task { id } } ... on Error { code message } } }
"""
# Every event with its task's whole packet: big frames, and big events behind them.
REPLAY = """
subscription($filter: TaskEventFilter, $after: ID) {
  taskEvents(filter: $filter, after: $after) {
    id kind toState task { id state version packet {
      task deliverableType acceptanceCriteria context files dependsOn } }
  }
}
"""
# The same events with only their ids: small frames, the same events behind them.
REPLAY_IDS = """
subscription($filter: TaskEventFilter, $after: ID) {
  taskEvents(filter: $filter, after: $after) { id }
}
"""
CANCEL = """
mutation($id: ID!) { cancelTask(input: {id: $id, reason: "bench"}) { __typename } }
"""


def big_packet(n: int) -> dict[str, Any]:
    """A packet near the schema's bounds (about 36 KB of JSON)."""
    return {
        "task": f"task {n} " + "t" * 480,
        "deliverableType": "doc",
        "acceptanceCriteria": [f"criterion {i} " + "c" * 480 for i in range(20)],
        "context": "x" * 4000,
        "files": [f"src/file_{i}_" + "f" * 280 for i in range(50)],
        "dependsOn": [f"free text {i} " + "d" * 280 for i in range(20)],
    }


class StuckPeer:
    """A WebSocket client on a plain socket with a tiny receive buffer: it reads the handshake
    and what it waits for, then stops reading, so the server's writes back up."""

    def __init__(self, http_url: str, protocol: str, rcvbuf: int = 4096) -> None:
        uri = parse_uri(http_url.replace("http://", "ws://") + "/graphql")
        self.ws = ClientProtocol(uri, subprotocols=[Subprotocol(protocol)], max_size=None)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        # Before connecting: the window offered to the server is set at the handshake.
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(10)
        self.sock.connect((uri.host, uri.port))
        self.ws.send_request(self.ws.connect())
        self._flush()
        self._pending: list[Frame] = []
        self._accepted = False
        while not self._accepted:
            self._read()

    def _flush(self) -> None:
        data = b"".join(self.ws.data_to_send())
        if data:
            self.sock.sendall(data)

    def _read(self) -> None:
        data = self.sock.recv(65536)
        if data:
            self.ws.receive_data(data)
        else:
            self.ws.receive_eof()
        for event in self.ws.events_received():
            if isinstance(event, Response):
                if event.status_code != 101:
                    raise RuntimeError(f"handshake refused: {event.status_code}")
                self._accepted = True
            elif isinstance(event, Frame):
                self._pending.append(event)
        if not data:
            raise ConnectionError("closed by the server")

    def send(self, message: dict[str, Any]) -> None:
        self.ws.send_text(orjson.dumps(message))
        self._flush()

    def receive(self) -> dict[str, Any]:
        """The next text message (reads until one is there)."""
        while True:
            while self._pending:
                frame = self._pending.pop(0)
                if frame.opcode is Opcode.TEXT:
                    message: dict[str, Any] = orjson.loads(frame.data)
                    return message
                if frame.opcode is Opcode.CLOSE:
                    raise ConnectionError(f"closed by the server: {frame}")
            self._read()

    def init(self, token: str) -> None:
        self.send({"type": "connection_init", "payload": {"authorization": f"Bearer {token}"}})
        ack = self.receive()
        if ack["type"] != "connection_ack":
            raise RuntimeError(f"not acknowledged: {ack}")

    def subscribe(self, op_id: str, query: str, variables: dict[str, Any], kind: str) -> None:
        self.send({"id": op_id, "type": kind, "payload": {"query": query, "variables": variables}})

    def tcp_state(self) -> int:
        """This end's TCP state (Linux `tcpi_state`): 1 while established; 7 (closed) after a
        reset, 8 (close-wait) after the server's FIN."""
        return self.sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 8)[0]

    def connection_gone(self) -> bool:
        """Whether the server ended the TCP connection (reset, or FIN), without reading."""
        return self.tcp_state() != TCP_ESTABLISHED

    def unsent(self) -> int:
        """Bytes the server's kernel holds for this peer, not yet taken by it (the server
        side's send queue in /proc/net/tcp; both ends are on this host)."""
        local_port = self.sock.getsockname()[1]
        server_port = self.sock.getpeername()[1]
        for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
            fields = line.split()
            local, remote, queues = fields[1], fields[2], fields[4]
            if (
                int(local.split(":")[1], 16) == server_port
                and int(remote.split(":")[1], 16) == local_port
            ):
                return int(queues.split(":")[0], 16)
        return 0

    def close(self) -> None:
        self.sock.close()


@dataclass
class Sample:
    step: str
    rss_mib: float
    queued_mib: float | None = None  # the server's `baton_queued_bytes`, when it has one


def mib(n: int) -> float:
    return n / 2**20


async def seed(server: Server, token: str, project: str, tasks: int) -> list[str]:
    ids: list[str] = []
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=server.url, headers=headers, timeout=60) as http:

        async def one(n: int) -> None:
            body = {
                "query": HAND_OFF,
                "variables": {
                    "input": {
                        "project": project,
                        "requester": "slow/r",
                        "assignee": "slow/a",
                        "packet": big_packet(n),
                    }
                },
            }
            answer = (await http.post("/graphql", json=body)).json()["data"]["handOff"]
            if answer["__typename"] != "HandOffSuccess":
                raise RuntimeError(answer)
            ids.append(answer["task"]["id"])

        for start in range(0, tasks, 8):
            await asyncio.gather(*(one(n) for n in range(start, min(tasks, start + 8))))
    return ids


async def churn(server: Server, token: str, ids: list[str]) -> None:
    """Live events: cancel the seeded tasks one by one."""
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=server.url, headers=headers, timeout=60) as http:
        for task_id in ids:
            await http.post("/graphql", json={"query": CANCEL, "variables": {"id": task_id}})


def make_token(url: str, args: argparse.Namespace, principal: str = "slow") -> str:
    """A token made by the server's own `baton token create` (its code, with `--src`, and its
    database schema)."""
    env = {**os.environ, "BATON_DATABASE_URL": url, **server_env(args)}
    done = subprocess.run(
        [sys.executable, "-m", "baton.cli", "token", "create", "--principal", principal],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def server_env(args: argparse.Namespace) -> dict[str, str]:
    env = dict(a.split("=", 1) for a in args.env)
    env["BATON_METRICS_TOKEN"] = METRICS_TOKEN
    if args.src:
        env["PYTHONPATH"] = args.src
    return env


async def measure(args: argparse.Namespace) -> list[Sample]:
    """Stuck WebSockets replaying events (`--attack sockets`)."""
    samples: list[Sample] = []
    async with bench_database(args.database_url) as (url, where):
        print(f"database: {where}", file=sys.stderr)
        log = Path(tempfile.mkdtemp(prefix="baton-slow-")) / "serve.log"
        server = start_server(url, log, env=server_env(args))
        peers: list[StuckPeer] = []
        try:
            token = make_token(url, args)
            project = "slow"
            ids = await seed(server, token, project, args.tasks)
            await asyncio.sleep(1)
            samples.append(await sample(server, f"{args.tasks} tasks seeded, no socket"))
            document = REPLAY if args.fields == "full" else REPLAY_IDS
            kind = "subscribe" if args.protocol == "graphql-transport-ws" else "start"
            for _ in range(args.sockets):
                peer = StuckPeer(server.url, args.protocol)
                peer.init(token)
                for n in range(args.subscriptions):
                    variables = {"filter": {"projects": [project]}, "after": "0"}
                    peer.subscribe(str(n), document, variables, kind)
                peers.append(peer)
            peak = 0
            for second in range(args.seconds):
                await asyncio.sleep(1)
                rss = server.rss_bytes()
                peak = max(peak, rss)
                if second == 1:
                    samples.append(await sample(server, "2 s after the stuck sockets subscribed"))
            samples.append(Sample(f"peak over {args.seconds} s (replays)", mib(peak)))
            started = time.monotonic()
            await churn(server, token, ids)
            took = time.monotonic() - started
            samples.append(await sample(server, f"after {len(ids)} live events ({took:.1f} s)"))
            await asyncio.sleep(2)
            gone = sum(peer.connection_gone() for peer in peers)
            samples.append(Sample(f"stuck sockets closed by the server: {gone}", float("nan")))
            samples.append(await sample(server, "end"))
        finally:
            for peer in peers:
                peer.close()
            stop_server(server)
    return samples


# --- answers and streams nobody reads (`--attack http`, `--attack sse`) ----------------------

METRICS_TOKEN = "slow-sockets-metrics"
PACKET = "packet { task deliverableType acceptanceCriteria context files dependsOn }"
# Four pages of 100 tasks with their packets: about 14 MB, under the 16 MiB response budget.
FAT_ANSWER = (
    "{ "
    + " ".join(
        f"a{i}: tasks(first: 100) {{ edges {{ node {{ id {PACKET} }} }} }}" for i in range(4)
    )
    + " }"
)
# Each event's task with four pages of its 100 dependents' packets: about 12 MB an event.
FAT_EVENTS = (
    "subscription($filter: TaskEventFilter, $after: ID) { taskEvents(filter: $filter, "
    "after: $after) { id task { "
    + " ".join(f"d{i}: dependents(first: 100) {{ id {PACKET} }}" for i in range(4))
    + " } } }"
)
HUBS = 10  # tasks whose events are fat: each has the same 100 dependents


def stuck_request(server: Server, head: list[str], body: bytes) -> socket.socket:
    """A request sent on a socket with a 4 KB receive buffer that will not be read."""
    host, port = server.url.removeprefix("http://").split(":")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect((host, int(port)))
    lines = [*head, f"Host: {host}:{port}", f"Content-Length: {len(body)}", "", ""]
    sock.sendall("\r\n".join(lines).encode() + body)
    return sock


def answered(sock: socket.socket) -> bool:
    """Whether the server has begun its answer on `sock` (a peek: nothing is read)."""
    try:
        return bool(sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT))
    except BlockingIOError:
        return False
    except OSError:
        return True  # reset: answered that way


def gone(sock: socket.socket) -> bool:
    """Whether the server ended the connection (reset, or FIN), without reading it."""
    return bool(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 8)[0] != TCP_ESTABLISHED)


def status_of(sock: socket.socket) -> str:
    """The status of the answer the server began on `sock` (read now, at the end)."""
    sock.settimeout(0.5)
    try:
        head = sock.recv(16)
    except OSError:
        return "reset"
    return head[9:12].decode() if head.startswith(b"HTTP/1.1 ") else "none"


async def queued_mib(server: Server) -> float | None:
    """The server's `baton_queued_bytes`, or None when it has none (an older version)."""
    headers = {"Authorization": f"Bearer {METRICS_TOKEN}"}
    async with httpx.AsyncClient(base_url=server.url, headers=headers, timeout=30) as http:
        text = (await http.get("/metrics")).text
    for line in text.splitlines():
        if line.startswith("baton_queued_bytes "):
            return mib(int(float(line.split()[1])))
    return None


async def sample(server: Server, step: str) -> Sample:
    return Sample(step, mib(server.rss_bytes()), await queued_mib(server))


async def watch(server: Server, seconds: int) -> list[Sample]:
    """The peaks of RSS and of the gauge over `seconds`, sampled every half second, and both
    at the end, once the server has settled."""
    peak, queued = 0, None
    for _ in range(seconds * 2):
        await asyncio.sleep(0.5)
        peak = max(peak, server.rss_bytes())
        now = await queued_mib(server)
        if now is not None:
            queued = max(queued or 0.0, now)
    return [
        Sample(f"during: peak over {seconds} s", mib(peak), queued),
        await sample(server, "during: at the end"),
    ]


async def other_token_answer(server: Server, token: str, query: str) -> str:
    headers = {"Authorization": f"Bearer {token}"}
    started = time.monotonic()
    async with httpx.AsyncClient(base_url=server.url, headers=headers, timeout=60) as http:
        response = await http.post("/graphql", json={"query": query})
    return f"{response.status_code} in {time.monotonic() - started:.1f} s"


async def unread_answers(args: argparse.Namespace) -> list[Sample]:
    """`--connections` connections of one token ask for about 14 MB each and never read."""
    samples: list[Sample] = []
    async with bench_database(args.database_url) as (url, where):
        print(f"database: {where}", file=sys.stderr)
        log = Path(tempfile.mkdtemp(prefix="baton-slow-")) / "serve.log"
        server = start_server(url, log, env=server_env(args))
        socks: list[socket.socket] = []
        try:
            token = make_token(url, args)
            other = make_token(url, args)
            await seed(server, token, "slow", max(args.tasks, 100))
            await asyncio.sleep(1)
            samples.append(await sample(server, "before: tasks seeded"))
            body = orjson.dumps({"query": FAT_ANSWER})
            head = [
                "POST /graphql HTTP/1.1",
                "Content-Type: application/json",
                f"Authorization: Bearer {token}",
            ]
            # A few at a time, each wave answered before the next: all of them run, none is
            # refused for the database's pool being busy.
            for start in range(0, args.connections, 6):
                wave = [
                    stuck_request(server, head, body)
                    for _ in range(min(6, args.connections - start))
                ]
                socks += wave
                for _ in range(600):  # 30 s at most
                    if all(answered(s) for s in wave):
                        break
                    await asyncio.sleep(0.05)
            samples += await watch(server, args.seconds)
            answer = await other_token_answer(server, other, FAT_ANSWER)
            samples.append(Sample(f"another token's 14 MB answer meanwhile: {answer}", nan))
            statuses = Counter(status_of(s) for s in socks)
            said = ", ".join(f"{n} x {status}" for status, n in sorted(statuses.items()))
            samples.append(Sample(f"the stuck connections were answered: {said}", nan))
            for sock in socks:
                sock.close()
            socks = []
            await asyncio.sleep(3)
            samples.append(await sample(server, "after: 3 s after they closed"))
        finally:
            for sock in socks:
                sock.close()
            stop_server(server)
    return samples


async def seed_hubs(server: Server, token: str) -> None:
    """`HUBS` tasks in project `hub` (two events each), and 100 tasks in project `deps` with
    big packets that all depend on every hub."""
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=server.url, headers=headers, timeout=60) as http:

        async def hand_off(project: str, packet: dict[str, Any]) -> str:
            variables = {
                "input": {
                    "project": project,
                    "requester": "slow/r",
                    "assignee": "slow/a",
                    "packet": packet,
                }
            }
            response = await http.post("/graphql", json={"query": HAND_OFF, "variables": variables})
            answer = response.json()["data"]["handOff"]
            if answer["__typename"] != "HandOffSuccess":
                raise RuntimeError(answer)
            task_id: str = answer["task"]["id"]
            return task_id

        hubs = [
            await hand_off(
                "hub", {"task": f"hub {n}", "deliverableType": "doc", "acceptanceCriteria": ["x"]}
            )
            for n in range(HUBS)
        ]
        for start in range(0, 100, 8):
            await asyncio.gather(
                *(
                    hand_off("deps", {**big_packet(n), "dependsOn": hubs})
                    for n in range(start, min(100, start + 8))
                )
            )


async def unread_streams(args: argparse.Namespace) -> list[Sample]:
    """`--streams` event streams of one token replay events of about 12 MB, never read."""
    samples: list[Sample] = []
    async with bench_database(args.database_url) as (url, where):
        print(f"database: {where}", file=sys.stderr)
        log = Path(tempfile.mkdtemp(prefix="baton-slow-")) / "serve.log"
        server = start_server(url, log, env=server_env(args))
        socks: list[socket.socket] = []
        try:
            token = make_token(url, args)
            other = make_token(url, args)
            await seed_hubs(server, token)
            await asyncio.sleep(1)
            samples.append(await sample(server, "before: tasks seeded"))
            variables = {"filter": {"projects": ["hub"]}, "after": "0"}
            body = orjson.dumps({"query": FAT_EVENTS, "variables": variables})
            head = [
                "POST /graphql/stream HTTP/1.1",
                "Content-Type: application/json",
                f"Authorization: Bearer {token}",
            ]
            for _ in range(args.streams):
                socks.append(stuck_request(server, head, body))
            samples += await watch(server, args.seconds)
            cut = sum(gone(s) for s in socks)
            samples.append(Sample(f"stuck streams the server ended: {cut}", nan))
            answer = await other_token_answer(server, other, "{ viewer { handle } }")
            samples.append(Sample(f"another token's request meanwhile: {answer}", nan))
            for sock in socks:
                sock.close()
            socks = []
            await asyncio.sleep(3)
            samples.append(await sample(server, "after: 3 s after they closed"))
        finally:
            for sock in socks:
                sock.close()
            stop_server(server)
    return samples


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.slow_sockets", description=__doc__)
    parser.add_argument("--attack", choices=("sockets", "http", "sse"), default="sockets")
    parser.add_argument("--sockets", type=int, default=20)
    parser.add_argument("--subscriptions", type=int, default=10, help="per socket")
    parser.add_argument("--tasks", type=int, default=300)
    parser.add_argument("--seconds", type=int, default=10, help="to watch the stuck clients")
    parser.add_argument("--protocol", default="graphql-transport-ws")
    parser.add_argument(
        "--fields", choices=("full", "id"), default="full", help="each event whole, or its id"
    )
    parser.add_argument("--connections", type=int, default=60, help="--attack http")
    parser.add_argument("--streams", type=int, default=30, help="--attack sse")
    parser.add_argument("--env", action="append", default=[], help="VAR=VALUE for the server")
    parser.add_argument("--database-url", default=os.environ.get("BATON_BENCH_DATABASE_URL"))
    parser.add_argument("--src", default=None, help="run the server from this `src` directory")
    args = parser.parse_args(argv)
    if args.src:
        args.src = os.path.abspath(args.src)
    where = f"src {args.src}" if args.src else "this checkout"
    if args.attack == "sockets":
        samples = asyncio.run(measure(args))
        what = "events with packets" if args.fields == "full" else "event ids"
        title = f"{args.sockets} sockets x {args.subscriptions} subscriptions ({what}), {where}"
    elif args.attack == "http":
        samples = asyncio.run(unread_answers(args))
        title = f"{args.connections} HTTP connections of one token not reading, {where}"
    else:
        samples = asyncio.run(unread_streams(args))
        title = f"{args.streams} SSE streams of one token not reading, {where}"
    print(f"| {title} | RSS (MiB) | baton_queued_bytes (MiB) |")
    print("| --- | --- | --- |")
    for s in samples:
        rss = "" if s.rss_mib != s.rss_mib else f"{s.rss_mib:.0f}"
        queued = "" if s.queued_mib is None else f"{s.queued_mib:.1f}"
        print(f"| {s.step} | {rss} | {queued} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
