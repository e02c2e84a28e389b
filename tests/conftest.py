"""Shared fixtures: a fresh, migrated PostgreSQL database per test session.

BATON_TEST_DATABASE_URL names a server to create the database on; without it an embedded
PostgreSQL is started under a temporary directory. Tests keep out of each other's way by using
unique owner names (see `world`), so nothing is truncated between them.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from broadcaster import Broadcast
from sqlalchemy.ext.asyncio import AsyncEngine

from baton.access.principals import Principal
from baton.access.tokens import create_token
from baton.live.backends import PostgresBackend
from baton.live.hub import EventHub
from baton.live.logs import TASK_LOG
from baton.services.tasks import TaskService
from baton.store import migrate
from baton.store.db import Database, create_engine, libpq_url
from baton.store.embedded import start_embedded, stop_embedded
from baton.store.records import EventRecord
from tests.helpers import World, fresh_database

if TYPE_CHECKING:
    from tests.live.cluster import RedisProcess


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[RedisProcess]:
    """A Redis server of the test's own (skipped, or failed under CI, without redis-server)."""
    from tests.live.cluster import REDIS_SERVER, RedisProcess  # it imports this module
    from tests.tools import missing

    if REDIS_SERVER is None:
        missing("redis-server", "apt-get install redis-server")
    process = RedisProcess(tmp_path)
    process.start()
    yield process
    process.stop()


@contextlib.contextmanager
def through_sdk(
    module: str, door: str, database_url: str, db: Database, log: Path
) -> Iterator[LiveServer]:
    """`baton serve` on `database_url` with `module`'s `door` answering nothing itself
    (`direct = False`): the protocol SDK's dispatchers answer every request, for tests that
    hold the door's own answers to theirs."""
    code = (
        f"import runpy, {module} as door; door.{door}.direct = False; "
        "runpy.run_module('baton.cli', run_name='__main__')"
    )
    url, process = start_server({"BATON_DATABASE_URL": database_url}, log, launch=("-c", code))
    try:
        yield LiveServer(url, db, process)
    finally:
        stop_server(process)


@pytest.fixture(scope="session")
def server_url() -> Iterator[str]:
    """A PostgreSQL server to create test databases on."""
    url = os.environ.get("BATON_TEST_DATABASE_URL")
    if url:
        yield url
        return
    with tempfile.TemporaryDirectory(prefix="baton-test-pg-", dir="/tmp") as tmp:
        yield start_embedded(Path(tmp))
        stop_embedded(Path(tmp))


@pytest.fixture(scope="session")
async def database_url(server_url: str) -> AsyncIterator[str]:
    async with fresh_database(server_url, "baton_test") as url:
        yield url


@pytest.fixture(scope="session")
async def engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    engine = create_engine(database_url)
    await migrate.upgrade(engine)
    yield engine
    await engine.dispose()


@pytest.fixture(scope="session")
async def db(database_url: str, engine: AsyncEngine) -> AsyncIterator[Database]:
    """The request path's pool on the migrated test database (`engine` migrates it)."""
    # A busy machine can take seconds to open a connection; the tests' own pool waits for one
    # (the server's pools keep their 2 s, which the unavailability tests rely on).
    db = await Database.connect(database_url, acquire_timeout=30)
    yield db
    await db.close()


@pytest.fixture(scope="session")
def service(db: Database) -> TaskService:
    return TaskService(db)


@pytest.fixture
async def hub(db: Database, database_url: str) -> AsyncIterator[EventHub[EventRecord]]:
    """The task log's hub on PostgreSQL's LISTEN/NOTIFY, polling only once a minute: what it
    delivers within a test, it was woken for. (A module may define a `hub` of its own.)"""
    broadcast = Broadcast(backend=PostgresBackend(libpq_url(database_url)))
    await broadcast.connect()
    hub = EventHub(db, broadcast, TASK_LOG, poll_interval=60.0)
    await hub.start()
    yield hub
    await hub.stop()
    await broadcast.disconnect()


@pytest.fixture
def world(service: TaskService) -> World:
    return World(service)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class LiveServer:
    """A real `baton serve` process; `token(principal)` mints a bearer token for it."""

    url: str
    db: Database
    process: subprocess.Popen[bytes]

    @property
    def graphql(self) -> str:
        return f"{self.url}/graphql"

    async def token(self, principal: Principal) -> str:
        return await create_token(self.db, principal)


def start_server(
    env: dict[str, str],
    log: Path,
    *,
    inherit: bool = True,
    args: tuple[str, ...] = (),
    launch: tuple[str, ...] = ("-m", "baton.cli"),
) -> tuple[str, subprocess.Popen[bytes]]:
    """Start `baton serve [args]` and wait for /readyz; `inherit=False` uses `env` alone;
    `launch` is how Python is told to run the CLI (`-c` and code that changes something first)."""
    port = free_port()
    with log.open("wb") as out:  # the child keeps its own copy of the descriptor
        process = subprocess.Popen(
            [sys.executable, *launch, "serve", "--port", str(port), *args],
            env={**(os.environ if inherit else {}), "BATON_LOG_LEVEL": "warning", **env},
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"baton serve exited: {log.read_text()}")
        try:
            with urllib.request.urlopen(f"{url}/readyz", timeout=1) as response:
                if response.status == 200:
                    return url, process
        except OSError:
            time.sleep(0.1)
    process.kill()
    raise RuntimeError(f"baton serve did not become ready: {log.read_text()}")


def stop_server(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGINT)
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@pytest.fixture(scope="session")
def live_server(
    database_url: str, db: Database, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    """`baton serve` on the session's test database, over real HTTP."""
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    url, process = start_server({"BATON_DATABASE_URL": database_url}, log)
    yield LiveServer(url, db, process)
    stop_server(process)


@dataclass
class TunedServer(LiveServer):
    """`baton serve` with short timeouts and a separate, token-protected metrics address."""

    metrics_url: str = ""
    metrics_token: str = ""


TUNED = {
    "BATON_TOKEN_CHECK_SECONDS": "1",
    "BATON_WS_INIT_TIMEOUT": "1.5",
    "BATON_MAX_UNAUTHENTICATED_SOCKETS": "3",
}


@pytest.fixture(scope="session")
def tuned_server(
    database_url: str, db: Database, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[TunedServer]:
    log = tmp_path_factory.mktemp("tuned") / "serve.log"
    metrics_port, metrics_token = free_port(), secrets.token_urlsafe(16)
    env = {
        "BATON_DATABASE_URL": database_url,
        "BATON_METRICS_ADDRESS": f"127.0.0.1:{metrics_port}",
        "BATON_METRICS_TOKEN": metrics_token,
        **TUNED,
    }
    url, process = start_server(env, log)
    yield TunedServer(url, db, process, f"http://127.0.0.1:{metrics_port}", metrics_token)
    stop_server(process)
