"""Resources follow the live hubs: a subscriber learns of another client's move; a revoked
token loses its calls, sessions and streams within the documented bound."""

from __future__ import annotations

import asyncio
import secrets
import warnings

import mcp_types as types
import pytest
from mcp.client.session import IncomingMessage
from mcp.client.subscriptions import SubscriptionLost
from mcp.shared.exceptions import MCPError

from baton.access.principals import Principal, PrincipalKind
from baton.access.tokens import grant_for, revoke_token
from tests.conftest import LiveServer, TunedServer
from tests.helpers import PACKET_INPUT
from tests.mcp.conftest import handed_off, http_client, ok

# BATON_TOKEN_CHECK_SECONDS is 1 on the tuned server; generous slack for a loaded machine.
REVOKED_WITHIN = 10.0


async def _pair(server: LiveServer) -> tuple[str, str, str, str]:
    tag = secrets.token_hex(4)
    requester, assignee = f"r{tag}/r", f"r{tag}/a"  # one owner: the gate routes it
    return (
        requester,
        assignee,
        await server.token(Principal(PrincipalKind.AGENT, requester)),
        await server.token(Principal(PrincipalKind.AGENT, assignee)),
    )


async def test_a_subscriber_is_notified_when_another_client_moves_the_task(
    live_server: LiveServer, era: str
) -> None:
    requester, assignee, req_token, asg_token = await _pair(live_server)
    updated: asyncio.Queue[str] = asyncio.Queue()

    async def on_message(message: IncomingMessage) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            updated.put_nowait(message.params.uri)

    async with (
        http_client(live_server.url, req_token, mode=era, on_message=on_message) as alice,
        http_client(live_server.url, asg_token, mode=era) as bob,
    ):
        task = await handed_off(alice, requester, assignee)
        uri = f"baton://tasks/{task['id']}"
        read = await alice.read_resource(uri)
        assert '"state":"routed"' in read.contents[0].text  # type: ignore[union-attr]
        if era == "legacy":
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # resources/subscribe is the handshake era's
                await alice.subscribe_resource(uri)
            ok(await bob.call_tool("acceptTask", {"id": task["id"]}))
            assert await asyncio.wait_for(updated.get(), 10) == uri
        else:
            async with alice.listen(resource_subscriptions=[uri]) as subscription:
                ok(await bob.call_tool("acceptTask", {"id": task["id"]}))
                event = await asyncio.wait_for(anext(aiter(subscription)), 10)
                assert event.uri == uri  # type: ignore[union-attr]
        after = await alice.read_resource(uri)
        assert '"state":"accepted"' in after.contents[0].text  # type: ignore[union-attr]


async def test_the_resource_list_names_the_callers_newest_tasks_and_runs(
    live_server: LiveServer, era: str
) -> None:
    requester, assignee, token, _ = await _pair(live_server)
    async with http_client(live_server.url, token, mode=era) as client:
        task = await handed_off(client, requester, assignee)
        run = ok(await client.call_tool("createRun", {"project": "web", "title": "Ship it"}))["run"]
        listed = {str(r.uri): r for r in (await client.list_resources()).resources}
        assert set(listed) == {f"baton://tasks/{task['id']}", f"baton://runs/{run['id']}"}
        mine = listed[f"baton://tasks/{task['id']}"]
        assert (mine.name, mine.title) == (task["id"], PACKET_INPUT["task"])
        assert mine.description == f"task routed: {requester} → {assignee}"
        theirs = listed[f"baton://runs/{run['id']}"]
        assert (theirs.name, theirs.title) == (run["id"], "Ship it")
        assert theirs.description == "run backlog (idle)"
        templates = (await client.list_resource_templates()).resource_templates
        assert [(t.name, t.uri_template) for t in templates] == [
            ("task", "baton://tasks/{id}"),
            ("run", "baton://runs/{id}"),
        ]
        read = await client.read_resource(f"baton://runs/{run['id']}")
        assert f'"id":"{run["id"]}"' in read.contents[0].text  # type: ignore[union-attr]


async def test_a_resource_the_caller_cannot_see_is_not_found(
    live_server: LiveServer, era: str
) -> None:
    _, _, token, _ = await _pair(live_server)
    async with http_client(live_server.url, token, mode=era) as client:
        with pytest.raises(Exception, match="no task with id"):
            await client.read_resource("baton://tasks/t" + "0" * 28)
        with pytest.raises(Exception, match="no resource"):
            await client.read_resource("https://example.com/")


async def test_a_revoked_token_is_refused_and_loses_its_streams(
    tuned_server: TunedServer, era: str
) -> None:
    requester, assignee, token, _ = await _pair(tuned_server)
    grant = await grant_for(tuned_server.db, token)
    assert grant is not None
    async with http_client(tuned_server.url, token, mode=era) as client:
        task = await handed_off(client, requester, assignee)
        uri = f"baton://tasks/{task['id']}"
        if era == "legacy":
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                await client.subscribe_resource(uri)
            await revoke_token(tuned_server.db, grant.id)
            # The session is ended: a call on it fails once the sweep ran.
            deadline = asyncio.get_running_loop().time() + REVOKED_WITHIN
            while True:
                try:
                    await asyncio.wait_for(client.call_tool("task", {"id": task["id"]}), 5)
                except TimeoutError:
                    pytest.fail("a call on the session hung instead of being refused")
                except MCPError as exc:
                    assert "bearer token" in exc.error.message
                    break
                assert asyncio.get_running_loop().time() < deadline, "still served"
                await asyncio.sleep(0.2)
        else:
            async with client.listen(resource_subscriptions=[uri]) as subscription:
                await revoke_token(tuned_server.db, grant.id)
                # The listen stream is ended by the server, however quiet the task is.
                try:
                    await asyncio.wait_for(anext(aiter(subscription)), REVOKED_WITHIN)
                except TimeoutError:
                    pytest.fail("the listen stream is still open")
                except SubscriptionLost:
                    pass
    with pytest.raises(BaseExceptionGroup) as refused_at_once:
        async with http_client(tuned_server.url, token, mode=era) as again:
            await again.call_tool("task", {"id": task["id"]})
    assert refused_at_once.group_contains(MCPError, match="bearer token", depth=None)
