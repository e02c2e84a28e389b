"""A revoked or expired token stops working everywhere within the documented bound: HTTP
answers 401 and open WebSockets are closed with 4403 (both subprotocols).

The server under test re-checks tokens every second (BATON_TOKEN_CHECK_SECONDS=1); the default
is five seconds. The bound checked is the documented one with a generous margin; how soon
within it a socket closes is not a property of the server (see tests/live/test_stuck_peers.py
for sockets whose peer stops reading).
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import timedelta

import httpx
import pytest
from websockets.exceptions import ConnectionClosed

from baton.access.tokens import create_token, digest, revoke_token
from tests.conftest import TUNED, TunedServer
from tests.helpers import World
from tests.live.big_events import until_async
from tests.live.client import PROTOCOLS, TASK_EVENTS, WSClient

CHECK = float(TUNED["BATON_TOKEN_CHECK_SECONDS"])
SLACK = 5.0  # one database round trip and a loaded machine


async def closed_within(ws: WSClient, seconds: float) -> int | None:
    """Wait at most `seconds` for the server to close `ws` (fails past it); its close code."""
    with pytest.raises(ConnectionClosed):
        async with asyncio.timeout(seconds):
            while True:
                await ws.ws.recv()
    return ws.ws.close_code


async def token_id(server: TunedServer, token: str) -> int:
    value = await server.db.fetchval(
        "SELECT id FROM api_tokens WHERE token_hash = $1", digest(token)
    )
    assert isinstance(value, int)
    return value


async def viewer_status(server: TunedServer, token: str) -> int:
    async with httpx.AsyncClient(base_url=server.url) as client:
        response = await client.post(
            "/graphql",
            json={"query": "{ viewer { handle } }"},
            headers={"Authorization": f"Bearer {token}"},
        )
    return response.status_code


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_revoking_a_token_closes_its_open_sockets_with_4403(
    tuned_server: TunedServer, world: World, protocol: str
) -> None:
    token = await create_token(tuned_server.db, world.roles["requester"])
    ws = await WSClient.open(tuned_server.url, token, protocol)
    await ws.subscribe(TASK_EVENTS, {"filter": {"projects": [world.project]}})
    assert await viewer_status(tuned_server, token) == 200

    await revoke_token(tuned_server.db, await token_id(tuned_server, token))
    assert await closed_within(ws, CHECK + SLACK) == 4403
    assert await viewer_status(tuned_server, token) == 401


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_an_expiring_token_closes_its_sockets_when_it_expires(
    tuned_server: TunedServer, world: World, protocol: str
) -> None:
    token = await create_token(
        tuned_server.db, world.roles["requester"], expires_in=timedelta(seconds=2)
    )
    ws = await WSClient.open(tuned_server.url, token, protocol)
    await ws.subscribe(TASK_EVENTS, {"filter": {"projects": [world.project]}})
    assert await closed_within(ws, 2 + CHECK + SLACK) == 4403
    assert await viewer_status(tuned_server, token) == 401


async def test_other_tokens_sockets_stay_open(tuned_server: TunedServer, world: World) -> None:
    kept = await WSClient.open(
        tuned_server.url, await create_token(tuned_server.db, world.roles["assignee"]), PROTOCOLS[0]
    )
    revoked = await create_token(tuned_server.db, world.roles["requester"])
    gone = await WSClient.open(tuned_server.url, revoked, PROTOCOLS[0])
    await revoke_token(tuned_server.db, await token_id(tuned_server, revoked))
    assert await closed_within(gone, CHECK + SLACK) == 4403
    await kept.subscribe(
        "subscription($id: ID!) { taskUpdated(id: $id) { state } }", {"id": "nope"}
    )
    with pytest.raises(Exception, match=r"not_found|no task"):
        await kept.next()  # the socket still answers
    await kept.close()


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_revoked_socket_runs_no_more_operations(
    tuned_server: TunedServer, world: World, protocol: str
) -> None:
    await world.decide(None)
    token = await create_token(tuned_server.db, world.roles["requester"])
    ws = await WSClient.open(tuned_server.url, token, protocol)
    await revoke_token(tuned_server.db, await token_id(tuned_server, token))

    # Until the server's token cache has let go of it (HTTP shares that cache): from then on
    # the socket's next operation is refused, if the sweep has not closed it already.
    async def refused() -> bool:
        return await viewer_status(tuned_server, token) == 401

    await until_async(refused, CHECK + SLACK, "HTTP refuses the revoked token")

    task_id = f"revoked-{world.tag}"
    mutation = """mutation($input: HandOffInput!) { handOff(input: $input) { __typename } }"""
    task_input = {
        "id": task_id,
        "project": world.project,
        "requester": world.requester,
        "assignee": world.assignee,
        "packet": {"task": "t", "deliverableType": "doc", "acceptanceCriteria": ["a"]},
    }
    with contextlib.suppress(ConnectionClosed):  # closed by the sweep already, or now
        await ws.subscribe(mutation, {"input": task_input})
    assert await closed_within(ws, SLACK) == 4403
    exists = await tuned_server.db.fetchval("SELECT count(*) FROM tasks WHERE id = $1", task_id)
    assert exists == 0
