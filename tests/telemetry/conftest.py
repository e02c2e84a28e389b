"""One `baton serve` that logs JSON lines (with an access line per request, at debug level)
and exports its traces to a real OTLP/HTTP receiver in the test process; its own database,
so that it delivers only its own webhooks (to a receiver in the test's event loop)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.routing import Route

from baton.store.db import Database
from tests.conftest import LiveServer, start_server, stop_server
from tests.helpers import uvicorn_serving
from tests.telemetry.otlp import Collector, collecting
from tests.webhooks.conftest import FAST, Receiver, own_database


@dataclass
class Observed(LiveServer):
    """The server, where its log goes, and what its traces reached."""

    log: Path = Path()
    collector: Collector | None = None

    @property
    def spans(self) -> Collector:
        assert self.collector is not None
        return self.collector


@pytest.fixture(scope="session")
def otlp() -> Iterator[Collector]:
    with collecting() as collector:
        yield collector


@pytest.fixture(scope="session")
async def observed_database(server_url: str) -> AsyncIterator[tuple[str, Database]]:
    async with own_database(server_url) as found:
        yield found


@pytest.fixture(scope="session")
def observed(
    observed_database: tuple[str, Database],
    otlp: Collector,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Observed]:
    url, db = observed_database
    log = tmp_path_factory.mktemp("observed") / "serve.log"
    env = {
        "BATON_DATABASE_URL": url,
        **FAST,
        "BATON_LOG_FORMAT": "json",
        "BATON_LOG_LEVEL": "debug",
        # An endpoint alone turns traces on (OTEL_TRACES_EXPORTER unset: otlp).
        "OTEL_EXPORTER_OTLP_ENDPOINT": otlp.url,
        "OTEL_BSP_SCHEDULE_DELAY": "50",
    }
    address, process = start_server(env, log, args=("--access-log",))
    yield Observed(address, db, process, log, otlp)
    stop_server(process)


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    receiver = Receiver()
    app = Starlette(routes=[Route("/{path:path}", receiver.handle, methods=["POST"])])
    async with uvicorn_serving(app, timeout_graceful_shutdown=1) as port:
        receiver.url = f"http://127.0.0.1:{port}"
        yield receiver
