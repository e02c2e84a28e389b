"""uvicorn's sans-I/O WebSocket connection, holding less while a socket sits idle.

Thousands of subscriptions spend nearly all their life waiting for the next event, so what
one idle connection holds is what a process's subscriber count costs (bench/idle_memory.py
measured each item). uvicorn's `WebSocketsSansIOProtocol` keeps, per connection, an
`asyncio.Queue` for incoming messages and an `asyncio.Event` for write pauses (about 3.8 KB of
deques between them, used one message at a time), and the handshake's request and response
with their headers (about 4 KB, the request also in the frame of websockets' parser) for as
long as the socket lives. This subclass swaps the queue and the event for a deque and a
future made only while something waits, and lets the handshake go once the socket is
accepted. The ASGI behaviour is uvicorn's own.

It also offers the app a way past ASGI for the frame every subscriber of an event gets:
`write_text` writes a text frame to the connection at once when nothing stands in the way
(the connection open, not paused, no extension to apply), and otherwise leaves it to ASGI's
`send`. Fanning one event out to 10,000 sockets, the message dict, uvicorn's checks and
websockets' framing and buffering cost about 2 of the 36 µs of CPU per delivery
(bench.live_delivery).

Each connection keeps an `Account` of what it holds for its peer (`baton.web.outbound`): its
transport pauses the writer as soon as anything is left unsent and resumes it when nothing is
(a high-water mark of 0), so the account learns the moment its bytes are gone.
"""

from __future__ import annotations

import asyncio
import struct
from collections import deque
from typing import Any, cast

from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from websockets.protocol import State

from baton.web.outbound import Account, Accounted


class _Inbox:
    """What uvicorn uses of `asyncio.Queue` (`put_nowait`, `get`, `empty`), with no deque
    while nothing waits in it."""

    __slots__ = ("_getter", "_items")

    def __init__(self) -> None:
        self._items: deque[Any] | None = None
        self._getter: asyncio.Future[None] | None = None

    def empty(self) -> bool:
        return not self._items

    def put_nowait(self, item: Any) -> None:
        if self._items is None:
            self._items = deque()
        self._items.append(item)
        getter = self._getter
        if getter is not None and not getter.done():
            getter.set_result(None)

    async def get(self) -> Any:
        while not self._items:
            self._getter = asyncio.get_running_loop().create_future()
            try:
                await self._getter
            finally:
                self._getter = None
        item = self._items.popleft()
        if not self._items:
            self._items = None
        return item


class _Gate:
    """What uvicorn uses of `asyncio.Event` for write pauses (`set`, `clear`, `wait`), with
    no deque of waiters while it is open."""

    __slots__ = ("_open", "_waiters")

    def __init__(self) -> None:
        self._open = True
        self._waiters: list[asyncio.Future[None]] | None = None

    def is_set(self) -> bool:
        return self._open

    def set(self) -> None:
        self._open = True
        waiters, self._waiters = self._waiters, None
        for waiter in waiters or ():
            if not waiter.done():
                waiter.set_result(None)

    def clear(self) -> None:
        self._open = False

    async def wait(self) -> None:
        if self._open:
            return
        waiter = asyncio.get_running_loop().create_future()
        if self._waiters is None:
            self._waiters = []
        self._waiters.append(waiter)
        try:
            await waiter
        finally:
            if self._waiters is not None and waiter in self._waiters:
                self._waiters.remove(waiter)


class LeanWebSocketProtocol(Accounted, WebSocketsSansIOProtocol):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.queue = cast(Any, _Inbox())
        self.writable = cast(Any, _Gate())
        self.account = Account()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self.watch(self.transport)

    async def send(self, message: Any) -> None:
        await super().send(message)
        self.account.measure()
        if message["type"] == "websocket.accept" and self.handshake_complete:
            # The handshake is written: nothing reads the request, the response or the
            # scope's headers again (Baton's WebSocket app reads headers before accepting).
            del self.request, self.response
            self.scope["headers"] = []
            conn = self.conn
            if conn.state is State.OPEN and not conn.reader.buffer:
                # websockets' parser is a generator whose frame keeps the handshake request
                # as a local for the connection's life. Nothing is buffered, so nothing of a
                # frame has been read: a fresh parser (for an open connection it starts at a
                # frame boundary) lets the request go.
                conn.reader.buffer = bytearray()
                conn.parser = conn.parse()
                next(conn.parser)

    def write_text(self, data: bytes) -> bool:
        """Write `data` (UTF-8) as one text frame now; False, writing nothing, when only
        ASGI's `send` may (paused for the peer, closing or closed, an extension negotiated),
        so that it waits, raises or drops the message as uvicorn does."""
        conn = self.conn
        if (
            self.close_sent
            or self.disconnected
            or not self.writable.is_set()
            or conn.state is not State.OPEN
            or conn.extensions
            or self.transport.is_closing()  # reset (`baton.web.outbound`), not yet lost
        ):
            return False
        size = len(data)
        # A server's frames are not masked: FIN and the opcode, then the length.
        if size < 126:
            head = struct.pack("!BB", 0x81, size)
        elif size < 65536:
            head = struct.pack("!BBH", 0x81, 126, size)
        else:
            head = struct.pack("!BBQ", 0x81, 127, size)
        frame = head + data
        self.transport.write(frame)
        self.account.measure(len(frame))  # what the peer did not take at once waits here
        return True
