"""`resources/subscribe` under a race: a subscription's place is taken before anything is
awaited, so racing requests for one URI make one subscription and racing URIs stop at the
bound, and nothing a subscription holds outlives its session (DELETE, revocation).

Against `bounded_server` (tests/mcp/conftest.py: 100 resources per session), MCP spoken by
hand over httpx so that the requests race; `baton_mcp_resource_subscriptions` counts what the
server follows, `baton_live_subscriptions` what the event hubs feed.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets

import httpx

from baton.access.tokens import grant_for, revoke_token
from tests.helpers import World, agent
from tests.mcp.conftest import (
    BOUNDS,
    BoundedServer,
    call,
    close_session,
    connections,
    http_client,
    mcp_headers,
    ok,
    open_session,
)

PER_SESSION = int(BOUNDS["BATON_MCP_MAX_SUBSCRIPTIONS"])
FOLLOWED = "baton_mcp_resource_subscriptions"
HUB_SUBSCRIBERS = "baton_live_subscriptions"
UPDATED = b"notifications/resources/updated"
REVOKED_WITHIN = 10.0


async def _subscribe_at_once(
    clients: list[httpx.AsyncClient], token: str, session: str, uris: list[str]
) -> list[httpx.Response]:
    """`resources/subscribe` for each of `uris` at once, the i-th on `clients[i % n]`."""
    return list(
        await asyncio.gather(
            *(
                call(clients[i % len(clients)], token, session, "resources/subscribe", uri=uri)
                for i, uri in enumerate(uris)
            )
        )
    )


def _accepted(responses: list[httpx.Response]) -> list[httpx.Response]:
    assert all(r.status_code == 200 for r in responses), [r.text for r in responses]
    return [r for r in responses if "result" in r.json()]


async def _baselines(server: BoundedServer) -> tuple[float, float]:
    return await server.gauge(FOLLOWED), await server.gauge(HUB_SUBSCRIBERS)


async def test_racing_subscribes_to_one_uri_make_one_subscription_that_dies_with_its_session(
    bounded_server: BoundedServer, world: World
) -> None:
    token = await bounded_server.token(agent(world.requester))
    assignee = await bounded_server.token(agent(world.assignee))
    task = await world.hand_off()
    uri = f"baton://tasks/{task.id}"
    followed, fed = await _baselines(bounded_server)
    async with connections(bounded_server.url, 60) as clients:
        session = await open_session(clients[0], token)
        answers = await _subscribe_at_once(clients, token, session, [uri] * 60)
        assert len(_accepted(answers)) == 60
        assert await bounded_server.gauge(FOLLOWED) == followed + 1
        async with clients[0].stream("GET", "/mcp", headers=mcp_headers(token, session)) as get:
            async with http_client(bounded_server.url, assignee) as bob:
                ok(await bob.call_tool("acceptTask", {"id": task.id}))
            # One change, one notification: no second follower saw it.
            chunks, seen = get.aiter_bytes(), b""
            async with asyncio.timeout(15):
                while UPDATED not in seen:
                    seen += await anext(chunks)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(1.5):  # a duplicate would come right after
                    while True:
                        seen += await anext(chunks)
            assert seen.count(UPDATED) == 1, seen
        await close_session(clients[0], token, session)
    await bounded_server.gauge_becomes(FOLLOWED, followed)
    await bounded_server.gauge_becomes(HUB_SUBSCRIBERS, fed)


async def test_racing_subscribes_leave_nothing_once_the_token_is_revoked(
    bounded_server: BoundedServer, world: World
) -> None:
    token = await bounded_server.token(agent(world.requester))
    grant = await grant_for(bounded_server.db, token)
    assert grant is not None
    tasks = [await world.hand_off() for _ in range(3)]
    followed, fed = await _baselines(bounded_server)
    async with connections(bounded_server.url, 60) as clients:
        sessions = [await open_session(clients[0], token) for _ in range(2)]
        for session in sessions:
            uris = [f"baton://tasks/{t.id}" for t in tasks] * 20
            assert len(_accepted(await _subscribe_at_once(clients, token, session, uris))) == 60
        assert await bounded_server.gauge(FOLLOWED) == followed + 2 * len(tasks)
        await revoke_token(bounded_server.db, grant.id)
    await bounded_server.gauge_becomes(FOLLOWED, followed, within=REVOKED_WITHIN)
    await bounded_server.gauge_becomes(HUB_SUBSCRIBERS, fed)


async def test_250_distinct_uris_at_once_make_exactly_the_bound_of_subscriptions(
    bounded_server: BoundedServer, world: World
) -> None:
    token = await bounded_server.token(agent(world.requester))
    tasks = [await world.hand_off(task=f"Task {n}") for n in range(250)]
    followed, fed = await _baselines(bounded_server)
    async with connections(bounded_server.url, 125) as clients:
        session = await open_session(clients[0], token)
        uris = [f"baton://tasks/{t.id}" for t in tasks]
        answers = await _subscribe_at_once(clients, token, session, uris)
        accepted = _accepted(answers)
        assert len(accepted) == PER_SESSION
        refused = [r.json()["error"]["message"] for r in answers if "error" in r.json()]
        assert len(refused) == 250 - PER_SESSION
        assert set(refused) == {
            f"at most {PER_SESSION} resource subscriptions per session "
            "(BATON_MCP_MAX_SUBSCRIPTIONS)"
        }
        assert await bounded_server.gauge(FOLLOWED) == followed + PER_SESSION
        await close_session(clients[0], token, session)
    await bounded_server.gauge_becomes(FOLLOWED, followed)
    await bounded_server.gauge_becomes(HUB_SUBSCRIBERS, fed)


async def test_racing_subscribes_to_an_unseen_resource_are_all_refused_and_keep_no_place(
    bounded_server: BoundedServer, world: World
) -> None:
    token = await bounded_server.token(agent(world.requester))
    outsider = World(world.service, tag=secrets.token_hex(4))
    theirs = await outsider.hand_off()
    mine = [await world.hand_off(task=f"Task {n}") for n in range(PER_SESSION)]
    followed, _ = await _baselines(bounded_server)
    async with connections(bounded_server.url, 60) as clients:
        session = await open_session(clients[0], token)
        unseen = f"baton://tasks/{theirs.id}"
        answers = await _subscribe_at_once(clients, token, session, [unseen] * 60)
        assert all(r.status_code == 200 for r in answers)
        codes = {r.json()["error"]["data"]["code"] for r in answers}
        assert codes == {"not_found"}
        assert await bounded_server.gauge(FOLLOWED) == followed
        # The refused ones hold no place: the session's whole bound is still free.
        uris = [f"baton://tasks/{t.id}" for t in mine]
        assert len(_accepted(await _subscribe_at_once(clients, token, session, uris))) == 100
        await close_session(clients[0], token, session)
    await bounded_server.gauge_becomes(FOLLOWED, followed)
