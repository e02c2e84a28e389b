"""Memory of `baton serve` while WebSocket peers stop reading.

    .venv/bin/python -m bench.slow_sockets [--sockets 20] [--subscriptions 10] [--tasks 300]

Seeds `--tasks` tasks with packets near the schema's largest (about 36 KB each), then opens
`--sockets` WebSockets that each start `--subscriptions` `taskEvents` subscriptions replaying
every event with its task's packet, and never read again (4 KB receive buffer). It then makes
live events for a while. Prints the server's RSS at each step and how many of the stuck
sockets the server closed (their TCP connection reset or ended). See bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import orjson
from websockets.client import ClientProtocol
from websockets.frames import Frame, Opcode
from websockets.http11 import Response
from websockets.typing import Subprotocol
from websockets.uri import parse_uri

from baton.access.principals import Principal, PrincipalKind
from baton.access.tokens import create_token
from baton.store.db import Database

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


async def measure(args: argparse.Namespace) -> list[Sample]:
    samples: list[Sample] = []
    async with bench_database(args.database_url) as (url, where):
        print(f"database: {where}", file=sys.stderr)
        log = Path(tempfile.mkdtemp(prefix="baton-slow-")) / "serve.log"
        server = start_server(url, log, env=dict(a.split("=", 1) for a in args.env))
        db = await Database.connect(url, min_size=1, max_size=2)
        peers: list[StuckPeer] = []
        try:
            token = await create_token(db, Principal(PrincipalKind.OWNER, "slow"))
            project = "slow"
            ids = await seed(server, token, project, args.tasks)
            await asyncio.sleep(1)
            samples.append(Sample(f"{args.tasks} tasks seeded, no socket", mib(server.rss_bytes())))
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
                    samples.append(Sample("2 s after the stuck sockets subscribed", mib(rss)))
            samples.append(Sample(f"peak over {args.seconds} s (replays)", mib(peak)))
            started = time.monotonic()
            await churn(server, token, ids)
            samples.append(
                Sample(
                    f"after {len(ids)} live events ({time.monotonic() - started:.1f} s)",
                    mib(server.rss_bytes()),
                )
            )
            await asyncio.sleep(2)
            gone = sum(peer.connection_gone() for peer in peers)
            samples.append(Sample(f"stuck sockets closed by the server: {gone}", float("nan")))
            samples.append(Sample("end", mib(server.rss_bytes())))
        finally:
            for peer in peers:
                peer.close()
            await db.close()
            stop_server(server)
    return samples


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.slow_sockets", description=__doc__)
    parser.add_argument("--sockets", type=int, default=20)
    parser.add_argument("--subscriptions", type=int, default=10, help="per socket")
    parser.add_argument("--tasks", type=int, default=300)
    parser.add_argument("--seconds", type=int, default=10, help="to watch the replays")
    parser.add_argument("--protocol", default="graphql-transport-ws")
    parser.add_argument(
        "--fields", choices=("full", "id"), default="full", help="each event whole, or its id"
    )
    parser.add_argument("--env", action="append", default=[], help="VAR=VALUE for the server")
    parser.add_argument("--database-url", default=os.environ.get("BATON_BENCH_DATABASE_URL"))
    args = parser.parse_args(argv)
    samples = asyncio.run(measure(args))
    what = "events with packets" if args.fields == "full" else "event ids"
    print(f"| {args.sockets} sockets x {args.subscriptions} subscriptions ({what}) | RSS (MiB) |")
    print("| --- | --- |")
    for s in samples:
        print(f"| {s.step} | {'' if s.rss_mib != s.rss_mib else f'{s.rss_mib:.0f}'} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
