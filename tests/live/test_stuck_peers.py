"""A WebSocket peer that stops reading holds up nothing else and holds little, against a real
`baton serve`: what waits to be sent to one socket is capped, a socket whose peer takes
nothing for a while is closed, and a close never waits on the peer (past a deadline the TCP
connection is cut).

The stuck peers here are plain sockets with a 4 KB receive buffer that read their
`connection_ack` and then never read again, while the server replays big events to them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from bench.slow_sockets import REPLAY, StuckPeer
from websockets.exceptions import ConnectionClosed

from baton.access.tokens import create_token
from baton.store.db import Database
from baton.web.graphql_ws import SocketLimits
from tests.conftest import LiveServer, start_server, stop_server
from tests.helpers import World
from tests.live.big_events import big_tasks, revoke, until
from tests.live.client import PROTOCOLS, TASK_EVENTS, WSClient

CHECK = 1.0  # BATON_TOKEN_CHECK_SECONDS of the servers under test
CAP = 256 * 1024  # their BATON_WS_MAX_QUEUED_BYTES
SEND_TIMEOUT = 2.0  # the impatient server's BATON_WS_SEND_TIMEOUT
CLOSE_SECONDS = SocketLimits().close_timeout  # a close waits this long, then cuts
SLACK = 5.0  # a loaded machine


def serve(
    database_url: str, db: Database, tmp: pytest.TempPathFactory, **env: str
) -> Iterator[LiveServer]:
    log = tmp.mktemp("stuck") / "serve.log"
    url, process = start_server(
        {"BATON_DATABASE_URL": database_url, "BATON_TOKEN_CHECK_SECONDS": str(CHECK), **env}, log
    )
    yield LiveServer(url, db, process)
    stop_server(process)


@pytest.fixture(scope="module")
def server(
    database_url: str, db: Database, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    """Stuck sockets stay until they are over the cap (or revoked): no send timeout."""
    env = {"BATON_WS_MAX_QUEUED_BYTES": str(CAP), "BATON_WS_SEND_TIMEOUT": "600"}
    yield from serve(database_url, db, tmp_path_factory, **env)


@pytest.fixture(scope="module")
def impatient(
    database_url: str, db: Database, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    env = {"BATON_WS_SEND_TIMEOUT": str(SEND_TIMEOUT)}
    yield from serve(database_url, db, tmp_path_factory, **env)


async def closed_within(ws: WSClient, seconds: float) -> int | None:
    with pytest.raises(ConnectionClosed):
        async with asyncio.timeout(seconds):
            while True:
                await ws.ws.recv()
    return ws.ws.close_code


def replaying(server: LiveServer, token: str, protocol: str, project: str, n: int) -> StuckPeer:
    """A stuck peer with `n` subscriptions replaying `project`'s events with their packets."""
    peer = StuckPeer(server.url, protocol)
    peer.init(token)
    kind = "subscribe" if protocol == PROTOCOLS[0] else "start"
    for op in range(n):
        peer.subscribe(str(op), REPLAY, {"filter": {"projects": [project]}, "after": "0"}, kind)
    return peer


async def blocked(peer: StuckPeer) -> None:
    """Until the server has filled the kernel's buffers towards `peer`: from then on what it
    sends waits in the server."""
    await until(lambda: peer.unsent() > 16_384, 20, "the server is blocked on the peer")


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_peer_that_stops_reading_holds_up_no_other_revocation(
    server: LiveServer, world: World, protocol: str
) -> None:
    """Its token and another are revoked together, the stuck one met first: the other socket
    is closed (4403) within the documented bound, and the stuck one's TCP connection is gone
    within that bound plus the close deadline."""
    await big_tasks(world, 100)  # 200 events of about 40 KB: far more than the buffers hold
    stuck_token = await create_token(server.db, world.roles["requester"])
    stuck = replaying(server, stuck_token, protocol, world.project, 1)  # under the cap
    try:
        await blocked(stuck)
        other_token = await create_token(server.db, world.roles["assignee"])
        other = await WSClient.open(server.url, other_token, protocol)
        await other.subscribe(TASK_EVENTS, {"filter": {"projects": [world.project]}})
        await revoke(server, stuck_token)  # first: the sweep meets the stuck socket first
        await revoke(server, other_token)
        assert await closed_within(other, CHECK + SLACK) == 4403
        await until(stuck.connection_gone, CHECK + CLOSE_SECONDS + SLACK, "stuck one cut")
    finally:
        stuck.close()


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_socket_over_its_output_cap_is_closed_and_its_connection_cut(
    server: LiveServer, world: World, protocol: str
) -> None:
    """Ten replays of events of about 40 KB each on a peer that reads nothing: more than the
    cap (256 KiB here) waits for it, so the socket is closed and, as the peer cannot even
    take the close frame, its connection cut after the close deadline."""
    await big_tasks(world, 30)
    token = await create_token(server.db, world.roles["requester"])
    stuck = replaying(server, token, protocol, world.project, 10)
    try:
        await until(stuck.connection_gone, CLOSE_SECONDS + SLACK, "over the cap, cut")
        # The token is fine: the same replays on a socket that reads get everything. One at a
        # time: ten at once put ten 40 KB events in flight, and a reader slowed by a loaded
        # machine could then be over this server's small cap too.
        reader = await WSClient.open(server.url, token, protocol)
        for _ in range(10):
            await reader.subscribe(REPLAY, {"filter": {"projects": [world.project]}, "after": "0"})
            assert len(await reader.collect(60, wait=30)) == 60
        await reader.close()
    finally:
        stuck.close()


async def test_a_peer_that_takes_nothing_for_the_send_timeout_is_closed(
    impatient: LiveServer, world: World
) -> None:
    """One replay keeps what waits for the peer under the cap; taking nothing of it for
    BATON_WS_SEND_TIMEOUT (2 s here) closes the socket, and its connection is cut."""
    await big_tasks(world, 100)
    token = await create_token(impatient.db, world.roles["requester"])
    stuck = replaying(impatient, token, PROTOCOLS[0], world.project, 1)
    try:
        await blocked(stuck)
        bound = SEND_TIMEOUT + 1 + CLOSE_SECONDS + SLACK  # checked every second at most
        await until(stuck.connection_gone, bound, "the stalled socket cut")
    finally:
        stuck.close()


async def test_a_socket_whose_peer_reads_stays_open_past_the_send_timeout(
    impatient: LiveServer, world: World
) -> None:
    """The same replay to a peer that reads: it takes longer than the send timeout in all,
    and nothing is closed, as the peer keeps taking what is sent."""
    await big_tasks(world, 100)
    ws = await WSClient.open(
        impatient.url, await impatient.token(world.roles["requester"]), PROTOCOLS[0]
    )
    try:
        await ws.subscribe(REPLAY, {"filter": {"projects": [world.project]}, "after": "0"})
        got = 0
        while got < 200:  # a slow reader: a pause after every ten events
            got += len(await ws.collect(10))
            await asyncio.sleep(0.15)
        assert got == 200  # about 3 s of reading, over the 2 s send timeout
        await ws.subscribe(TASK_EVENTS, {"filter": {"projects": [world.project]}})
        await world.hand_off()
        assert len(await ws.collect(2)) == 2  # still open and live
    finally:
        await ws.close()
