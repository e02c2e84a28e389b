"""Event streams nobody reads are dropped to keep the process within its budget of unsent
bytes, against a real `baton serve` (16 MiB in all here, `BATON_MAX_QUEUED_BYTES`).

The fat events are those of a few hub tasks, each with four pages of the hubs' 100 dependents'
packets: about 12 MB an event. The stuck client is a plain socket with a 4 KB receive buffer
that never reads: the kernel takes about 3 MB, the first event's rest waits in the server and
the second is queued behind it, past the budget.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from baton.store.db import Database
from tests.fat_events import (
    CUT,
    EVENT_IDS,
    FAT_EVENTS,
    MIB,
    BudgetServer,
    budget_server,
    gone,
    hubs_with_fat_events,
    metric,
    released,
)
from tests.helpers import World
from tests.live.big_events import until
from tests.sse.client import raw_request, subscribe

LIMIT = 16 * MIB
HUBS = 3
CANCEL = 'mutation($id: ID!) { cancelTask(input: {id: $id, reason: "done"}) { __typename } }'


@pytest.fixture(scope="module")
def server(
    database_url: str, db: Database, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[BudgetServer]:
    yield from budget_server(
        database_url,
        db,
        tmp_path_factory,
        max_queued_bytes=LIMIT,
    )


async def test_a_stream_that_never_reads_is_dropped_past_the_process_budget_a_reader_is_not(
    server: BudgetServer, world: World
) -> None:
    hubs = await hubs_with_fat_events(world, HUBS)
    variables = {"filter": {"taskIds": hubs}, "after": "0"}
    reader = await server.token(world.roles["assignee"])
    stuck_token = await server.token(world.roles["requester"])
    cut = CUT.format("process")
    cuts = await metric(server.url, server.metrics_token, cut)
    async with subscribe(server.url, reader, EVENT_IDS, variables) as stream:
        first = [r["taskEvents"]["id"] for r in await stream.results(2 * HUBS)]
        body = json.dumps({"query": FAT_EVENTS, "variables": variables}).encode()
        head = "\r\n".join(
            [
                "POST /graphql/stream HTTP/1.1",
                f"Host: {server.url.removeprefix('http://')}",
                "Content-Type: application/json",
                f"Authorization: Bearer {stuck_token}",
                f"Content-Length: {len(body)}",
            ]
        )
        sock = await raw_request(server.url, head, body, rcvbuf=4096)
        try:
            await until(lambda: gone(sock), 60, "the stuck stream is dropped")
            assert await metric(server.url, server.metrics_token, cut) > cuts
            # The reader is still served, live: a new event reaches it.
            auth = {"Authorization": f"Bearer {stuck_token}"}
            async with httpx.AsyncClient(base_url=server.url, headers=auth) as client:
                answer = await client.post(
                    "/graphql", json={"query": CANCEL, "variables": {"id": hubs[0]}}
                )
            assert answer.json()["data"]["cancelTask"]["__typename"] == "MoveSuccess"
            [later] = await stream.results(1)
        finally:
            sock.close()
    assert len(set(first)) == 2 * HUBS
    assert int(later["taskEvents"]["id"]) > max(map(int, first))
    await released(server.url, server.metrics_token)
