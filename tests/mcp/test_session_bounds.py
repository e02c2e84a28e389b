"""MCP sessions are admitted before they exist: per token (429) and per process (503), a
refused one answers with no session id and leaves nothing in the server, and every session of
a revoked token ends, its streams as finished responses.

Against `bounded_server` (tests/mcp/conftest.py: 30 sessions per process, 20 per token), MCP
spoken by hand over httpx where requests must race, the SDK's client elsewhere.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from contextlib import AsyncExitStack

import httpx
import httpx2
import pytest
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import SubscriptionLost
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from baton.access.principals import Principal, PrincipalKind
from baton.access.tokens import grant_for, revoke_token
from mcp import Client
from tests.mcp.conftest import (
    ASGI_INCOMPLETE,
    BOUNDS,
    HANDSHAKE,
    INITIALIZE,
    BoundedServer,
    call,
    close_session,
    connections,
    http_client,
    initialize,
    mcp_headers,
    open_session,
)

PER_TOKEN = int(BOUNDS["BATON_MCP_MAX_SESSIONS_PER_TOKEN"])
PER_PROCESS = int(BOUNDS["BATON_MCP_MAX_SESSIONS"])
SESSIONS = "baton_mcp_sessions"
LISTENING = "baton_mcp_listen_streams"
REVOKED_WITHIN = 10.0  # BATON_TOKEN_CHECK_SECONDS is 1; slack for a loaded machine


async def _token(server: BoundedServer) -> str:
    return await server.token(Principal(PrincipalKind.AGENT, f"s{secrets.token_hex(4)}/a"))


def _refused_without_session(response: httpx.Response, status: int, code: str) -> None:
    assert response.status_code == status, response.text
    assert "mcp-session-id" not in response.headers
    assert response.json()["error"]["data"]["code"] == code


async def _is_live(client: httpx.AsyncClient, token: str, session: str) -> bool:
    response = await call(client, token, session, "ping")
    assert response.status_code in (200, 404), response.text
    return response.status_code == 200


async def _race(clients: list[httpx.AsyncClient], tokens: list[str]) -> list[httpx.Response]:
    """One `initialize` per client at once, the i-th with `tokens[i % len(tokens)]`."""
    return list(
        await asyncio.gather(
            *(initialize(c, tokens[i % len(tokens)]) for i, c in enumerate(clients))
        )
    )


async def _close_all(server: BoundedServer, token: str, sessions: list[str]) -> None:
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        for session in sessions:
            await close_session(client, token, session)


async def test_a_token_at_19_sessions_racing_40_initializes_holds_exactly_20(
    bounded_server: BoundedServer,
) -> None:
    token = await _token(bounded_server)
    base = await bounded_server.gauge(SESSIONS)
    async with connections(bounded_server.url, 40) as clients:
        held = [await open_session(clients[0], token) for _ in range(PER_TOKEN - 1)]
        answers = await _race(clients, [token])
        made = [r.headers["mcp-session-id"] for r in answers if r.status_code == 200]
        refused = [r for r in answers if r.status_code != 200]
        assert len(made) == 1 and len(refused) == 39
        for response in refused:
            _refused_without_session(response, 429, "too_many_sessions")
        # Exactly the 20 admitted exist, each one answers, and the manager holds no other.
        assert await bounded_server.gauge(SESSIONS) == base + PER_TOKEN
        for session in held + made:
            assert await _is_live(clients[0], token, session)
        # A second burst finds no room either: the places stay taken while the sessions live.
        again = await _race(clients[:10], [token])
        for response in again:
            _refused_without_session(response, 429, "too_many_sessions")
    await _close_all(bounded_server, token, held + made)
    await bounded_server.gauge_becomes(SESSIONS, base)


async def test_past_the_process_cap_initialize_answers_503_and_leaves_no_session(
    bounded_server: BoundedServer,
) -> None:
    base = int(await bounded_server.gauge(SESSIONS))
    room = PER_PROCESS - base
    first, second, late = [await _token(bounded_server) for _ in range(3)]
    async with connections(bounded_server.url, 40) as clients:
        # 20 of each token at once: no token passes its own bound, the process would.
        answers = await _race(clients, [first, second])
        made = {
            (first if i % 2 == 0 else second, r.headers["mcp-session-id"])
            for i, r in enumerate(answers)
            if r.status_code == 200
        }
        assert len(made) == room
        refused = [r for r in answers if r.status_code != 200]
        assert len(refused) == 40 - room
        for response in refused:
            _refused_without_session(response, 503, "unavailable")
        assert await bounded_server.gauge(SESSIONS) == PER_PROCESS
        # Another token finds the process full too, until one session ends.
        _refused_without_session(await initialize(clients[0], late), 503, "unavailable")
        token, session = made.pop()
        await close_session(clients[0], token, session)
        response = await initialize(clients[0], late)
        assert response.status_code == 200, response.text
        made.add((late, response.headers["mcp-session-id"]))
        for token, session in made:
            assert await _is_live(clients[0], token, session)
            await close_session(clients[0], token, session)
    await bounded_server.gauge_becomes(SESSIONS, base)


async def test_revoking_a_token_ends_every_session_and_cuts_its_stream_cleanly(
    bounded_server: BoundedServer,
) -> None:
    token = await _token(bounded_server)
    grant = await grant_for(bounded_server.db, token)
    assert grant is not None
    base = await bounded_server.gauge(SESSIONS)
    async with connections(bounded_server.url, 40) as clients:
        answers = await _race(clients, [token])
        made = [r.headers["mcp-session-id"] for r in answers if r.status_code == 200]
        assert len(made) == PER_TOKEN
        bystander = await _token(bounded_server)
        kept = await open_session(clients[0], bystander)  # another token's: it stays
        watched = made[0]
        await clients[1].post(
            "/mcp",
            json={"jsonrpc": "2.0", "method": "notifications/initialized"},
            headers=mcp_headers(token, watched),
        )
        async with clients[1].stream("GET", "/mcp", headers=mcp_headers(token, watched)) as get:
            assert get.status_code == 200
            await revoke_token(bounded_server.db, grant.id)
            # The session's stream ends as a finished response (no protocol error here).
            async with asyncio.timeout(REVOKED_WITHIN):
                async for _ in get.aiter_bytes():
                    pass
    await bounded_server.gauge_becomes(SESSIONS, base + 1, within=REVOKED_WITHIN)
    assert ASGI_INCOMPLETE not in bounded_server.log.read_text()
    await _close_all(bounded_server, bystander, [kept])


async def test_a_revoked_tokens_listen_stream_ends_without_an_error_in_the_log(
    bounded_server: BoundedServer,
) -> None:
    token = await _token(bounded_server)
    grant = await grant_for(bounded_server.db, token)
    assert grant is not None
    async with (
        http_client(bounded_server.url, token) as client,
        client.listen(resource_subscriptions=[]) as subscription,
    ):
        await bounded_server.gauge_becomes(LISTENING, 1)
        await revoke_token(bounded_server.db, grant.id)
        # The stream ends (a TimeoutError here would fail the test).
        with contextlib.suppress(SubscriptionLost):
            async with asyncio.timeout(REVOKED_WITHIN):
                async for _ in subscription:
                    pass
    await bounded_server.gauge_becomes(LISTENING, 0)
    assert ASGI_INCOMPLETE not in bounded_server.log.read_text()


async def test_the_21st_listen_stream_of_a_token_is_answered_429(
    bounded_server: BoundedServer,
) -> None:
    token = await _token(bounded_server)
    statuses: list[int] = []

    async def record(response: httpx2.Response) -> None:
        statuses.append(response.status_code)

    async with AsyncExitStack() as stack:
        client = await stack.enter_async_context(http_client(bounded_server.url, token))
        for _ in range(PER_TOKEN):
            await stack.enter_async_context(client.listen(resource_subscriptions=[]))
        await bounded_server.gauge_becomes(LISTENING, PER_TOKEN)
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
        http.event_hooks = {"request": [], "response": [record]}
        endpoint = streamable_http_client(f"{bounded_server.url}/mcp", http_client=http)
        async with http, Client(endpoint, cache=None) as other:
            with pytest.raises(MCPError, match="already holds 20 MCP sessions") as refused:
                async with other.listen(resource_subscriptions=[]):
                    pass
        assert statuses[-1] == 429
        assert isinstance(refused.value.error.data, dict)
        assert refused.value.error.data["code"] == "too_many_sessions"
    await bounded_server.gauge_becomes(LISTENING, 0)


async def test_a_repeated_version_header_cannot_open_an_uncounted_session(
    bounded_server: BoundedServer,
) -> None:
    token = await _token(bounded_server)
    base = await bounded_server.gauge(SESSIONS)
    async with httpx.AsyncClient(base_url=bounded_server.url, timeout=30) as client:
        held = [await open_session(client, token) for _ in range(PER_TOKEN)]
        # The SDK routes by the first version header; a door that read the last would count
        # this as the per-request era, which opens no session.
        headers = [
            *mcp_headers(token).items(),
            ("MCP-Protocol-Version", HANDSHAKE),
            ("MCP-Protocol-Version", "2026-07-28"),
        ]
        response = await client.post("/mcp", json=INITIALIZE, headers=headers)
        _refused_without_session(response, 429, "too_many_sessions")
        assert await bounded_server.gauge(SESSIONS) == base + PER_TOKEN
        for session in held:
            await close_session(client, token, session)
    await bounded_server.gauge_becomes(SESSIONS, base)


async def test_a_failed_initialize_keeps_no_session_and_gives_its_place_back(
    bounded_server: BoundedServer,
) -> None:
    token = await _token(bounded_server)
    base = await bounded_server.gauge(SESSIONS)
    async with httpx.AsyncClient(base_url=bounded_server.url, timeout=30) as client:
        for _ in range(PER_TOKEN + 5):
            bad = {**INITIALIZE, "params": {"capabilities": "none"}}
            response = await client.post("/mcp", json=bad, headers=mcp_headers(token))
            assert response.status_code in (200, 400), response.text
            assert "error" in response.json()
            session = response.headers.get("mcp-session-id")
            if session is not None:  # the SDK names it; the door ended it at once
                assert not await _is_live(client, token, session)
        assert await bounded_server.gauge(SESSIONS) == base
        # None of them kept a place: the token still has all of its own.
        held = [await open_session(client, token) for _ in range(PER_TOKEN)]
        for session in held:
            await close_session(client, token, session)
    await bounded_server.gauge_becomes(SESSIONS, base)


async def test_an_idle_session_gives_its_place_back(idling_server: BoundedServer) -> None:
    token = await _token(idling_server)
    async with httpx.AsyncClient(base_url=idling_server.url, timeout=30) as client:
        first = [await open_session(client, token) for _ in range(PER_TOKEN)]
        _refused_without_session(await initialize(client, token), 429, "too_many_sessions")
        deadline = time.monotonic() + 15
        while await idling_server.gauge(SESSIONS) > 0:
            assert time.monotonic() < deadline, "idle sessions were not ended"
            await asyncio.sleep(0.2)
        for session in first:
            assert not await _is_live(client, token, session)
        again = [await open_session(client, token) for _ in range(PER_TOKEN)]
        assert len(again) == PER_TOKEN
