"""WebSocket limits against a real server: the init timeout on both subprotocols, the cap on
sockets not yet initialised (the oldest idle one makes room for a newcomer), the cap on
sockets per token, the cap on sockets per process, and oversized messages (close 1009, memory
given back)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed
from websockets.protocol import State

from baton.settings import Settings
from baton.store.db import Database
from baton.web.graphql_ws import SocketLimits
from tests.conftest import TUNED, LiveServer, TunedServer, start_server, stop_server
from tests.helpers import World
from tests.live.big_events import until
from tests.live.client import PROTOCOLS, SubscriptionError, WSClient

INIT_TIMEOUT = float(TUNED["BATON_WS_INIT_TIMEOUT"])
SLACK = 5.0  # a loaded machine
CAPPED = {
    "BATON_MAX_UNAUTHENTICATED_SOCKETS": "3",
    "BATON_MAX_SOCKETS_PER_TOKEN": "3",
    "BATON_WS_INIT_TIMEOUT": "30",  # idle sockets stay until the test is done with them
}


def serving(
    env: dict[str, str], database_url: str, db: Database, folder: Path
) -> Iterator[LiveServer]:
    url, process = start_server({"BATON_DATABASE_URL": database_url, **env}, folder / "serve.log")
    yield LiveServer(url, db, process)
    stop_server(process)


@pytest.fixture(scope="module")
def capped(
    database_url: str, db: Database, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    yield from serving(CAPPED, database_url, db, tmp_path_factory.mktemp("capped"))


@pytest.fixture(scope="module")
def full(
    database_url: str, db: Database, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    """A server that holds two sockets at most."""
    env = {"BATON_MAX_SOCKETS": "2"}
    yield from serving(env, database_url, db, tmp_path_factory.mktemp("full"))


def ws_url(server: LiveServer) -> str:
    return server.url.replace("http://", "ws://") + "/graphql"


def idle(server: LiveServer, protocol: str = PROTOCOLS[0]) -> connect:
    """A socket that sends nothing (await it, or use it as a context manager)."""
    return connect(ws_url(server), subprotocols=[protocol])  # type: ignore[list-item]


async def close_code(ws: ClientConnection, wait: float = 10) -> int | None:
    """The code the server closes `ws` with, skipping what it sends before (within `wait`)."""
    with pytest.raises(ConnectionClosed):
        async with asyncio.timeout(wait):
            while True:
                await ws.recv()
    return ws.close_code


async def init(ws: ClientConnection, token: str) -> dict[str, object]:
    await ws.send(json.dumps({"type": "connection_init", "payload": {"authorization": token}}))
    answer: dict[str, object] = json.loads(await asyncio.wait_for(ws.recv(), 10))
    return answer


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_socket_that_never_initialises_is_closed_after_the_init_timeout(
    tuned_server: TunedServer, protocol: str
) -> None:
    async with idle(tuned_server, protocol) as ws:
        started = time.monotonic()
        assert await close_code(ws, INIT_TIMEOUT + SLACK) == 4408
    # Not before: a client has the whole timeout to start.
    assert time.monotonic() - started >= INIT_TIMEOUT - 0.1


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_idle_sockets_at_the_cap_make_room_for_one_that_logs_in(
    capped: LiveServer, world: World, protocol: str
) -> None:
    """Sockets that never send `connection_init` fill the cap: the next client still logs in,
    and the oldest idle socket is closed (1013, try again later) instead."""
    waiting: list[ClientConnection] = [await idle(capped, protocol) for _ in range(3)]
    try:
        token = await capped.token(world.roles["requester"])
        newcomer = await WSClient.open(capped.url, token, protocol)  # acknowledged
        assert await close_code(waiting[0]) == 1013
        assert [ws.state for ws in waiting[1:]] == [State.OPEN, State.OPEN]
        await newcomer.close()
    finally:
        for ws in waiting:
            await ws.close()


async def test_idle_sockets_make_room_oldest_first_and_the_rest_may_still_log_in(
    capped: LiveServer, world: World
) -> None:
    """Five idle sockets against a cap of three: the two oldest are closed as the fourth and
    fifth arrive, and the three left may still log in."""
    waiting: list[ClientConnection] = []
    try:
        for _ in range(5):
            waiting.append(await idle(capped))
        assert [await close_code(ws) for ws in waiting[:2]] == [1013, 1013]
        token = await capped.token(world.roles["requester"])
        for ws in waiting[2:]:
            assert (await init(ws, f"Bearer {token}"))["type"] == "connection_ack"
    finally:
        for ws in waiting:
            await ws.close()


async def refused_at_init(server: LiveServer, token: str, protocol: str) -> tuple[list[str], int]:
    """Open a socket with `token`: the messages before the server closed it, and its code."""
    async with idle(server, protocol) as ws:
        await ws.send(
            json.dumps({"type": "connection_init", "payload": {"authorization": f"Bearer {token}"}})
        )
        seen: list[str] = []
        with pytest.raises(ConnectionClosed):
            async with asyncio.timeout(10):
                while True:
                    seen.append(json.loads(await ws.recv())["type"])
        assert ws.close_code is not None
        return seen, ws.close_code


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_one_token_holds_at_most_its_cap_of_sockets(
    capped: LiveServer, world: World, protocol: str
) -> None:
    token = await capped.token(world.roles["requester"])
    held = [await WSClient.open(capped.url, token, protocol) for _ in range(3)]
    try:
        seen, code = await refused_at_init(capped, token, protocol)
        assert code == 1008
        # The legacy protocol says why in a message before closing; the current one does not.
        assert seen == ([] if protocol == PROTOCOLS[0] else ["connection_error"])
        await still_works(held[0])  # the sockets it holds keep working
    finally:
        for ws in held:
            await ws.close()


async def test_the_cap_is_per_token_and_a_closed_socket_frees_its_place(
    capped: LiveServer, world: World
) -> None:
    token = await capped.token(world.roles["requester"])
    held = [await WSClient.open(capped.url, token, PROTOCOLS[0]) for _ in range(3)]
    other = await WSClient.open(
        capped.url, await capped.token(world.roles["assignee"]), PROTOCOLS[0]
    )
    await held.pop().close()
    # Once the server has seen that close, the token may open one again.
    again = await reopen(capped, token)
    for ws in [*held, other, again]:
        await ws.close()


async def test_past_the_process_cap_a_socket_is_told_to_try_again_later(
    full: LiveServer, world: World
) -> None:
    """Two logged-in sockets fill a process capped at two: a third, from another token, is
    closed with 1013 before it can log in, and once one closes a newcomer is let in."""
    held = [
        await WSClient.open(full.url, await full.token(world.roles[role]), PROTOCOLS[0])
        for role in ("requester", "assignee")
    ]
    other = await full.token(world.roles["requester_owner"])
    async with idle(full) as ws:
        assert await close_code(ws) == 1013
        assert "WebSockets are open" in (ws.close_reason or "")
    await still_works(held[0])  # the sockets it holds keep working
    await held.pop().close()
    again = await reopen(full, other)
    for client in [*held, again]:
        await client.close()


async def test_at_the_process_cap_an_idle_socket_makes_room_for_a_newcomer(
    full: LiveServer, world: World
) -> None:
    """A logged-in socket and an idle one fill a process capped at two: a newcomer closes the
    idle one (1013) and may log in."""
    held = await WSClient.open(full.url, await full.token(world.roles["requester"]), PROTOCOLS[0])
    waiting = await idle(full)
    newcomer = await idle(full)
    try:
        assert await close_code(waiting) == 1013
        token = await full.token(world.roles["assignee"])
        assert (await init(newcomer, f"Bearer {token}"))["type"] == "connection_ack"
        await still_works(held)
    finally:
        for ws in (waiting, newcomer):
            await ws.close()
        await held.close()


async def still_works(client: WSClient) -> None:
    """An operation on `client` runs: a subscription to an unknown task is refused as such."""
    await client.subscribe("subscription($id: ID!) { taskUpdated(id: $id) { state } }", {"id": "x"})
    with pytest.raises(SubscriptionError, match="not_found"):
        await client.next()


async def reopen(server: LiveServer, token: str) -> WSClient:
    """A socket opened with `token` once the server has seen an earlier one close (until then
    it still counts against the cap it freed)."""
    deadline = time.monotonic() + SLACK
    while True:
        try:
            return await WSClient.open(server.url, token, PROTOCOLS[0])
        except (ConnectionClosed, SubscriptionError):
            assert time.monotonic() < deadline, "the closed socket still counts"
            await asyncio.sleep(0.05)


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
    # The server gives the memory back once it has let go of the frames.
    await until(lambda: rss_kib(pid) - before < 16 * 1024, SLACK, "memory given back")


def test_the_socket_defaults_are_the_documented_settings_defaults() -> None:
    """The README's tables show `Settings`' defaults; a server built without settings (tests,
    embedding) must behave the same."""
    s, limits = Settings(), SocketLimits()
    assert (
        limits.init_timeout,
        limits.max_unauthenticated,
        limits.token_check,
        limits.max_queued_bytes,
        limits.send_timeout,
        limits.max_per_token,
        limits.max_sockets,
    ) == (
        s.ws_init_timeout,
        s.max_unauthenticated_sockets,
        s.token_check_seconds,
        s.ws_max_queued_bytes,
        s.ws_send_timeout,
        s.max_sockets_per_token,
        s.max_sockets,
    )
