"""An HTTP/1.1 client made for webhook POSTs: kept-alive connections to checked addresses.

A general client pays for what a webhook never uses (a pool shared by any URL, cookies,
proxies, redirects, request and response objects): about 560 µs of CPU a POST against 20 for
the same bytes on an open socket (bench/README.md, `doors`). Here a connection goes to one
`Origin` (the address `webhook_addresses.resolve` checked, its port, and the TLS server name
for https) and serves one request at a time; it is kept for the next message to that origin
while the receiver keeps it open, at most `max_idle` of them (the least recently used goes
first), each for at most `keep_alive` seconds idle. The request is written and an answer of
the plain form read by `wire`, any other answer by h11: its head is at most `MAX_HEAD_BYTES`,
its body kept up to `keep` bytes and drained up to `DRAIN_BYTES` to keep the connection (past
that, or past `DRAIN_SECONDS`, it is closed).

A request is sent again, once, only when it provably was not: its kept connection was found
closed before a byte of it was written. Once written, whatever happens is the attempt's
outcome (the receiver may have acted on it). Time bounds are the caller's (`baton.deadlines`);
a request cancelled part way drops its connection.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import cast

import h11

from baton.deadlines import Deadlines
from baton.webhooks import wire

MAX_HEAD_BYTES = 16 * 1024  # of an answer's status line and headers
DRAIN_BYTES = 64 * 1024  # of an answer's body read past what is kept, to keep the connection
DRAIN_SECONDS = 0.5  # the most the rest of a body is waited for once the kept part is read
READ_BUFFER = 256 * 1024  # received and not yet parsed: more pauses reading


class ConnectError(Exception):
    """The connection could not be opened."""


class RemoteProtocolError(Exception):
    """The receiver's answer is not HTTP/1.1 as h11 reads it, or stopped short."""


class LocalProtocolError(Exception):
    """The request cannot be written (a header value that is not allowed)."""


class ReadError(Exception):
    """The connection failed before the answer came."""


@dataclass(frozen=True)
class Origin:
    address: str  # the checked address, connected to as it is
    port: int
    server_name: str | None  # TLS (and its SNI) for https; None: plain http


@dataclass(frozen=True)
class Reply:
    status: int
    body: bytes  # the first `keep` bytes


class _Unsent(Exception):
    """The kept connection was closed before any of the request went out."""


class _Connection(asyncio.Protocol):
    """One connection, one exchange at a time. What the transport receives is buffered; an
    answer of the plain form is read from the buffer (`wire.plain_head`), any other is handed
    to h11 whole."""

    def __init__(self, origin: Origin) -> None:
        self.origin = origin
        self.transport: asyncio.Transport | None = None
        self.busy = False  # an exchange is under way
        self.closed = False  # the peer closed it, or it failed, or it was dropped
        self.idle_since = 0.0
        self._buffer = bytearray()
        self._parser: h11.Connection | None = None  # reading this exchange's answer, if h11 is
        self._waiter: asyncio.Future[None] | None = None
        self._eof = False  # nothing more will be received
        self._paused = False
        self._lost: Exception | None = None
        self._dropped = False  # by this side

    # --- asyncio.Protocol ---------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, but are transports.
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        if not self.busy:  # nothing is asked of an idle connection: it cannot be reused
            self.drop()
            return
        if self._parser is not None:
            self._parser.receive_data(data)
        else:
            self._buffer += data
        if len(self._buffer) > READ_BUFFER and self.transport is not None:
            self.transport.pause_reading()
            self._paused = True
        self._wake()

    def eof_received(self) -> None:
        self.closed = True
        self._end()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._lost = exc
        self._end()

    # --- its use ------------------------------------------------------------------------------

    def drop(self) -> None:
        """Close now, without a word to the peer or a wait on it."""
        self.closed = self._dropped = True
        if self.transport is not None:
            self.transport.abort()
        self._end()

    def _end(self) -> None:
        if not self._eof:
            self._eof = True
            if self._parser is not None:
                self._parser.receive_data(b"")
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def _more(self) -> None:
        """Wait for more to be received (or the end)."""
        if self._paused and self.transport is not None:
            self._paused = False
            self.transport.resume_reading()
        self._waiter = asyncio.get_running_loop().create_future()
        await self._waiter

    async def exchange(self, request: bytes, keep: int) -> Reply:
        """Write `request` and read the answer, keeping the first `keep` bytes of its body."""
        if self.closed or self.transport is None or self.transport.is_closing():
            raise _Unsent
        self.busy = True
        self._buffer.clear()
        self.transport.write(request)
        while True:
            end = self._buffer.find(b"\r\n\r\n", 0, MAX_HEAD_BYTES + 4)
            if end >= 0:
                head = wire.plain_head(bytes(self._buffer[:end]))
                if head is not None:
                    del self._buffer[: end + 4]
                    return await self._plain(head, keep)
                break
            if self._eof and not self._buffer:
                raise self._closed_early(None)
            bare = self._buffer.find(b"\n\n", 0, MAX_HEAD_BYTES) >= 0  # lines ending in LF only
            if self._eof or bare:
                break  # h11 has the last word on it
            if len(self._buffer) > MAX_HEAD_BYTES:
                self.drop()
                raise RemoteProtocolError(f"the answer's head is too long (over {MAX_HEAD_BYTES})")
            await self._more()
        return await self._by_h11(keep)

    async def _plain(self, head: wire.Head, keep: int) -> Reply:
        want = min(head.length, keep)
        while len(self._buffer) < want:
            if self._eof:
                raise self._closed_early(head.status)
            await self._more()
        reply = Reply(head.status, bytes(self._buffer[:want]))
        if head.length > keep + DRAIN_BYTES:
            self.drop()  # not worth reading to keep the connection
            return reply
        if len(self._buffer) < head.length and not self._eof:
            # What is kept is read: the rest only to keep the connection, briefly.
            try:
                async with asyncio.timeout(DRAIN_SECONDS):
                    while len(self._buffer) < head.length and not self._eof:
                        await self._more()
            except TimeoutError:
                pass
        # Less than announced, or more (nothing may come before the next request): closed.
        self._done(keep=len(self._buffer) == head.length and not head.close)
        return reply

    async def _by_h11(self, keep: int) -> Reply:
        parser = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_HEAD_BYTES)
        # Its state as if it had sent the request (written already; no h11 event depends on
        # more of it than that it was a POST of HTTP/1.1).
        parser.send(h11.Request(method="POST", target="/", headers=[("host", "-")]))
        parser.send(h11.EndOfMessage())
        parser.receive_data(bytes(self._buffer))
        self._buffer.clear()
        if self._eof:
            parser.receive_data(b"")
        self._parser = parser
        status: int | None = None
        kept = bytearray()
        read = 0
        while True:
            if status is not None and len(kept) >= keep:
                # What is kept is read: the rest only to keep the connection, briefly.
                try:
                    async with asyncio.timeout(DRAIN_SECONDS):
                        await self._drain(parser, read)
                except (TimeoutError, RemoteProtocolError):
                    self.drop()
                return Reply(status, bytes(kept[:keep]))
            try:
                event = await self._event(parser)
            except RemoteProtocolError:
                if status is None and self._eof:  # closed before an answer: say it plainly
                    raise self._closed_early(None) from None
                raise
            if isinstance(event, h11.Response):
                status = event.status_code
            elif isinstance(event, h11.Data):
                read += len(event.data)
                kept += event.data[: max(0, keep - len(kept))]
            elif isinstance(event, h11.EndOfMessage):
                assert status is not None
                self._done_h11(parser)
                return Reply(status, bytes(kept))
            elif isinstance(event, h11.ConnectionClosed) or event is h11.PAUSED:
                raise self._closed_early(status)
            # h11.InformationalResponse (a 1xx before the answer): read on

    async def _event(self, parser: h11.Connection) -> h11.Event | type[h11.PAUSED]:
        while True:
            try:
                event = parser.next_event()
            except h11.RemoteProtocolError as exc:
                raise RemoteProtocolError(str(exc)) from None
            if event is not h11.NEED_DATA:
                return event  # type: ignore[return-value]  # NEED_DATA is its only other kind
            await self._more()

    async def _drain(self, parser: h11.Connection, read: int) -> None:
        while read <= DRAIN_BYTES:
            event = await self._event(parser)
            if isinstance(event, h11.Data):
                read += len(event.data)
            elif isinstance(event, h11.EndOfMessage):
                self._done_h11(parser)
                return
            else:
                raise RemoteProtocolError("the answer's body ended early")
        self.drop()

    def _done_h11(self, parser: h11.Connection) -> None:
        trailing, _ = parser.trailing_data
        self._done(
            keep=parser.our_state is h11.DONE and parser.their_state is h11.DONE and not trailing
        )

    def _done(self, keep: bool) -> None:
        """The answer is read: ready for the next request, or closed if either side said so."""
        self.busy = False
        self._parser = None
        if not keep or self.closed:
            self.drop()

    def _closed_early(self, status: int | None) -> Exception:
        dropped = self._dropped
        self.drop()
        if dropped:
            return ReadError("the connection was closed on this side (the worker stopping)")
        if status is None and self._lost is not None:
            return ReadError(str(self._lost) or type(self._lost).__name__)
        if status is None:
            return RemoteProtocolError("Server disconnected without sending a response.")
        return RemoteProtocolError("peer closed connection without sending complete message body")


class Client:
    """Connections to webhook receivers, kept between messages (see the module's text)."""

    def __init__(self, max_idle: int, keep_alive: float, tls: ssl.SSLContext | None = None) -> None:
        self.max_idle = max_idle
        self.keep_alive = keep_alive
        self._idle: list[_Connection] = []  # least recently used first
        self._all: set[_Connection] = set()
        self._tls = tls  # the system's trusted authorities unless given (tests give theirs)
        self._sweeper: asyncio.TimerHandle | None = None
        self.opened = 0  # connections opened so far (tests and benchmarks read it)
        # The callers' time limits on their attempts, on one timer (`baton.deadlines`).
        self.deadlines = Deadlines()

    async def post(
        self,
        origin: Origin,
        start: bytes,
        headers: Iterable[tuple[str, str]],
        body: bytes,
        keep: int,
    ) -> Reply:
        """The receiver's answer to the POST of `body` that `start` begins (`wire.head`: the
        request line and the headers every message to its URL has), with `headers` and the
        body's length."""
        try:
            request = wire.request(start, headers, body)
        except wire.Unsendable as exc:
            raise LocalProtocolError(str(exc)) from None
        conn = self._take(origin)
        if conn is not None:
            try:
                return await self._exchange(conn, request, keep)
            except _Unsent:
                pass  # it was closed while kept: none of the request went out
        conn = await self._open(origin)
        try:
            return await self._exchange(conn, request, keep)
        except _Unsent:
            raise ReadError("the connection closed as it was opened") from None

    async def _exchange(self, conn: _Connection, request: bytes, keep: int) -> Reply:
        try:
            reply = await conn.exchange(request, keep)
        except BaseException:
            conn.drop()
            self._all.discard(conn)
            raise
        if conn.closed:
            self._all.discard(conn)
        else:
            self._keep(conn)
        return reply

    def _take(self, origin: Origin) -> _Connection | None:
        """The most recently used idle connection to `origin` that is still open."""
        now = time.monotonic()
        for n in range(len(self._idle) - 1, -1, -1):
            conn = self._idle[n]
            if conn.origin != origin:
                continue
            del self._idle[n]
            if conn.closed or now - conn.idle_since > self.keep_alive:
                conn.drop()
                self._all.discard(conn)
                continue
            return conn
        return None

    def _keep(self, conn: _Connection) -> None:
        conn.idle_since = time.monotonic()
        self._idle.append(conn)
        while len(self._idle) > self.max_idle:
            self._forget(self._idle[0])
        if self._sweeper is None:
            self._sweeper = asyncio.get_running_loop().call_later(self.keep_alive, self._sweep)

    def _sweep(self) -> None:
        """Let go of the connections idle for `keep_alive`: one timer for all of them (the
        oldest is first), rather than one set and cancelled per message."""
        self._sweeper = None
        now = time.monotonic()
        while self._idle and now - self._idle[0].idle_since >= self.keep_alive:
            self._forget(self._idle[0])
        if self._idle:
            left = self._idle[0].idle_since + self.keep_alive - now
            self._sweeper = asyncio.get_running_loop().call_later(left, self._sweep)

    def _forget(self, conn: _Connection) -> None:
        if conn in self._idle:
            self._idle.remove(conn)
        self._all.discard(conn)
        conn.drop()

    async def _open(self, origin: Origin) -> _Connection:
        loop = asyncio.get_running_loop()
        conn = _Connection(origin)
        tls: ssl.SSLContext | None = None
        if origin.server_name is not None:
            if self._tls is None:
                self._tls = ssl.create_default_context()
            tls = self._tls
        self._all.add(conn)
        try:
            await loop.create_connection(
                lambda: conn,
                origin.address,
                origin.port,
                ssl=tls,
                server_hostname=origin.server_name,
            )
        except BaseException as exc:
            conn.drop()
            self._all.discard(conn)
            if isinstance(exc, OSError):  # refused, unreachable, a certificate not trusted…
                raise ConnectError(str(exc) or type(exc).__name__) from None
            raise
        self.opened += 1
        return conn

    @property
    def idle(self) -> int:
        return len(self._idle)

    def close(self) -> None:
        """Drop every connection at once: no peer is waited on."""
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        for conn in list(self._all):
            conn.drop()
        self._all.clear()
        self._idle.clear()
