"""A revoked or expired token ends its open event streams within the token check period: one
`next` with an `unauthenticated` error, then `complete`. Other tokens' streams go on.

Against `tuned_server` (BATON_TOKEN_CHECK_SECONDS=1).
"""

from __future__ import annotations

import time
from datetime import timedelta

import httpx

from baton.access.gate import GateDecision
from baton.access.tokens import create_token, digest, revoke_token
from tests.conftest import TUNED, LiveServer, TunedServer
from tests.helpers import World
from tests.live.client import TASK_EVENTS, HTTPClient, hand_off_via
from tests.sse.client import Message, Stream, subscribe

CHECK = float(TUNED["BATON_TOKEN_CHECK_SECONDS"])
SLACK = 3.0  # one database round trip and a loaded machine


async def revoke(server: LiveServer, token: str) -> None:
    token_id = await server.db.fetchval(
        "SELECT id FROM api_tokens WHERE token_hash = $1", digest(token)
    )
    await revoke_token(server.db, token_id)


async def ended_within(stream: Stream, seconds: float) -> tuple[list[Message], float]:
    started = time.monotonic()
    messages = await stream.rest(wait=seconds)
    return messages, time.monotonic() - started


def revoked_ending(messages: list[Message]) -> bool:
    if [m.event for m in messages[-2:]] != ["next", "complete"]:
        return False
    result = messages[-2].data
    return "data" not in result and [e["extensions"]["code"] for e in result["errors"]] == [
        "unauthenticated"
    ]


async def viewer_status(server: LiveServer, token: str) -> int:
    async with httpx.AsyncClient(base_url=server.url) as client:
        response = await client.post(
            "/graphql",
            json={"query": "{ viewer { handle } }"},
            headers={"Authorization": f"Bearer {token}", "Accept": "text/event-stream"},
        )
    return response.status_code


async def test_revoking_a_token_ends_its_streams_with_an_error_then_complete(
    tuned_server: TunedServer, world: World
) -> None:
    token = await create_token(tuned_server.db, world.roles["requester"])
    watch = {"filter": {"projects": [world.project]}}
    async with subscribe(tuned_server.url, token, TASK_EVENTS, watch) as stream:
        assert await viewer_status(tuned_server, token) == 200
        await revoke(tuned_server, token)
        messages, took = await ended_within(stream, CHECK + SLACK)
    assert revoked_ending(messages), messages
    assert took <= CHECK + SLACK
    assert await viewer_status(tuned_server, token) == 401


async def test_an_expiring_token_ends_its_streams_when_it_expires(
    tuned_server: TunedServer, world: World
) -> None:
    token = await create_token(
        tuned_server.db, world.roles["requester"], expires_in=timedelta(seconds=2)
    )
    watch = {"filter": {"projects": [world.project]}}
    async with subscribe(tuned_server.url, token, TASK_EVENTS, watch) as stream:
        messages, _ = await ended_within(stream, 2 + CHECK + SLACK)
    assert revoked_ending(messages), messages
    assert await viewer_status(tuned_server, token) == 401


async def test_other_tokens_streams_go_on(tuned_server: TunedServer, world: World) -> None:
    """The same principal with another token keeps its stream, and it still delivers."""
    await world.decide(GateDecision.ALLOW)
    kept = await create_token(tuned_server.db, world.roles["requester"])
    gone = await create_token(tuned_server.db, world.roles["requester"])
    newest = await tuned_server.db.fetchval("SELECT coalesce(max(id), 0) FROM task_events")
    # From a cursor: whatever commits after it reaches the stream, however soon.
    watch = {"filter": {"projects": [world.project]}, "after": str(newest)}
    requester = HTTPClient(tuned_server.url, kept)
    try:
        async with (
            subscribe(tuned_server.url, kept, TASK_EVENTS, watch) as staying,
            subscribe(tuned_server.url, gone, TASK_EVENTS, watch) as leaving,
        ):
            await revoke(tuned_server, gone)
            messages, _ = await ended_within(leaving, CHECK + SLACK)
            assert revoked_ending(messages), messages
            handed = await hand_off_via(requester, world.project, world.requester, world.assignee)
            events = [r["taskEvents"]["id"] for r in await staying.results(2)]
        assert events == [e["id"] for e in handed["events"]]
    finally:
        await requester.aclose()
