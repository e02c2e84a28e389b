"""`baton mcp` when the Baton it is pointed at cannot be used: one line on stderr naming the
setting, exit code 2, and the client's `initialize` answered with that cause as a JSON-RPC
error the official SDK client raises; when that Baton goes away later, one line and exit 1;
when it can be used, it reports Baton's version and keeps httpx's request lines off stderr."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError

from baton.access.principals import Principal, PrincipalKind
from baton.access.tokens import create_token
from baton.store.db import Database
from mcp import Client, StdioServerParameters
from tests.conftest import LiveServer, free_port, start_server, stop_server
from tests.mcp.conftest import INITIALIZE, handed_off, ok

# `baton mcp` waits this long for an `initialize` to answer before it ends (stdio.ANSWER_SECONDS)
ANSWER_SECONDS = 10.0


def _command(url: str, token: str) -> tuple[list[str], dict[str, str]]:
    env = {**os.environ, "BATON_URL": url, "BATON_TOKEN": token, "BATON_LOG_LEVEL": "info"}
    return [sys.executable, "-m", "baton.cli", "mcp"], env


def _run(url: str, token: str, stdin: bytes | None) -> subprocess.CompletedProcess[bytes]:
    """`baton mcp` given `stdin` (None: stdin closed from the start)."""
    command, env = _command(url, token)
    return subprocess.run(
        command,
        input=stdin,
        stdin=subprocess.DEVNULL if stdin is None else None,
        capture_output=True,
        env=env,
        timeout=60,
    )


def _one_line(done: subprocess.CompletedProcess[bytes]) -> str:
    lines = done.stderr.decode().splitlines()
    assert len(lines) == 1, done.stderr.decode()
    return lines[0]


def _answer(done: subprocess.CompletedProcess[bytes]) -> dict[str, Any]:
    lines = done.stdout.decode().splitlines()
    assert len(lines) == 1, done.stdout.decode()
    answer: dict[str, Any] = json.loads(lines[0])
    return answer


@asynccontextmanager
async def _stdio(url: str, token: str, errlog: Path) -> AsyncIterator[Client]:
    command, env = _command(url, token)
    params = StdioServerParameters(command=command[0], args=command[1:], env=env)
    with errlog.open("w") as log:
        async with Client(stdio_client(params, errlog=log), mode="legacy", cache=None) as client:
            yield client


def _unreachable() -> str:
    return f"http://127.0.0.1:{free_port()}"


def test_a_refused_token_is_one_line_exit_2_and_an_initialize_error(
    live_server: LiveServer,
) -> None:
    line = json.dumps({**INITIALIZE, "id": 7}).encode() + b"\n"
    done = _run(live_server.url, "baton_not-a-token", line)
    assert done.returncode == 2
    said = _one_line(done)
    assert said.startswith("baton: BATON_TOKEN: ") and "refused it" in said, said
    answer = _answer(done)
    assert answer["id"] == 7
    assert answer["error"]["message"] == f"baton mcp: {said.removeprefix('baton: ')}"
    assert answer["error"]["data"] == {"code": "unauthenticated", "variable": "BATON_TOKEN"}


def test_an_unreachable_url_is_one_line_exit_2_and_an_initialize_error() -> None:
    url = _unreachable()
    done = _run(url, "baton_whatever", json.dumps(INITIALIZE).encode() + b"\n")
    assert done.returncode == 2
    said = _one_line(done)
    assert said.startswith(f"baton: BATON_URL: cannot reach {url}/mcp"), said
    assert _answer(done)["error"]["data"]["variable"] == "BATON_URL"


def test_a_url_that_is_not_batons_names_the_url(live_server: LiveServer) -> None:
    done = _run(f"{live_server.url}/elsewhere", "baton_whatever", None)
    assert done.returncode == 2
    said = _one_line(done)
    assert said.startswith("baton: BATON_URL: ") and "does not answer as Baton does" in said


def test_a_client_that_sends_nothing_does_not_keep_it_running() -> None:
    command, env = _command(_unreachable(), "baton_whatever")
    started = time.monotonic()
    # stdin stays open and silent: the command still ends, after its bounded wait.
    with subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    ) as process:
        assert process.wait(timeout=ANSWER_SECONDS + 30) == 2
        assert process.stdout is not None and process.stdout.read() == b""
    assert time.monotonic() - started < ANSWER_SECONDS + 30


@pytest.mark.parametrize("refused", ["token", "url"])
async def test_the_sdk_client_raises_the_cause_it_was_answered(
    live_server: LiveServer, refused: str, tmp_path: Path
) -> None:
    url, variable = (
        (live_server.url, "BATON_TOKEN") if refused == "token" else (_unreachable(), "BATON_URL")
    )
    errlog = tmp_path / "stderr"
    with pytest.raises(BaseExceptionGroup) as raised:
        async with _stdio(url, "baton_not-a-token", errlog):
            pass
    assert raised.group_contains(MCPError, match=f"^baton mcp: {variable}: ", depth=None)
    assert errlog.read_text().startswith(f"baton: {variable}: ")
    assert len(errlog.read_text().splitlines()) == 1


async def test_stdio_reports_batons_version_and_no_request_lines(
    live_server: LiveServer, tmp_path: Path
) -> None:
    tag = os.urandom(4).hex()
    token = await live_server.token(Principal(PrincipalKind.AGENT, f"s{tag}/r"))
    errlog = tmp_path / "stderr"
    async with _stdio(live_server.url, token, errlog) as client:
        assert client.server_info is not None
        assert client.server_info.version == version("baton")
        task = await handed_off(client, f"s{tag}/r", f"s{tag}/a")
        ok(await client.call_tool("task", {"id": task["id"]}))
        await client.list_tools()
    logged = errlog.read_text()
    assert "HTTP Request:" not in logged, logged


def _send(process: subprocess.Popen[bytes], message: dict[str, Any]) -> None:
    assert process.stdin is not None
    process.stdin.write(json.dumps(message).encode() + b"\n")
    process.stdin.flush()


def _receive(process: subprocess.Popen[bytes]) -> dict[str, Any]:
    assert process.stdout is not None
    answer: dict[str, Any] = json.loads(process.stdout.readline())
    return answer


def _serve_then_lose(url: str, token: str, server: subprocess.Popen[bytes]) -> list[str]:
    """`baton mcp` initialized and answering, then its server stopped and one more request
    sent, stdin kept open: its stderr once it has ended by itself (exit code 1)."""
    command, env = _command(url, token)
    env["BATON_LOG_LEVEL"] = "warning"
    with subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    ) as process:
        _send(process, INITIALIZE)
        assert "result" in _receive(process)
        _send(process, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        _send(process, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        assert "result" in _receive(process)
        stop_server(server)
        _send(process, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        assert process.wait(60) == 1
        assert process.stderr is not None
        return process.stderr.read().decode().splitlines()


async def test_a_server_that_goes_away_ends_it_with_one_line(
    database_url: str, db: Database, tmp_path: Path
) -> None:
    url, server = start_server({"BATON_DATABASE_URL": database_url}, tmp_path / "serve.log")
    try:
        token = await create_token(db, Principal(PrincipalKind.AGENT, "gone/a"))
        said = await asyncio.to_thread(_serve_then_lose, url, token, server)
    finally:
        stop_server(server)
    assert said == [f"baton: lost the Baton at {url}/mcp: All connection attempts failed"]
