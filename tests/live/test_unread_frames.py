"""WebSocket frames nobody reads count against their token's budget of unsent bytes, against a
real `baton serve` (8 MiB per token here, `BATON_MAX_QUEUED_BYTES_PER_TOKEN`; the per-socket
cap, `BATON_WS_MAX_QUEUED_BYTES`, raised out of the way).

The stuck peer (`StuckPeer`, a 4 KB receive buffer, never reads after `connection_ack`) runs
two replays of fat events (about 12 MB each, `tests.fat_events`): the first event's rest waits
in the server and the second waits behind it, past the token's budget, so its connection is
reset. A reader of another token sees every event and a live one after.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from bench.slow_sockets import StuckPeer

from baton.store.db import Database
from tests.fat_events import (
    CUT,
    EVENT_IDS,
    FAT_EVENTS,
    MIB,
    BudgetServer,
    budget_server,
    hubs_with_fat_events,
    metric,
    released,
)
from tests.helpers import World
from tests.live.big_events import until
from tests.live.client import PROTOCOLS, WSClient

PER_TOKEN = 8 * MIB
HUBS = 2
CANCEL = 'mutation($id: ID!) { cancelTask(input: {id: $id, reason: "done"}) { __typename } }'


@pytest.fixture(scope="module")
def server(
    database_url: str, db: Database, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[BudgetServer]:
    yield from budget_server(
        database_url,
        db,
        tmp_path_factory,
        max_queued_bytes_per_token=PER_TOKEN,
        ws_max_queued_bytes=256 * MIB,
        ws_send_timeout=600,
    )


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_socket_whose_frames_wait_past_its_token_s_budget_is_reset_another_is_served(
    server: BudgetServer, world: World, protocol: str
) -> None:
    hubs = await hubs_with_fat_events(world, HUBS)
    variables = {"filter": {"taskIds": hubs}, "after": "0"}
    stuck_token = await server.token(world.roles["requester"])
    reader_token = await server.token(world.roles["assignee"])
    cut = CUT.format("token")
    cuts = await metric(server.url, server.metrics_token, cut)
    reader = await WSClient.open(server.url, reader_token, protocol)
    stuck = StuckPeer(server.url, protocol)
    try:
        await reader.subscribe(EVENT_IDS, variables)
        first = [data["taskEvents"]["id"] for data in await reader.collect(2 * HUBS)]
        stuck.init(stuck_token)
        kind = "subscribe" if protocol == PROTOCOLS[0] else "start"
        for op in ("1", "2"):
            stuck.subscribe(op, FAT_EVENTS, variables, kind)
        await until(stuck.connection_gone, 60, "the stuck socket is reset")
        assert await metric(server.url, server.metrics_token, cut) > cuts
        auth = {"Authorization": f"Bearer {stuck_token}"}
        async with httpx.AsyncClient(base_url=server.url, headers=auth) as client:
            answer = await client.post(
                "/graphql", json={"query": CANCEL, "variables": {"id": hubs[0]}}
            )
        assert answer.json()["data"]["cancelTask"]["__typename"] == "MoveSuccess"
        [later] = await reader.collect(1)
    finally:
        stuck.close()
        await reader.close()
    assert len(set(first)) == 2 * HUBS
    assert int(later["taskEvents"]["id"]) > max(map(int, first))
    await released(server.url, server.metrics_token)
