"""`baton serve` as a process: it starts or refuses at once, stops on SIGTERM and SIGINT with its
embedded PostgreSQL, and answers `unavailable` (never 500) while its database is unreachable.

No test here measures how long anything takes: a stop is held to the documented deadline (see
tests/e2e/processes.py), and waits are for what the process says or does.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from baton.access.principals import ADMIN
from tests.conftest import free_port, start_server
from tests.e2e.processes import (
    baton,
    gone,
    no_postgres_in,
    postgres_in,
    stop,
    wait_for_line,
)
from tests.helpers import mint
from tests.proxy import DatabaseProxy


def test_an_address_in_use_ends_serve_at_once_with_one_line() -> None:
    """Before anything slow starts: the database named here cannot be reached, so reaching
    for it first would end the command with exit code 2 and another message."""
    unreachable = f"postgresql://postgres@127.0.0.1:{free_port()}/nowhere"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = {**os.environ, "BATON_DATABASE_URL": unreachable}
        for args, extra in (
            (["--port", str(port)], {}),
            (["--port", str(free_port())], {"BATON_METRICS_ADDRESS": f"127.0.0.1:{port}"}),
        ):
            done = baton("serve", *args, env={**env, **extra}, timeout=60)
            assert done.returncode == 1, done.stderr
            assert done.stderr.strip().count("\n") == 0, done.stderr
            assert f"cannot listen on 127.0.0.1:{port}" in done.stderr
            assert "in use" in done.stderr


# --- the embedded PostgreSQL stops with the server -------------------------------------------


@pytest.fixture(scope="module")
def embedded_env() -> Iterator[dict[str, str]]:
    with tempfile.TemporaryDirectory(prefix="baton-stop-", dir="/tmp") as tmp:
        env = {k: v for k, v in os.environ.items() if k != "BATON_DATABASE_URL"}
        env["BATON_DATA_DIR"] = str(Path(tmp) / "data")
        yield env


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stop_signal_ends_the_server_and_its_embedded_postgresql(
    embedded_env: dict[str, str], tmp_path: Path, sig: signal.Signals
) -> None:
    _, process = start_server(embedded_env, tmp_path / "serve.log", inherit=False)
    data_dir = Path(embedded_env["BATON_DATA_DIR"])
    postmaster = int((data_dir / "pgdata" / "postmaster.pid").read_text().split()[0])
    assert postmaster in postgres_in(data_dir)

    code = stop(process, sig)

    assert code == 0, (tmp_path / "serve.log").read_text()  # 1 would be the deadline's exit
    assert gone(postmaster), "the embedded PostgreSQL is still running"
    assert no_postgres_in(data_dir)


def postmaster_started(data_dir: Path) -> bool:
    return (data_dir / "pgdata" / "postmaster.pid").exists()


@pytest.mark.parametrize(
    "stage",
    ["before PostgreSQL starts", "once PostgreSQL is starting"],
    ids=["database-named", "postmaster-started"],
)
def test_a_stop_during_startup_ends_it_and_leaves_no_postgresql(
    embedded_env: dict[str, str], tmp_path: Path, stage: str
) -> None:
    # A fresh data directory, not under pytest's private (0700) temporary root: the embedded
    # server runs as another system user that must reach it.
    data_dir = Path(embedded_env["BATON_DATA_DIR"]).parent / f"startup-{secrets.token_hex(4)}"
    env = {**embedded_env, "BATON_DATA_DIR": str(data_dir)}
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "baton.cli", "serve", "--port", str(free_port())],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    # The line comes before the embedded PostgreSQL is started; its pid file once it runs.
    wait_for_line(log, "baton: database:", process)
    if stage == "once PostgreSQL is starting":
        # Its pid file, and a process the oracle below can see (so it would see one left).
        deadline = time.monotonic() + 60
        while not (postmaster_started(data_dir) and postgres_in(data_dir)):
            assert process.poll() is None, log.read_text()
            assert time.monotonic() < deadline, f"no PostgreSQL started: {log.read_text()}"
            time.sleep(0.02)

    code = stop(process, signal.SIGTERM)

    assert code == 0, log.read_text()
    assert no_postgres_in(data_dir), f"left running: {postgres_in(data_dir)}"


# --- an unreachable database ------------------------------------------------------------------


@pytest.fixture
def proxied(
    server_url: str, database_url: str, tmp_path: Path
) -> Iterator[tuple[DatabaseProxy, str, subprocess.Popen[bytes]]]:
    """`baton serve` on the test database through a proxy the test can cut: one per test, as
    a test may stop it."""
    log = tmp_path / "serve.log"
    database = urlsplit(database_url).path.lstrip("/")
    with DatabaseProxy(server_url) as proxy:
        url, process = start_server({"BATON_DATABASE_URL": proxy.url(database)}, log)
        yield proxy, url, process
        if process.poll() is None:
            process.kill()
            process.wait()


async def test_an_unreachable_database_answers_503_and_closes_sockets_with_1013(
    proxied: tuple[DatabaseProxy, str, subprocess.Popen[bytes]], database_url: str
) -> None:
    proxy, url, _ = proxied
    known, unknown = await mint(database_url, ADMIN), await mint(database_url, ADMIN)
    query = {"query": "{ tasks(first: 1) { totalCount } }"}
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        ok = await client.post("/graphql", json=query, headers={"Authorization": f"Bearer {known}"})
        assert ok.status_code == 200, ok.text
        proxy.cut()
        try:
            for token in (known, unknown):  # cached, and never seen
                answer = await client.post(
                    "/graphql", json=query, headers={"Authorization": f"Bearer {token}"}
                )
                assert answer.status_code == 503, answer.text
                assert answer.headers["content-type"].startswith("application/json")
                assert int(answer.headers["retry-after"]) > 0
                codes = [e["extensions"]["code"] for e in answer.json()["errors"]]
                assert codes == ["unavailable"], answer.text
            ws_url = url.replace("http://", "ws://") + "/graphql"
            for protocol in ("graphql-transport-ws", "graphql-ws"):
                async with connect(ws_url, subprotocols=[protocol]) as ws:  # type: ignore[list-item]
                    init = {
                        "type": "connection_init",
                        "payload": {"authorization": f"Bearer {unknown}"},
                    }
                    await ws.send(json.dumps(init))
                    with pytest.raises(ConnectionClosed):
                        while True:
                            await ws.recv()
                assert ws.close_code == 1013, (protocol, ws.close_code)
        finally:
            proxy.restore()
        again = await client.post(
            "/graphql", json=query, headers={"Authorization": f"Bearer {unknown}"}
        )
        assert again.status_code == 200, again.text


def test_a_stop_while_the_listener_reconnects_ends_promptly(
    proxied: tuple[DatabaseProxy, str, subprocess.Popen[bytes]], tmp_path: Path
) -> None:
    proxy, _, process = proxied
    proxy.cut()  # the LISTEN connection drops; the listener retries with backoff
    wait_for_line(tmp_path / "serve.log", "lost the PostgreSQL LISTEN connection", process)
    assert stop(process, signal.SIGTERM) == 0  # not left to the stop deadline (exit code 1)
