"""The bench database and `baton serve` processes: start, measure (RSS, CPU), stop."""

from __future__ import annotations

import asyncio
import contextlib
import os
import resource
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import asyncpg  # type: ignore[import-untyped, unused-ignore]
import psutil  # type: ignore[import-untyped, unused-ignore]

from baton.store.db import libpq_url
from baton.store.embedded import create_database, start_embedded, stop_embedded

READY_TIMEOUT = 60.0


def raise_open_files_limit() -> int:
    """Soft RLIMIT_NOFILE up to the hard limit (for this process and, via preexec_fn, a child)."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


# --- the database ------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def bench_database(
    server_url: str | None, prefix: str = "baton_bench"
) -> AsyncIterator[tuple[str, str]]:
    """A fresh `<prefix>_<random>` database, dropped at the end: on `server_url` when given,
    else on an embedded PostgreSQL under /tmp. Yields (database URL, where it lives)."""
    if server_url:
        async with _fresh_database(server_url, prefix) as url:
            yield url, _without_credentials(server_url)
        return
    data_dir = Path(tempfile.mkdtemp(prefix="baton-bench-pg-", dir="/tmp"))
    try:
        embedded = await asyncio.to_thread(start_embedded, data_dir)
        async with _fresh_database(embedded, prefix) as url:
            yield url, f"embedded PostgreSQL in {data_dir}"
    finally:
        await asyncio.to_thread(stop_embedded, data_dir)
        shutil.rmtree(data_dir, ignore_errors=True)


@contextlib.asynccontextmanager
async def _fresh_database(server_url: str, prefix: str) -> AsyncIterator[str]:
    name = f"{prefix}_{secrets.token_hex(4)}"
    url = await create_database(server_url, name)
    try:
        yield url
    finally:
        conn = await asyncpg.connect(libpq_url(server_url))
        try:
            await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await conn.close()


def _without_credentials(url: str) -> str:
    parts = urlsplit(url)
    host = parts.hostname or ""
    return f"{parts.scheme}://{host}" + (f":{parts.port}" if parts.port else "") + parts.path


# --- the server process ------------------------------------------------------------------------


@dataclass
class Server:
    url: str
    process: subprocess.Popen[bytes]
    log: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def rss_bytes(self) -> int:
        return int(psutil.Process(self.pid).memory_info().rss)

    def cpu_seconds(self) -> float:
        times = psutil.Process(self.pid).cpu_times()
        return float(times.user + times.system)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(
    database_url: str,
    log: Path,
    args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
) -> Server:
    """`baton serve [args]` on `database_url` (and `env` on top of ours), with the open-files
    limit raised; waits for /readyz."""
    port = _free_port()
    env = {
        **os.environ,
        "BATON_DATABASE_URL": database_url,
        "BATON_LOG_LEVEL": "warning",
        **(env or {}),
    }
    with log.open("wb") as out:  # the child keeps its own copy of the descriptor
        process = subprocess.Popen(
            [sys.executable, "-m", "baton.cli", "serve", "--port", str(port), *args],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            preexec_fn=raise_open_files_limit,
        )
    server = Server(f"http://127.0.0.1:{port}", process, log)
    _wait_ready(server)
    return server


def _wait_ready(server: Server) -> None:
    deadline = time.monotonic() + READY_TIMEOUT
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"baton serve exited: {server.log.read_text()}")
        try:
            with urllib.request.urlopen(f"{server.url}/readyz", timeout=1) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.1)
    stop_server(server)
    raise RuntimeError(f"baton serve did not become ready: {server.log.read_text()}")


def stop_server(server: Server) -> None:
    server.process.send_signal(signal.SIGINT)
    try:
        server.process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.wait()
