"""`baton serve` as a process: it starts or refuses at once, stops on SIGTERM and SIGINT with its
embedded PostgreSQL, and answers `unavailable` (never 500) while its database is unreachable."""

from __future__ import annotations

import json
import os
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
from tests.helpers import mint
from tests.proxy import DatabaseProxy

STOP_SECONDS = 10  # what a stop may take, here and on a loaded machine


def baton(*args: str, env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "baton.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def stop(process: subprocess.Popen[bytes], sig: signal.Signals) -> tuple[int, float]:
    """Send `sig`; the exit code and how long the process took to exit."""
    started = time.monotonic()
    process.send_signal(sig)
    try:
        code = process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        pytest.fail(f"baton serve ignored {sig.name} for 30 s")
    return code, time.monotonic() - started


def gone(pid: int, within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


def test_an_address_in_use_ends_serve_at_once_with_one_line(database_url: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = {**os.environ, "BATON_DATABASE_URL": database_url}
        for args, extra in (
            (["--port", str(port)], {}),
            (["--port", str(free_port())], {"BATON_METRICS_ADDRESS": f"127.0.0.1:{port}"}),
        ):
            started = time.monotonic()
            done = baton("serve", *args, env={**env, **extra}, timeout=60)
            assert done.returncode == 1, done.stderr
            assert done.stderr.strip().count("\n") == 0, done.stderr
            assert f"cannot listen on 127.0.0.1:{port}" in done.stderr
            assert "in use" in done.stderr
            assert time.monotonic() - started < 20  # no database, no migrations, no hang


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
    pid_file = Path(embedded_env["BATON_DATA_DIR"]) / "pgdata" / "postmaster.pid"
    postmaster = int(pid_file.read_text().split()[0])

    code, took = stop(process, sig)

    assert code == 0, (tmp_path / "serve.log").read_text()
    assert took < STOP_SECONDS, took
    assert gone(postmaster, within=STOP_SECONDS), "the embedded PostgreSQL is still running"


def test_a_stop_during_startup_ends_it_and_leaves_no_postgresql(
    embedded_env: dict[str, str], tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    env = {**embedded_env, "BATON_DATA_DIR": str(data_dir)}
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "baton.cli", "serve", "--port", str(free_port())],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + 60
    while "baton: database:" not in log.read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)  # starting PostgreSQL, migrating, or starting the app

    code, took = stop(process, signal.SIGTERM)

    assert took < 25, took  # the stop deadline, with room for a loaded machine
    assert code in (0, 1), log.read_text()
    pid_file = data_dir / "pgdata" / "postmaster.pid"
    if pid_file.exists():
        assert gone(int(pid_file.read_text().split()[0]), within=STOP_SECONDS)


# --- an unreachable database ------------------------------------------------------------------


@pytest.fixture(scope="module")
def proxied(
    server_url: str, database_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[DatabaseProxy, str, subprocess.Popen[bytes]]]:
    """`baton serve` on the test database through a proxy the tests can cut."""
    log = tmp_path_factory.mktemp("proxied") / "serve.log"
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
    proxied: tuple[DatabaseProxy, str, subprocess.Popen[bytes]],
) -> None:
    proxy, _, process = proxied
    proxy.cut()  # the LISTEN connection drops; the listener retries with backoff
    time.sleep(1.5)
    code, took = stop(process, signal.SIGTERM)
    assert code == 0
    assert took < STOP_SECONDS, took
