"""Two agents complete a hand-off through MCP alone: over Streamable HTTP in both protocol
eras, and over stdio through `baton mcp`."""

from __future__ import annotations

import asyncio
import secrets
import warnings

import mcp_types as types
from mcp.client.session import IncomingMessage

from baton.access.principals import Principal, PrincipalKind
from tests.conftest import LiveServer
from tests.helpers import PACKET_INPUT, RESULT_INPUT
from tests.mcp.conftest import http_client, ok, refused, stdio_client


async def test_two_agents_complete_a_hand_off_through_mcp_alone(
    live_server: LiveServer, era: str
) -> None:
    tag = secrets.token_hex(4)
    alice, bob = f"al{tag}/planner", f"bo{tag}/coder"
    alice_token = await live_server.token(Principal(PrincipalKind.AGENT, alice))
    bob_token = await live_server.token(Principal(PrincipalKind.AGENT, bob))
    bob_owner = await live_server.token(Principal(PrincipalKind.OWNER, f"bo{tag}"))
    async with (
        http_client(live_server.url, alice_token, mode=era) as a,
        http_client(live_server.url, bob_token, mode=era) as b,
        http_client(live_server.url, bob_owner, mode=era) as owner,
    ):
        handed = ok(
            await a.call_tool(
                "handOff",
                {
                    "id": "notes",
                    "project": "web",
                    "requester": alice,
                    "assignee": bob,
                    "verification": "REVIEW",
                    "packet": PACKET_INPUT,
                },
            )
        )
        task = handed["task"]
        assert (task["state"], task["waitingOn"]) == ("waiting", "owner_approval")
        task_id = task["id"]
        assert (
            ok(await owner.call_tool("approveTask", {"id": task_id}))["task"]["state"] == "routed"
        )
        waiting = ok(await b.call_tool("waitingOnMe", {}))
        assert [t["id"] for t in waiting["tasks"]] == [task_id]
        assert waiting["tasks"][0]["allowedMoves"] == ["ACCEPT"]
        assert ok(await b.call_tool("acceptTask", {"id": task_id}))["task"]["state"] == "accepted"
        assert ok(await b.call_tool("startTask", {"id": task_id}))["task"]["state"] == "working"
        saved = ok(
            await b.call_tool(
                "saveCheckpoint",
                {"id": task_id, "checkpoint": {"progress": "drafted", "nextSteps": ["link"]}},
            )
        )
        assert saved["task"]["latestCheckpoint"] == {
            "progress": "drafted",
            "decisions": [],
            "filesTouched": [],
            "nextSteps": ["link"],
            "openQuestions": [],
        }
        returned = ok(await b.call_tool("submitResult", {"id": task_id, "result": RESULT_INPUT}))
        assert returned["task"]["state"] == "verifying"
        assert returned["task"]["result"]["returnedBy"] == bob
        done = ok(await a.call_tool("completeTask", {"id": task_id}))
        assert done["task"]["state"] == "completed"
        assert [e["move"] for e in done["events"]] == ["COMPLETE"]
        read = ok(await a.call_tool("task", {"id": task_id}))["task"]
        assert read["state"] == "completed"
        assert read["version"] == 8


async def test_over_stdio_baton_mcp_serves_the_same_tools_and_relays_updates(
    live_server: LiveServer,
) -> None:
    tag = secrets.token_hex(4)
    me = f"st{tag}/a"
    token = await live_server.token(Principal(PrincipalKind.AGENT, me))
    other = await live_server.token(Principal(PrincipalKind.AGENT, f"st{tag}/b"))
    updated: asyncio.Queue[str] = asyncio.Queue()

    async def on_message(message: IncomingMessage) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            updated.put_nowait(message.params.uri)

    async with (
        stdio_client(live_server.url, token, on_message=on_message) as local,
        http_client(live_server.url, other) as remote,
    ):
        names = {t.name for t in (await local.list_tools()).tools}
        assert {"handOff", "acceptTask", "waitingOnMe", "claimRun"} <= names
        assert "approveTask" not in names  # the server's list for this agent
        task = ok(
            await local.call_tool(
                "handOff",
                {
                    "project": "web",
                    "requester": me,
                    "assignee": f"st{tag}/b",
                    "packet": PACKET_INPUT,
                },
            )
        )["task"]
        error = refused(await local.call_tool("acceptTask", {"id": task["id"]}))
        assert error["code"] == "forbidden"  # the assignee accepts, not the requester
        uri = f"baton://tasks/{task['id']}"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            await local.subscribe_resource(uri)
        ok(await remote.call_tool("acceptTask", {"id": task["id"]}))
        assert await asyncio.wait_for(updated.get(), 10) == uri
        read = await local.read_resource(uri)
        assert '"state":"accepted"' in read.contents[0].text  # type: ignore[union-attr]
