"""Subscriber worker processes: many `graphql-transport-ws` connections, as cheap per message as
Python allows.

Each connection is an `asyncio.Protocol` on uvloop driving websockets' sans-I/O
`ClientProtocol` through the handshake and `connection_ack`; from then on (once the parser has
nothing buffered) it reads the server's frames itself (unmasked, length-prefixed: a few slices
a frame, against about 2.5 µs in websockets' parser) and answers pings itself. There is no
per-message task, future or JSON parse: an event's id is taken from the raw frame with a regex,
and the receive time is one `time.time()` per socket read. The parent process talks to each
worker over a `multiprocessing` pipe:

    worker -> ("subscribed", errors)           every connection acked and its subscribe sent
    parent -> ("warm", event_id)               wait until every subscriber has this event
    worker -> ("warm", (missing, errors))     errors: what some of those lacking it were told
    parent -> ("expect", ids)                  wait for these events, then report
    worker -> ("result", WorkerResult)
"""

from __future__ import annotations

import asyncio
import json
import re
import resource
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any, cast
from urllib.parse import urlsplit

import uvloop
from websockets.client import ClientProtocol
from websockets.extensions.permessage_deflate import ClientPerMessageDeflateFactory
from websockets.frames import Frame, Opcode
from websockets.http11 import Response
from websockets.typing import Subprotocol
from websockets.uri import parse_uri

PROTOCOL = Subprotocol("graphql-transport-ws")
# Field order in a GraphQL result follows the selection, so `id` comes first.
EVENT_ID = re.compile(rb'"taskEvents":\s*\{"id":\s*"(\d+)"')
PING = re.compile(rb'"type":\s*"ping"')
CONNECT_CONCURRENCY = 100
CONNECT_TIMEOUT = 60.0
IDLE_TIMEOUT = 20.0  # give up waiting once no subscriber has received anything for this long


@dataclass(frozen=True)
class WorkerSpec:
    http_url: str
    token: str
    query: str
    variables: dict[str, Any]
    count: int
    transport: str = "ws"  # or "sse": `bench.sse_subscribers`
    deflate: bool = False  # offer permessage-deflate, as browsers and most clients do
    # The loopback address the connections come from: each has its own ~28,000 ports to the
    # server's one address, so several workers' sockets may pass that number together.
    source: str | None = None
    opening: int = CONNECT_CONCURRENCY  # subscriptions one worker opens at once


@dataclass
class WorkerResult:
    subscribers: int
    received: dict[int, array[float]]  # event id -> receive times (first receipt per subscriber)
    lost: int = 0
    duplicates: int = 0
    unexpected: int = 0
    out_of_order: int = 0
    cpu_seconds: float = 0.0
    errors: list[str] = field(default_factory=list)

    @property
    def deliveries(self) -> int:
        return sum(len(times) for times in self.received.values())


class Subscriber(asyncio.Protocol):
    """One WebSocket connection carrying one subscription; records (event id, receive time)."""

    def __init__(self, spec: WorkerSpec, subscribed: asyncio.Future[None]) -> None:
        ws_url = spec.http_url.replace("http://", "ws://", 1) + "/graphql"
        extensions = [ClientPerMessageDeflateFactory()] if spec.deflate else None
        self.ws = ClientProtocol(parse_uri(ws_url), subprotocols=[PROTOCOL], extensions=extensions)
        self.spec = spec
        self.subscribed = subscribed
        self.transport: asyncio.Transport | None = None
        self.ids = array("q")
        self.times = array("d")
        self.last_id = 0
        self.error: str | None = None
        self.closing = False
        self.acknowledged = False
        self.raw: bytearray | None = None  # frames read here: what is left of the last read

    # --- asyncio.Protocol ------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        self.ws.send_request(self.ws.connect())
        self._flush()

    def data_received(self, data: bytes) -> None:
        now = time.time()
        if self.raw is not None:
            self._read_frames(data, now)
            return
        self.ws.receive_data(data)
        for event in self.ws.events_received():
            if isinstance(event, Frame):
                if event.opcode is Opcode.TEXT:
                    self._on_text(event.data, now)
            elif isinstance(event, Response):
                self._on_handshake(event)
        self._flush()
        if self.acknowledged and not self.ws.reader.buffer and _at_frame_start(self.ws):
            self.raw = bytearray()  # nothing of a frame read: the next byte starts one

    def _read_frames(self, data: bytes, now: float) -> None:
        """The server's frames, read here: FIN set (Baton does not fragment), not masked."""
        raw = self.raw
        assert raw is not None
        if raw:
            raw += data
            buffer: bytes | bytearray = raw
        else:
            buffer = data
        end, pos = len(buffer), 0
        while end - pos >= 2:
            first, size = buffer[pos], buffer[pos + 1] & 0x7F
            start = pos + 2
            if size == 126:
                if end - pos < 4:
                    break
                size, start = int.from_bytes(buffer[pos + 2 : pos + 4]), pos + 4
            elif size == 127:
                if end - pos < 10:
                    break
                size, start = int.from_bytes(buffer[pos + 2 : pos + 10]), pos + 10
            if end - start < size:
                break
            payload = buffer[start : start + size]
            pos = start + size
            opcode = first & 0x0F
            if opcode == 0x1:
                self._on_text(payload, now)
            elif opcode == 0x9:  # ping: a pong with its payload (masked with zeros)
                if self.transport is not None:
                    self.transport.write(bytes((0x8A, 0x80 | size)) + bytes(4) + payload)
            elif opcode == 0x8:
                self._fail(f"closed by the server: {bytes(payload[2:])!r}")
                return
        if buffer is raw:
            del raw[:pos]
        else:
            raw += buffer[pos:]

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closing:
            self._fail(f"connection lost: {exc or 'closed by the server'}")

    # --- GraphQL over WebSocket ------------------------------------------------------------

    def _on_text(self, data: bytes | bytearray | memoryview, now: float) -> None:
        match = EVENT_ID.search(data)
        if match is not None:
            event_id = int(match.group(1))
            self.ids.append(event_id)
            self.times.append(now)
            self.last_id = event_id
            return
        message = json.loads(bytes(data))  # rare: protocol messages only
        kind = message.get("type")
        if kind == "connection_ack":
            self.acknowledged = True
            self._send({"id": "1", "type": "subscribe", "payload": self._payload()})
            if not self.subscribed.done():
                self.subscribed.set_result(None)
        elif kind == "ping":
            message = json.dumps({"type": "pong"}).encode()
            if self.raw is None:
                self._send({"type": "pong"})
            elif self.transport is not None:
                self.transport.write(bytes((0x81, 0x80 | len(message))) + bytes(4) + message)
        elif kind != "pong":
            self._fail(f"unexpected message: {bytes(data[:300])!r}")

    def _on_handshake(self, response: Response) -> None:
        if response.status_code != 101:
            self._fail(f"handshake refused: HTTP {response.status_code}")
            return
        init = {"authorization": f"Bearer {self.spec.token}"}
        self._send({"type": "connection_init", "payload": init})

    def _payload(self) -> dict[str, Any]:
        return {"query": self.spec.query, "variables": self.spec.variables}

    def _send(self, message: dict[str, Any]) -> None:
        self.ws.send_text(json.dumps(message).encode())
        self._flush()

    def _flush(self) -> None:
        if self.transport is not None:
            for chunk in self.ws.data_to_send():
                if chunk:
                    self.transport.write(chunk)

    def _fail(self, reason: str) -> None:
        self.error = self.error or reason
        if not self.subscribed.done():
            self.subscribed.set_exception(ConnectionError(reason))

    def close(self) -> None:
        self.closing = True
        if self.transport is None or self.transport.is_closing():
            return
        try:
            if self.raw is None:
                self.ws.send_close()
                self._flush()
            else:  # a close frame, code 1000, masked with zeros
                self.transport.write(bytes((0x88, 0x82)) + bytes(4) + (1000).to_bytes(2))
        finally:
            self.transport.close()


def _at_frame_start(ws: ClientProtocol) -> bool:
    """Whether websockets' parser waits for a frame it has read nothing of."""
    inner: Any = ws.parser
    while (nested := getattr(inner, "gi_yieldfrom", None)) is not None:
        inner = nested
    return getattr(getattr(inner, "gi_code", None), "co_name", None) == "at_eof"


# --- the worker process ------------------------------------------------------------------------


def run_worker(conn: Connection, spec: WorkerSpec) -> None:
    """Entry point of a worker process."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    uvloop.run(_worker(conn, spec))  # a read costs the clients less than on asyncio's loop


async def _worker(conn: Connection, spec: WorkerSpec) -> None:
    subscribers, errors = await _open_all(spec)
    try:
        conn.send(("subscribed", errors))
        await _serve_orders(conn, subscribers)
    except EOFError:
        pass  # the parent gave up (an error on its side); just close the connections
    finally:
        for subscriber in subscribers:
            subscriber.close()
        await asyncio.sleep(0.2)  # let the close frames go out


async def _serve_orders(conn: Connection, subscribers: list[Subscriber]) -> None:
    """The warm-up and measurement orders from the parent (see the module docstring)."""
    _, warm_id = await _receive(conn)
    missing = await _wait_for(subscribers, warm_id)
    errors = [s.error for s in subscribers if s.error and s.last_id < warm_id][:5]
    conn.send(("warm", (missing, errors)))
    cpu_before = _cpu_seconds()
    _, expected = await _receive(conn)
    await _wait_for(subscribers, max(expected))
    cpu_seconds = _cpu_seconds() - cpu_before
    result = _result(subscribers, expected)
    result.cpu_seconds = cpu_seconds
    conn.send(("result", result))


async def _open_all(spec: WorkerSpec) -> tuple[list[Any], list[str]]:
    loop = asyncio.get_running_loop()
    parts = urlsplit(spec.http_url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    limit = asyncio.Semaphore(spec.opening)
    subscribers: list[Any] = []  # Subscriber or SSESubscriber: the same attributes
    errors: list[str] = []

    from .sse_subscribers import SSESubscriber

    kind = SSESubscriber if spec.transport == "sse" else Subscriber

    async def open_one() -> None:
        async with limit:
            subscribed: asyncio.Future[None] = loop.create_future()
            subscriber = kind(spec, subscribed)
            try:
                source = None if spec.source is None else (spec.source, 0)
                await loop.create_connection(lambda: subscriber, host, port, local_addr=source)
                await asyncio.wait_for(subscribed, CONNECT_TIMEOUT)
                subscribers.append(subscriber)
            except (OSError, ConnectionError, TimeoutError) as exc:
                errors.append(f"{type(exc).__name__}: {exc}")
                subscriber.close()

    await asyncio.gather(*(open_one() for _ in range(spec.count)))
    return subscribers, errors


async def _receive(conn: Connection) -> Any:
    return await asyncio.to_thread(conn.recv)


async def _wait_for(subscribers: list[Subscriber], event_id: int) -> int:
    """Wait until every subscriber has received `event_id` (or later), or until nothing has
    arrived anywhere for IDLE_TIMEOUT seconds; returns how many still lack it."""

    def received() -> int:
        return sum(len(s.ids) for s in subscribers)

    def behind() -> int:
        return sum(1 for s in subscribers if s.last_id < event_id)

    await _poll_until(lambda: behind() == 0, received)
    return behind()


async def _poll_until(done: Callable[[], bool], progress: Callable[[], int]) -> None:
    last_progress, last_change = progress(), time.monotonic()
    while not done():
        await asyncio.sleep(0.05)
        now_progress = progress()
        if now_progress != last_progress:
            last_progress, last_change = now_progress, time.monotonic()
        elif time.monotonic() - last_change > IDLE_TIMEOUT:
            return


def _result(subscribers: list[Subscriber], expected: list[int]) -> WorkerResult:
    result = WorkerResult(len(subscribers), {event_id: array("d") for event_id in expected})
    first = min(expected)
    for subscriber in subscribers:
        _check_subscriber(subscriber, first, result)
        if subscriber.error:
            result.errors.append(subscriber.error)
    return result


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _check_subscriber(subscriber: Subscriber, first: int, result: WorkerResult) -> None:
    """Counts this subscriber's lost, repeated, unexpected and out-of-order events."""
    received = result.received
    seen: set[int] = set()
    previous = 0
    for event_id, received_at in zip(subscriber.ids, subscriber.times, strict=True):
        if event_id < previous:
            result.out_of_order += 1
        previous = max(previous, event_id)
        if event_id < first:
            continue  # the warm-up event
        if event_id not in received:
            result.unexpected += 1
        elif event_id in seen:
            result.duplicates += 1
        else:
            seen.add(event_id)
            received[event_id].append(received_at)
    result.lost += len(received) - len(seen)
