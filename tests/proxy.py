"""A TCP proxy in front of the test PostgreSQL, which a test can cut to make the database
unreachable for a server process (and restore), without touching the real server."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from urllib.parse import parse_qs, urlsplit

from tests.conftest import free_port


class DatabaseProxy:
    """Listens on 127.0.0.1:`port` and forwards to the server of `upstream` (a TCP URL, or the
    Unix-socket URL of an embedded PostgreSQL). Runs its own event loop in a thread, so a test
    may block while the proxy keeps forwarding."""

    def __init__(self, upstream: str) -> None:
        parts = urlsplit(upstream)
        query = parse_qs(parts.query)
        self.socket_dir = query["host"][0] if "host" in query else None
        self.upstream_port = int(query["port"][0]) if "port" in query else parts.port or 5432
        self.upstream_host = parts.hostname or "127.0.0.1"
        self.user = parts.username or "postgres"
        self.port = free_port()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.server: asyncio.Server | None = None
        self.streams: set[asyncio.StreamWriter] = set()

    def url(self, database: str) -> str:
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{database}"

    def __enter__(self) -> DatabaseProxy:
        self.thread.start()
        self.restore()
        return self

    def __exit__(self, *exc: object) -> None:
        self._run(self._shutdown())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.loop.close()

    async def _shutdown(self) -> None:
        await self._cut()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _run(self, coroutine: object) -> None:
        asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(10)  # type: ignore[arg-type]

    def restore(self) -> None:
        """Accept connections again."""
        self._run(self._listen())

    def cut(self) -> None:
        """Drop every forwarded connection and refuse new ones."""
        self._run(self._cut())

    async def _listen(self) -> None:
        if self.server is None:
            self.server = await asyncio.start_server(self._forward, "127.0.0.1", self.port)

    async def _cut(self) -> None:
        server, self.server = self.server, None
        if server is not None:
            server.close()
        for writer in list(self.streams):
            writer.transport.abort()
        self.streams.clear()
        if server is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(server.wait_closed(), 1)
        await asyncio.sleep(0.05)  # let the aborted transports close

    async def _open_upstream(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if self.socket_dir is not None:
            path = f"{self.socket_dir}/.s.PGSQL.{self.upstream_port}"
            return await asyncio.open_unix_connection(path)
        return await asyncio.open_connection(self.upstream_host, self.upstream_port)

    async def _forward(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await self._open_upstream()
        except OSError:
            writer.transport.abort()
            return
        self.streams |= {writer, up_writer}

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError, ConnectionError):
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            dst.transport.abort()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        self.streams -= {writer, up_writer}
