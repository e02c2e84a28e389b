"""Counting what a client asks of PostgreSQL: a TCP proxy that reads the frontend messages.

Statements are Execute (extended protocol) and Query (simple protocol) messages; round trips
are Sync, Flush and Query messages, the points where a client waits for the server: for its
ReadyForQuery, or (asyncpg's Parse, Describe, Flush) for a statement's description. A statement
that is parsed and described first (asyncpg's first use of a statement on a connection, and
every use behind a transaction pooler, where it caches none) costs that round trip more; the
counts are taken after a warm-up, so caches are warm.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
import threading
from collections import Counter
from urllib.parse import parse_qs, urlsplit

from .procs import free_port

_UNTYPED = {80877103, 80877104}  # SSLRequest, GSSENCRequest: a startup message follows


class CountingProxy:
    """Listens on 127.0.0.1 and forwards to the server of `upstream` (TCP, or the Unix socket of
    an embedded PostgreSQL), counting frontend message types; its own event loop in a thread."""

    def __init__(self, upstream: str) -> None:
        parts = urlsplit(upstream)
        query = parse_qs(parts.query)
        self.socket_dir = query["host"][0] if "host" in query else None
        self.upstream_port = int(query["port"][0]) if "port" in query else parts.port or 5432
        self.upstream_host = parts.hostname or "127.0.0.1"
        self.credentials = parts.netloc.rsplit("@", 1)[0] if "@" in parts.netloc else "postgres"
        self.port = free_port()
        self.counts: Counter[str] = Counter()
        self._lock = threading.Lock()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.server: asyncio.Server | None = None

    def url(self, database: str) -> str:
        return f"postgresql://{self.credentials}@127.0.0.1:{self.port}/{database}"

    def __enter__(self) -> CountingProxy:
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self._listen(), self.loop).result(10)
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._close(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.loop.close()

    def take(self) -> Counter[str]:
        """The counts since the last call."""
        with self._lock:
            counts, self.counts = self.counts, Counter()
        return counts

    async def _listen(self) -> None:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)

    async def _close(self) -> None:
        if self.server is not None:
            self.server.close()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.socket_dir is not None:
            path = f"{self.socket_dir}/.s.PGSQL.{self.upstream_port}"
            up_reader, up_writer = await asyncio.open_unix_connection(path)
        else:
            up_reader, up_writer = await asyncio.open_connection(
                self.upstream_host, self.upstream_port
            )
        back = asyncio.create_task(_pipe(up_reader, writer))
        try:
            await self._frontend(reader, up_writer)
        finally:
            back.cancel()
            for w in (writer, up_writer):
                with contextlib.suppress(Exception):
                    w.close()

    async def _frontend(self, reader: asyncio.StreamReader, out: asyncio.StreamWriter) -> None:
        started = False
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                if not started:  # untyped: length, then a code
                    head = await reader.readexactly(8)
                    length, code = struct.unpack("!ii", head)
                    rest = await reader.readexactly(length - 8)
                    started = code not in _UNTYPED
                    out.write(head + rest)
                    if not started:
                        # the server answers one byte ('N' or 'S') before the startup message
                        await out.drain()
                    continue
                head = await reader.readexactly(5)
                kind = chr(head[0])
                (length,) = struct.unpack("!i", head[1:])
                out.write(head + await reader.readexactly(length - 4))
                with self._lock:
                    self.counts[kind] += 1
                await out.drain()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError, asyncio.CancelledError):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    with contextlib.suppress(Exception):
        writer.close()


def statements(counts: Counter[str]) -> int:
    return counts["E"] + counts["Q"]


def round_trips(counts: Counter[str]) -> int:
    return counts["S"] + counts["H"] + counts["Q"]
