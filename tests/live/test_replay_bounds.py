"""What the server holds for one subscriber is bounded in bytes, and the bounded reads still
deliver every event once, in order, against a real `baton serve`.

Events here are near the schema's largest (about 40 KB each), so a replay is read in many
small chunks and a stalled live subscriber overflows its queue by bytes, not by count.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from bench.slow_sockets import StuckPeer

from baton.access.tokens import create_token
from baton.store.db import Database
from tests.conftest import LiveServer, start_server, stop_server
from tests.helpers import World
from tests.live.big_events import big_tasks, rss_mib, until
from tests.live.client import PROTOCOLS, WSClient

# A frame of about 4 KB per event: more than the kernel's buffers hold, under the socket cap.
CONTEXTS = """
subscription($filter: TaskEventFilter, $after: ID) {
  taskEvents(filter: $filter, after: $after) { id task { packet { context } } }
}
"""
IDS = """
subscription($filter: TaskEventFilter, $after: ID) {
  taskEvents(filter: $filter, after: $after) { id }
}
"""


@pytest.fixture(scope="module")
def server(
    database_url: str, db: Database, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    log = tmp_path_factory.mktemp("replay") / "serve.log"
    # Peers that stop reading stay open for the whole test (they would be closed after 30 s).
    env = {"BATON_DATABASE_URL": database_url, "BATON_WS_SEND_TIMEOUT": "600"}
    url, process = start_server(env, log)
    yield LiveServer(url, db, process)
    stop_server(process)


async def event_ids(db: Database, project: str) -> list[str]:
    rows = await db.fetch(
        "SELECT e.id FROM task_events e JOIN tasks t ON t.id = e.task_id "
        "WHERE t.project = $1 ORDER BY e.id",
        project,
    )
    return [str(r["id"]) for r in rows]


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_replay_read_in_small_chunks_delivers_every_event_once_in_order(
    server: LiveServer, world: World, protocol: str
) -> None:
    await big_tasks(world, 60)
    expected = await event_ids(server.db, world.project)
    assert len(expected) == 120
    ws = await WSClient.open(server.url, await server.token(world.roles["requester"]), protocol)
    try:
        variables = {"filter": {"projects": [world.project]}, "after": "0"}
        await ws.subscribe(IDS, variables)
        replayed = [e["taskEvents"]["id"] for e in await ws.collect(120)]
        assert replayed == expected
        # Then live, with no gap and no duplicate.
        task_id = (await world.hand_off()).id
        live = [e["taskEvents"]["id"] for e in await ws.collect(2)]
        assert live == (await event_ids(server.db, world.project))[120:]
        assert task_id  # handed off after the replay ended
    finally:
        await ws.close()


async def test_a_live_subscriber_that_falls_behind_by_megabytes_still_gets_every_event(
    server: LiveServer, world: World
) -> None:
    """It stops reading while about 6 MB of events commit (more than its queue may hold):
    the server drops its queue and re-reads the log when it reads again."""
    ws = await WSClient.open(server.url, await server.token(world.roles["requester"]), PROTOCOLS[0])
    try:
        await ws.subscribe(CONTEXTS, {"filter": {"projects": [world.project]}})
        first = (await world.hand_off()).id  # proves the subscription is listening
        assert [e["taskEvents"]["id"] for e in await ws.collect(2)] == await event_ids(
            server.db, world.project
        )
        await big_tasks(world, 80)  # not read while they commit
        expected = (await event_ids(server.db, world.project))[2:]
        received = [e["taskEvents"]["id"] for e in await ws.collect(len(expected), wait=60)]
        assert received == expected
        assert first
    finally:
        await ws.close()


async def test_peers_that_stop_reading_during_replays_pin_little_memory(
    server: LiveServer, world: World
) -> None:
    """Forty replays of 200 events of about 40 KB on one socket whose peer reads nothing.
    Read whole, each replay held its batch of 200 events (hundreds of MB in all); read in
    chunks of about 256 KiB, the forty hold a few tens of MB at most (measured: 187 MiB
    read whole, 25 MiB in chunks)."""
    await big_tasks(world, 100)
    token = await create_token(server.db, world.roles["requester"])
    before = rss_mib(server.process.pid)
    peer = StuckPeer(server.url, PROTOCOLS[0])
    try:
        peer.init(token)
        variables = {"filter": {"projects": [world.project]}, "after": "0"}
        for n in range(40):
            peer.subscribe(str(n), CONTEXTS, variables, "subscribe")
        await until(lambda: peer.unsent() > 16_384, 20, "the server is blocked on the peer")
        # Until what the server holds stops growing: every replay has read what it will.
        peak, steady = rss_mib(server.process.pid), 0
        while steady < 10:
            await asyncio.sleep(0.1)
            now = rss_mib(server.process.pid)
            steady = steady + 1 if now <= peak + 0.5 else 0
            peak = max(peak, now)
        assert peak - before < 100, f"the server grew by {peak - before:.0f} MiB"
        assert not peer.connection_gone()  # still open: the bound is on memory, not on it
    finally:
        peer.close()
