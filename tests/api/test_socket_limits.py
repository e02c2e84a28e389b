"""WebSocket limits against a real server: the init timeout on both subprotocols, the cap on
sockets not yet acknowledged, and oversized messages (close 1009, memory given back)."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from baton.settings import Settings
from tests.conftest import TUNED, TunedServer
from tests.live.client import PROTOCOLS

INIT_TIMEOUT = float(TUNED["BATON_WS_INIT_TIMEOUT"])
MAX_UNAUTHENTICATED = int(TUNED["BATON_MAX_UNAUTHENTICATED_SOCKETS"])


def ws_url(server: TunedServer) -> str:
    return server.url.replace("http://", "ws://") + "/graphql"


async def close_code(ws: ClientConnection, wait: float = 10) -> int | None:
    with pytest.raises(ConnectionClosed):
        while True:
            await asyncio.wait_for(ws.recv(), wait)
    return ws.close_code


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_socket_that_never_initialises_is_closed_after_the_init_timeout(
    tuned_server: TunedServer, protocol: str
) -> None:
    async with connect(ws_url(tuned_server), subprotocols=[protocol]) as ws:  # type: ignore[list-item]
        started = time.monotonic()
        assert await close_code(ws) == 4408
        took = time.monotonic() - started
    assert INIT_TIMEOUT - 0.2 <= took <= INIT_TIMEOUT + 3, took


async def test_sockets_waiting_to_initialise_are_capped_per_process(
    tuned_server: TunedServer,
) -> None:
    waiting = [
        await connect(ws_url(tuned_server), subprotocols=["graphql-transport-ws"])  # type: ignore[list-item]
        for _ in range(MAX_UNAUTHENTICATED)
    ]
    try:
        async with connect(ws_url(tuned_server), subprotocols=["graphql-transport-ws"]) as extra:  # type: ignore[list-item]
            assert await close_code(extra) == 1013
    finally:
        for ws in waiting:
            await ws.close()


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_message_over_the_body_limit_closes_with_1009_and_memory_comes_back(
    tuned_server: TunedServer, protocol: str
) -> None:
    limit = Settings.max_body_bytes
    pid = tuned_server.process.pid
    before = rss_kib(pid)
    for _ in range(8):
        async with connect(
            ws_url(tuned_server),
            subprotocols=[protocol],  # type: ignore[list-item]
            max_size=None,
            write_limit=16 * limit,
        ) as ws:
            # Unauthenticated: the frame is refused before any token is looked at.
            padding = "x" * (4 * limit)
            await ws.send(json.dumps({"type": "connection_init", "payload": {"pad": padding}}))
            assert await close_code(ws) == 1009
    await asyncio.sleep(0.5)
    grown = rss_kib(pid) - before
    assert grown < 16 * 1024, f"the server grew by {grown} KiB after refusing 8 x 4 MiB"
