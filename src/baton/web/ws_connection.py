"""uvicorn's sans-I/O WebSocket connection, holding less while a socket sits idle.

Thousands of subscriptions spend nearly all their life waiting for the next event, so what
one idle connection holds is what a process's subscriber count costs (bench/idle_memory.py
measured each item). uvicorn's `WebSocketsSansIOProtocol` keeps, per connection, an
`asyncio.Queue` for incoming messages and an `asyncio.Event` for write pauses (about 3.8 KB of
deques between them, used one message at a time), and the handshake's request and response
with their headers (about 4 KB, the request also in the frame of websockets' parser) for as
long as the socket lives. This subclass swaps the queue and the event for a deque and a
future made only while something waits, and lets the handshake go once the socket is
accepted. It also keeps every attribute (uvicorn's too) in a slot rather than a dictionary of
its own, lets websockets' parser go between messages (its generators held the last message
received, a subscription's whole document) and keeps the keep-alive pings' timers of every
socket under one timer of the loop (`_Wheel`). The ASGI behaviour is uvicorn's own.

It also offers the app a way past ASGI for the frame every subscriber of an event gets:
`write_text` writes a text frame to the connection at once when nothing stands in the way
(the connection open, not paused, no extension to apply), and otherwise leaves it to ASGI's
`send`; `write_frame` writes a frame made once (`text_frame`) for every socket it goes to.
Fanning one event out to 10,000 sockets, the message dict, uvicorn's checks and websockets'
framing and buffering cost about 2 of the 36 µs of CPU per delivery (bench.live_delivery).

Each connection keeps an `Account` of what it holds for its peer (`baton.web.outbound`): its
transport pauses the writer as soon as anything is left unsent and resumes it when nothing is
(a high-water mark of 0), so the account learns the moment its bytes are gone.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
import struct
from collections import deque
from collections.abc import Callable, Generator
from typing import Any, cast

from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from websockets.protocol import State

from baton.web.outbound import Account, Accounted

log = logging.getLogger("baton.ws")


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


class _Timer:
    """One keep-alive timer on the `_Wheel`: what `call_later`'s handle is to uvicorn."""

    __slots__ = ("callback", "cancelled")

    def __init__(self, callback: Callable[[], object]) -> None:
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class _Wheel:
    """Every WebSocket's keep-alive timers on one event loop, in slots of a second, under one
    timer of the loop. uvicorn gives each connection a timer of the loop for its next ping or
    pong (a handle, its callback's arguments and a libuv timer: about 570 bytes for each idle
    socket, bench.idle_memory); here a socket's timer is two slots in a list. A timer fires
    at most a second late (ping every 20 s, pong within 20 s), never early."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.slots: dict[int, list[_Timer]] = {}
        self.handle: asyncio.TimerHandle | None = None

    def call_later(self, delay: float, callback: Callable[[], object]) -> _Timer:
        timer = _Timer(callback)
        slot = math.ceil(self.loop.time() + delay)
        timers = self.slots.get(slot)
        if timers is None:
            timers = self.slots[slot] = []
            if self.handle is None or slot < self.handle.when():
                self._arm(slot)
        timers.append(timer)
        return timer

    def _arm(self, slot: int) -> None:
        if self.handle is not None:
            self.handle.cancel()
        self.handle = self.loop.call_at(slot, self._fire)

    def _fire(self) -> None:
        self.handle = None
        now = self.loop.time()
        for slot in sorted(slot for slot in self.slots if slot <= now):
            for timer in self.slots.pop(slot):
                if not timer.cancelled:
                    try:
                        timer.callback()
                    except Exception:
                        log.exception("a WebSocket keep-alive timer failed")
        if self.slots:
            self._arm(min(self.slots))
        elif _WHEELS.get(id(self.loop)) is self:
            del _WHEELS[id(self.loop)]  # nothing to time: the loop is not held


_WHEELS: dict[int, _Wheel] = {}  # by the id of their loop, while they hold timers


def _wheel(loop: asyncio.AbstractEventLoop) -> _Wheel:
    wheel = _WHEELS.get(id(loop))
    if wheel is None or wheel.loop is not loop:
        wheel = _WHEELS[id(loop)] = _Wheel(loop)
    return wheel


def _at_frame_start(parser: Generator[None, None, None]) -> bool:
    """Whether websockets' parser waits for a frame it has read nothing of (in
    `StreamReader.at_eof`, the first step of each frame)."""
    inner: Any = parser
    while (nested := getattr(inner, "gi_yieldfrom", None)) is not None:
        inner = nested
    return getattr(getattr(inner, "gi_code", None), "co_name", None) == "at_eof"


class LeanWebSocketProtocol(Accounted, WebSocketsSansIOProtocol):
    # Slots for uvicorn's attributes as well as ours: its class has some forty, past the
    # thirty an instance's dictionary may share keys with its class's, so each connection
    # had a dictionary of its own (1.6 KB, bench.idle_memory). A slot of this class takes
    # the attribute before any dictionary would (a test checks none is left out).
    __slots__ = (
        "account",
        "app",
        "app_state",
        "asgi_version",
        "client",
        "close_sent",
        "close_timeout",
        "close_timer",
        "config",
        "conn",
        "connections",
        "curr_msg_data_type",
        "default_headers",
        "disconnected",
        "frames",
        "handshake_complete",
        "handshake_initiated",
        "initial_response",
        "last_ping_rtt",
        "logger",
        "loop",
        "pending_ping_payload",
        "ping_interval",
        "ping_sent_at",
        "ping_timeout",
        "ping_timer",
        "pong_timer",
        "queue",
        "read_paused",
        "request",
        "response",
        "root_path",
        "scheme",
        "scope",
        "server",
        "tasks",
        "transport",
        "writable",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.queue = cast(Any, _Inbox())
        self.writable = cast(Any, _Gate())
        self.account = Account()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self.watch(self.transport)

    def data_received(self, data: bytes) -> None:
        conn = self.conn
        if conn.parser is None:  # let go while the socket was idle (`_idle_parser`)
            # A fresh parser starts at a frame; `receive_data` takes its first step.
            conn.parser = conn.parse()
        super().data_received(data)
        self._idle_parser()

    def _idle_parser(self) -> None:
        """Let websockets' parser go while it waits for a frame it has read nothing of: its
        generators (three frames deep) keep the last frame received, a subscription's whole
        document, for as long as the socket waits for the next message."""
        conn = self.conn
        if conn.state is State.OPEN and conn.parser is not None and _at_frame_start(conn.parser):
            conn.parser = None  # type: ignore[assignment]  # made again by `data_received`
            if not conn.reader.buffer:
                conn.reader.buffer = bytearray()  # the last message's room, too

    def schedule_ping(self) -> None:
        assert self.ping_interval is not None
        delay = max(0.0, self.ping_interval - self.last_ping_rtt)
        self.ping_timer = cast(Any, _wheel(self.loop).call_later(delay, self.send_keepalive_ping))

    def send_keepalive_ping(self) -> None:
        # uvicorn's, with the pong's deadline on the wheel too.
        self.ping_timer = None
        if self.close_sent or self.transport.is_closing():
            return
        self.pending_ping_payload = struct.pack("!I", random.getrandbits(32))
        self.ping_sent_at = self.loop.time()
        self.conn.send_ping(self.pending_ping_payload)
        self.transport.write(b"".join(self.conn.data_to_send()))
        if self.ping_timeout is not None:
            wheel = _wheel(self.loop)
            self.pong_timer = cast(Any, wheel.call_later(self.ping_timeout, self.keepalive_timeout))
        else:
            self.schedule_ping()

    async def send(self, message: Any) -> None:
        await super().send(message)
        self.account.measure()
        if message["type"] == "websocket.accept" and self.handshake_complete:
            # The handshake is written: nothing reads the request, the response or the
            # scope's headers again (Baton's WebSocket app reads headers before accepting),
            # and the parser's generators hold the request.
            del self.request, self.response
            self.scope["headers"] = []
            self._idle_parser()

    def write_text(self, data: bytes) -> bool:
        """Write `data` (UTF-8) as one text frame now; False, writing nothing, when only
        ASGI's `send` may (paused for the peer, closing or closed, an extension negotiated),
        so that it waits, raises or drops the message as uvicorn does."""
        return self.write_frame(text_frame(data))

    def write_frame(self, frame: bytes) -> bool:
        """Write `frame`, a whole text frame (`text_frame`), as `write_text` does: made once,
        it may go to every socket that sends the same message. Only while the transport holds
        nothing unsent (it pauses the writer as soon as it does)."""
        conn = self.conn
        transport = self.transport
        if (
            self.close_sent
            or self.disconnected
            or not self.writable.is_set()
            or conn.state is not State.OPEN
            or conn.extensions
            or transport.is_closing()  # reset (`baton.web.outbound`), not yet lost
        ):
            return False
        transport.write(frame)
        account = self.account
        if transport.get_write_buffer_size() or account.buffered:
            account.measure(len(frame))  # what the peer did not take at once waits here
        return True


def text_frame(data: bytes) -> bytes:
    """`data` (UTF-8) as one WebSocket text frame from a server, with no extension."""
    size = len(data)
    # A server's frames are not masked: FIN and the opcode, then the length.
    if size < 126:
        head = struct.pack("!BB", 0x81, size)
    elif size < 65536:
        head = struct.pack("!BBH", 0x81, 126, size)
    else:
        head = struct.pack("!BBQ", 0x81, 127, size)
    return head + data
