"""Agent Cards over real HTTP: Baton's own and each agent's, read by the SDK's card resolver."""

from __future__ import annotations

import httpx
from a2a.client import A2ACardResolver

from baton.protocol.task_object import DeliverableType
from tests.a2a.conftest import agent_url
from tests.conftest import LiveServer


async def test_an_agents_card_names_both_bindings_at_its_url_bearer_tokens_and_its_skills(
    live_server: LiveServer,
) -> None:
    base = agent_url(live_server, "bob/coder")
    async with httpx.AsyncClient() as http:  # no token: a card says how to authenticate
        card = await A2ACardResolver(http, base).get_agent_card()
    assert card.name == "bob/coder"
    assert {(i.protocol_binding, i.url, i.protocol_version) for i in card.supported_interfaces} == {
        ("JSONRPC", base, "1.0"),
        ("HTTP+JSON", base, "1.0"),
    }
    assert card.capabilities.streaming and card.capabilities.push_notifications
    assert not card.capabilities.extended_agent_card
    (scheme,) = card.security_schemes.values()
    assert scheme.http_auth_security_scheme.scheme == "bearer"
    assert [s.id for s in card.skills] == [d.value for d in DeliverableType]


async def test_batons_card_is_public_and_says_where_every_agents_card_is(
    live_server: LiveServer,
) -> None:
    async with httpx.AsyncClient() as http:
        card = await A2ACardResolver(http, live_server.url).get_agent_card()
    assert card.name == "Baton"
    assert f"{live_server.url}/a2a/agents/{{owner}}/{{agent}}/.well-known/agent-card.json" in (
        card.description
    )
    assert {i.url for i in card.supported_interfaces} == {f"{live_server.url}/a2a"}
    assert [s.id for s in card.skills] == ["delegate"]


async def test_a_name_no_agent_could_have_has_no_card(live_server: LiveServer) -> None:
    async with httpx.AsyncClient(base_url=live_server.url) as http:
        for path in (
            "/a2a/agents/Bob/coder/.well-known/agent-card.json",
            "/a2a/agents/admin/x/.well-known/agent-card.json",
            "/a2a/agents/bob/.well-known/agent-card.json",
        ):
            answer = await http.get(path)
            assert answer.status_code == 404, path
            assert answer.json()["error"]["code"] == 404
