"""`baton serve --workers N`: N processes on one address that share every live guarantee, replace
a worker that dies, and all stop with the parent, even when it is killed."""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import secrets
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from baton.access.principals import ADMIN
from baton.workers import supervise
from tests.conftest import start_server
from tests.e2e.processes import baton, gone, stop
from tests.helpers import PACKET_INPUT, mint
from tests.live.client import TASK_EVENTS, TRANSPORT_WS, WSClient
from tests.proxy import DatabaseProxy

HAND_OFF = """
mutation($input: HandOffInput!) {
  handOff(input: $input) { __typename ... on HandOffSuccess { events { id } } }
}
"""


def workers_of(parent: int) -> set[int]:
    path = Path(f"/proc/{parent}/task/{parent}/children")
    return {int(pid) for pid in path.read_text().split()}


def wait_for_workers(parent: int, count: int, within: float = 30) -> set[int]:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        pids = workers_of(parent)
        if len(pids) == count:
            return pids
        time.sleep(0.1)
    pytest.fail(f"{count} workers expected, found {workers_of(parent)}")


def serving_pid(local_port: int, pids: set[int], within: float = 5) -> int:
    """Which worker holds the server side of the connection whose client port is given."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        # The server side's inode: the entry whose remote port is our local port.
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                if int(fields[2].rsplit(":", 1)[1], 16) != local_port:
                    continue
                target = f"socket:[{fields[9]}]"
                for pid in pids:
                    for fd in Path(f"/proc/{pid}/fd").iterdir():
                        try:
                            if os.readlink(fd) == target:
                                return pid
                        except OSError:
                            continue
        time.sleep(0.05)
    raise AssertionError(f"no worker holds the connection from port {local_port}")


def post(
    url: str, pids: set[int], token: str, query: str, **variables: Any
) -> tuple[dict[str, Any], int]:
    """One request on a fresh connection: the answer, and the worker that served it."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=30)
    try:
        conn.connect()
        assert conn.sock is not None
        port: int = conn.sock.getsockname()[1]
        body = json.dumps({"query": query, "variables": variables})
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        conn.request("POST", "/graphql", body, headers)
        answer = json.loads(conn.getresponse().read())
        return answer, serving_pid(port, pids)  # while the (kept-alive) connection is open
    finally:
        conn.close()


@pytest.fixture(scope="module")
def two_workers(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    log = tmp_path_factory.mktemp("workers") / "serve.log"
    url, process = start_server({"BATON_DATABASE_URL": database_url}, log, args=("--workers", "2"))
    wait_for_workers(process.pid, 2)
    yield url, process
    if process.poll() is None:
        stop(process, signal.SIGTERM)


async def test_an_event_committed_through_one_worker_reaches_a_subscriber_on_the_other(
    two_workers: Any, database_url: str
) -> None:
    url, process = two_workers
    pids = workers_of(process.pid)
    token = await mint(database_url, ADMIN)
    tag = secrets.token_hex(3)
    ws = await WSClient.open(url, token, TRANSPORT_WS)
    try:
        listener = serving_pid(ws.ws.local_address[1], pids)
        await ws.subscribe(TASK_EVENTS, {"filter": {"projects": [f"w{tag}"]}})
        # Fresh connections until one lands on the other worker (which, on a busy machine, may
        # still be starting: the kernel hands every connection to the one accepting); every
        # event of every hand-off reaches the subscriber, in commit order.
        written: list[str] = []
        through: set[int] = set()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            answer, worker = post(
                url,
                pids,
                token,
                HAND_OFF,
                input={
                    "project": f"w{tag}",
                    "requester": f"o{tag}/r",
                    "assignee": f"o{tag}/a",
                    "packet": PACKET_INPUT,
                },
            )
            assert answer["data"]["handOff"]["__typename"] == "HandOffSuccess", answer
            written += [event["id"] for event in answer["data"]["handOff"]["events"]]
            through.add(worker)
            if through - {listener}:
                break
            await asyncio.sleep(0.2)
        assert through - {listener}, f"every connection landed on worker {listener}"
        events = await ws.collect(len(written))
        assert [e["taskEvents"]["id"] for e in events] == written
    finally:
        await ws.close()


def test_a_killed_worker_is_replaced_and_the_address_keeps_answering(two_workers: Any) -> None:
    url, process = two_workers
    before = workers_of(process.pid)
    victim = min(before)
    os.kill(victim, signal.SIGKILL)
    assert gone(victim)
    after = wait_for_workers(process.pid, 2)
    assert victim not in after and len(after & before) == 1
    for _ in range(10):  # whichever worker accepts, it answers
        conn = http.client.HTTPConnection(urlsplit(url).hostname or "", urlsplit(url).port)
        conn.request("GET", "/healthz")
        assert conn.getresponse().status == 200
        conn.close()


def test_sigterm_stops_the_parent_and_every_worker(database_url: str, tmp_path: Path) -> None:
    _, process = start_server(
        {"BATON_DATABASE_URL": database_url}, tmp_path / "serve.log", args=("--workers", "3")
    )
    pids = wait_for_workers(process.pid, 3)
    assert stop(process, signal.SIGTERM) == 0  # within the stop deadline (else exit code 1)
    assert all(gone(pid) for pid in pids)


def test_workers_stop_when_the_parent_is_killed(database_url: str, tmp_path: Path) -> None:
    _, process = start_server(
        {"BATON_DATABASE_URL": database_url}, tmp_path / "serve.log", args=("--workers", "2")
    )
    pids = wait_for_workers(process.pid, 2)
    process.kill()
    process.wait()
    assert all(gone(pid) for pid in pids)


def test_zero_workers_is_refused_in_one_line(database_url: str) -> None:
    done = baton("serve", "--workers", "0", env={**os.environ, "BATON_DATABASE_URL": database_url})
    assert done.returncode == 2
    assert done.stderr == "baton: --workers: must be at least 1\n"


def test_workers_that_never_start_end_the_command(capfd: pytest.CaptureFixture[str]) -> None:
    def broken() -> None:
        sys.exit(3)  # what uvicorn does when an app's startup fails

    assert supervise(2, broken, lambda: None, max_pause=0.01) == 1
    last = capfd.readouterr().err.splitlines()[-1]
    assert last.startswith("baton: workers keep ending at start (last: pid ")
    assert last.endswith(", exited with code 3); see the log above")


def test_a_worker_that_cannot_start_while_the_database_is_away_is_retried_until_it_can(
    database_url: str, server_url: str, tmp_path: Path
) -> None:
    database = urlsplit(database_url).path.lstrip("/")
    with DatabaseProxy(server_url) as proxy:
        url, process = start_server(
            {"BATON_DATABASE_URL": proxy.url(database)},
            tmp_path / "serve.log",
            args=("--workers", "2"),
        )
        try:
            first = wait_for_workers(process.pid, 2)
            assert_all_ready(url, first)
            proxy.cut()
            victim, survivor = sorted(first)
            os.kill(victim, signal.SIGKILL)
            # The victim is replaced, and that replacement fails at start (the database is
            # away) and is replaced in turn: the command must not give up meanwhile.
            log = tmp_path / "serve.log"
            deadline = time.monotonic() + 60
            while log.read_text().count("starting another") < 2:
                assert process.poll() is None, log.read_text()
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.1)
            assert f"worker {victim} was killed by signal 9" in log.read_text()
            assert process.poll() is None, log.read_text()
            assert survivor in workers_of(process.pid)  # the outage alone ends no worker
            proxy.restore()
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                if len(workers_of(process.pid)) == 2 and ready(url):
                    break
                time.sleep(0.2)
            assert len(workers_of(process.pid)) == 2 and ready(url)
        finally:
            stop(process, signal.SIGTERM)


def assert_all_ready(url: str, pids: set[int]) -> None:
    """Each worker has answered /readyz with 200 (fresh connections until all have)."""
    parts = urlsplit(url)
    answered: set[int] = set()
    deadline = time.monotonic() + 30
    while answered != pids and time.monotonic() < deadline:
        conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=5)
        try:
            conn.request("GET", "/readyz")
            response = conn.getresponse()
            response.read()
            assert response.status == 200
            assert conn.sock is not None
            answered.add(serving_pid(conn.sock.getsockname()[1], pids))
        finally:
            conn.close()
    assert answered == pids


def ready(url: str) -> bool:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=5)
    try:
        conn.request("GET", "/readyz")
        return conn.getresponse().status == 200
    except OSError:
        return False
    finally:
        conn.close()
