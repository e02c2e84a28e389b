"""uvicorn's httptools HTTP/1.1 connection, writing an answer's head and body in one send.

uvicorn writes the status line and headers as soon as the app sends `http.response.start`, and
the body when it sends `http.response.body`: two `send()` system calls for every answer, and
on a loopback or LAN socket each carries its bytes through the kernel's TCP path and wakes the
reader. Here a connection's writes wait for the end of the event loop's current turn and go
out together, so an answer sent within one turn (every GraphQL answer over HTTP) costs one
system call. A write that waits holds its bytes for that one turn only (64 KiB at most), or
until its answer is complete, whichever comes first; a close sends what waits first. The ASGI
behaviour is uvicorn's own; a WebSocket upgrade hands the socket's own transport to the
WebSocket connection.

Each request's scope holds its uvicorn cycle (`baton.sending.cycle_of`), so that a streamed
answer's chunk may skip the ASGI `send` chain (`baton.sending.write_chunk`, written with
`CorkedTransport.write_now`).

Each connection keeps an `Account` of what it holds for its client (`baton.web.outbound`), in
the scope of every request it serves. Its transport pauses the writer as soon as anything is
left unsent and resumes it when nothing is (uvicorn's flow control at a high-water mark of 0):
an answer waits for the previous one to be taken, and the account learns the moment its bytes
are gone.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Iterable
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from baton.sending import CYCLE_KEY
from baton.web.outbound import SCOPE_KEY, Account, Accounted

# Bytes that may wait for the end of a turn: past this a write leaves at once, so an app that
# writes a large body without yielding fills the socket's buffer (and meets uvicorn's flow
# control) as it did before, not this one.
MAX_WAITING = 64 * 1024


class CorkedTransport(asyncio.Transport):
    """A transport whose writes within one turn of the event loop leave as one write."""

    __slots__ = ("_loop", "_pending", "_waiting", "account", "transport")

    def __init__(
        self,
        transport: asyncio.Transport,
        loop: asyncio.AbstractEventLoop,
        account: Account | None = None,
    ) -> None:
        super().__init__()
        self.transport = transport
        self._loop = loop
        self.account = account  # told what the socket's transport buffers after each write
        self._pending: list[bytes] | None = None
        self._waiting = 0  # bytes in `_pending`

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self._pending is None:
            self._pending = []
            self._waiting = 0
            self._loop.call_soon(self.flush)
        chunk = bytes(data)
        self._pending.append(chunk)
        self._waiting += len(chunk)
        if self._waiting > MAX_WAITING:
            self.flush()  # the socket's own buffer, and uvicorn's flow control, take it now

    def writelines(self, list_of_data: Iterable[bytes | bytearray | memoryview]) -> None:
        for data in list_of_data:
            self.write(data)

    def write_now(self, data: bytes) -> None:
        """Write `data` after what waits, all of it now: a piece that is whole by itself (an
        event of a stream), as a WebSocket frame is written."""
        if self._pending is not None:
            self._pending.append(data)
            self.flush()
        elif not self.transport.is_closing():
            self.transport.write(data)
            if self.account is not None:
                self.account.measure(len(data))

    def flush(self) -> None:
        """Send what waits, now."""
        pending, self._pending, self._waiting = self._pending, None, 0
        if pending and not self.transport.is_closing():
            data = pending[0] if len(pending) == 1 else b"".join(pending)
            self.transport.write(data)
            if self.account is not None:
                self.account.measure(len(data))

    def close(self) -> None:
        self.flush()
        self.transport.close()

    def abort(self) -> None:
        self._pending = None
        self.transport.abort()

    def write_eof(self) -> None:
        self.flush()
        self.transport.write_eof()

    def can_write_eof(self) -> bool:
        return self.transport.can_write_eof()

    def is_closing(self) -> bool:
        return self.transport.is_closing()

    def get_write_buffer_size(self) -> int:
        return self.transport.get_write_buffer_size() + self._waiting

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return self.transport.get_write_buffer_limits()

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self.transport.set_write_buffer_limits(high, low)

    def pause_reading(self) -> None:
        self.transport.pause_reading()

    def resume_reading(self) -> None:
        self.transport.resume_reading()

    def is_reading(self) -> bool:
        return self.transport.is_reading()

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self.transport.set_protocol(protocol)

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self.transport.get_protocol()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self.transport.get_extra_info(name, default)


class CorkedHttpToolsProtocol(Accounted, HttpToolsProtocol):
    """uvicorn's httptools connection on a `CorkedTransport`."""

    account: Account

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)  # flow control and addresses on the socket's own
        self.account = Account()
        self.watch(transport)
        self.transport = CorkedTransport(transport, self.loop, self.account)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self.scope[SCOPE_KEY] = self.account  # type: ignore[literal-required]

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        cycle = self.cycle
        # The scope is this request's alone; a pipelined request gets a cycle of its own.
        if cycle is not None and cycle.scope is self.scope:
            self.scope[CYCLE_KEY] = weakref.ref(cycle)  # type: ignore[literal-required]

    def on_response_complete(self) -> None:
        # The answer is whole: it leaves now, head and body in one write, not at the end of
        # the turn, after the rest of its request's task has run and freed what it made.
        corked = self.transport
        if isinstance(corked, CorkedTransport):
            corked.flush()
        super().on_response_complete()

    def handle_websocket_upgrade(self) -> None:
        corked = self.transport
        if isinstance(corked, CorkedTransport):
            corked.flush()  # an answer before the upgrade leaves before the handshake's
            self.transport = corked.transport
        self.account.close()  # the WebSocket connection keeps its own
        super().handle_websocket_upgrade()
