"""Subscribers over Server-Sent Events for `bench.live_delivery --transport sse`: one HTTP/1.1
connection per subscription (graphql-sse's distinct connections mode), as cheap per message as
the WebSocket ones in `bench.subscribers`.

Each connection is an `asyncio.Protocol` that writes one POST and then only reads: an event's id
is taken from the raw bytes with the same regex, up to the last complete event (`\\n\\n`), and
the receive time is one `time.time()` per socket read. The server writes whole events per chunk,
so the chunked encoding's size lines fall between events, never inside one.
"""

from __future__ import annotations

import asyncio
import json
import time
from array import array
from typing import cast
from urllib.parse import urlsplit

from .subscribers import EVENT_ID, WorkerSpec


class SSESubscriber(asyncio.Protocol):
    """One event stream carrying one subscription; records (event id, receive time)."""

    def __init__(self, spec: WorkerSpec, subscribed: asyncio.Future[None]) -> None:
        self.spec = spec
        self.subscribed = subscribed
        self.transport: asyncio.Transport | None = None
        self.ids = array("q")
        self.times = array("d")
        self.last_id = 0
        self.error: str | None = None
        self.closing = False
        self.head: bytes | None = b""  # the response head while it arrives; None once read
        self.pending = b""  # bytes after the last complete event

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        parts = urlsplit(self.spec.http_url)
        body = json.dumps({"query": self.spec.query, "variables": self.spec.variables}).encode()
        head = (
            f"POST /graphql HTTP/1.1\r\nHost: {parts.netloc}\r\n"
            f"Authorization: Bearer {self.spec.token}\r\nAccept: text/event-stream\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        )
        self.transport.write(head.encode() + body)

    def data_received(self, data: bytes) -> None:
        now = time.time()
        if self.head is not None:
            self.head += data
            head, found, data = self.head.partition(b"\r\n\r\n")
            if not found:
                return
            self.head = None
            if not head.startswith(b"HTTP/1.1 200 "):
                self._fail(f"refused: {head.splitlines()[0].decode(errors='replace')}")
                return
            if not self.subscribed.done():
                self.subscribed.set_result(None)
        buffer = self.pending + data
        end = buffer.rfind(b"\n\n")
        if end < 0:
            self.pending = buffer
            return
        for match in EVENT_ID.finditer(buffer, 0, end):
            event_id = int(match.group(1))
            self.ids.append(event_id)
            self.times.append(now)
            self.last_id = event_id
        self.pending = buffer[end + 2 :]

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closing:
            self._fail(f"connection lost: {exc or 'closed by the server'}")

    def _fail(self, reason: str) -> None:
        self.error = self.error or reason
        if not self.subscribed.done():
            self.subscribed.set_exception(ConnectionError(reason))

    def close(self) -> None:
        self.closing = True
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()
