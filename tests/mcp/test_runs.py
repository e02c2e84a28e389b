"""A daemon claims and drives a pipeline run through MCP alone; what it reads matches GraphQL."""

from __future__ import annotations

import secrets
from typing import Any

import httpx

from baton.access.principals import Principal, PrincipalKind
from tests.conftest import LiveServer
from tests.helpers import PACKET_INPUT
from tests.mcp.conftest import http_client, ok, refused


async def test_a_daemon_claims_and_drives_a_run(live_server: LiveServer, era: str) -> None:
    tag = secrets.token_hex(4)
    owner = await live_server.token(Principal(PrincipalKind.OWNER, f"o{tag}"))
    daemon = await live_server.token(Principal(PrincipalKind.AGENT, f"o{tag}/laptop"))
    async with (
        http_client(live_server.url, owner, mode=era) as person,
        http_client(live_server.url, daemon, mode=era) as machine,
    ):
        created = ok(await person.call_tool("createRun", {"project": "web", "title": "Ship it"}))
        run_id = created["run"]["id"]
        assert (created["run"]["status"], created["run"]["phase"]) == ("backlog", "idle")
        waiting = ok(await machine.call_tool("waitingOnMe", {}))
        assert [r["id"] for r in waiting["runs"]] == [run_id]
        claimed = ok(await machine.call_tool("claimRun", {"project": "web"}))
        assert claimed["run"]["id"] == run_id
        lease = claimed["lease"]["id"]
        assert claimed["run"]["lease"]["id"] == lease
        assert "CHECKPOINT_REACHED" in claimed["run"]["allowedEvents"]
        beat = ok(await machine.call_tool("runHeartbeat", {"id": run_id, "leaseId": lease}))
        assert beat["lease"]["id"] == lease
        early = refused(
            await machine.call_tool(
                "openPullRequest", {"id": run_id, "url": "https://example.com/pull/1"}
            )
        )
        assert early["code"] == "invalid_state"
        assert (early["status"], early["checkpoint"]) == ("in_progress", "none")
        stale = refused(
            await machine.call_tool(
                "reachCheckpoint",
                {"id": run_id, "checkpoint": "plans_complete", "leaseId": "l" + "0" * 24},
            )
        )
        assert stale["code"] == "lease_lost"
        for checkpoint in ("plans_complete", "summary_complete"):
            ok(
                await machine.call_tool(
                    "reachCheckpoint", {"id": run_id, "checkpoint": checkpoint, "leaseId": lease}
                )
            )
        opened = ok(
            await machine.call_tool(
                "openPullRequest",
                {"id": run_id, "url": "https://example.com/pull/1", "leaseId": lease},
            )
        )
        assert (opened["run"]["status"], opened["run"]["checkpoint"]) == (
            "in_review",
            "pr_complete",
        )
        assert opened["run"]["lease"] is None
        done = ok(await machine.call_tool("mergePullRequest", {"id": run_id}))
        assert (done["run"]["status"], done["run"]["phase"]) == ("completed", "done")
        assert [e["event"] for e in done["events"]] == ["PR_MERGED"]
        assert ok(await person.call_tool("runs", {"statuses": ["completed"]}))["runs"][0]["id"] == (
            run_id
        )


TASK_FIELDS = """id project state waitingOn requester assignee verification version
  packet { task deliverableType acceptanceCriteria context files dependsOn }
  result { summary evidence { kind summary url content } provenance returnedBy returnedAt }
  latestCheckpoint { progress decisions filesTouched nextSteps openQuestions }
  createdAt updatedAt allowedMoves"""
RUN_FIELDS = """id owner project taskId title status phase checkpoint statusLabel phaseLabel
  questions answers pullRequestUrl failureReason createdBy version createdAt updatedAt
  allowedEvents lease { id holder expiresAt }"""


async def _graphql(server: LiveServer, token: str, query: str, **variables: Any) -> Any:
    async with httpx.AsyncClient(base_url=server.url) as client:
        answer = await client.post(
            "/graphql",
            json={"query": query, "variables": variables},
            headers={"Authorization": f"Bearer {token}"},
        )
    body = answer.json()
    assert "errors" not in body, body
    return body["data"]


async def test_tasks_and_runs_read_over_mcp_as_graphql_returns_them(
    live_server: LiveServer,
) -> None:
    tag = secrets.token_hex(4)
    me = f"s{tag}/a"
    token = await live_server.token(Principal(PrincipalKind.AGENT, me))
    async with http_client(live_server.url, token) as client:
        task = ok(
            await client.call_tool(
                "handOff",
                {"project": "web", "requester": me, "assignee": me, "packet": PACKET_INPUT},
            )
        )["task"]
        for move in ("acceptTask", "startTask"):
            ok(await client.call_tool(move, {"id": task["id"]}))
        ok(
            await client.call_tool(
                "submitResult",
                {
                    "id": task["id"],
                    "result": {
                        "summary": "ok",
                        "evidence": [
                            {"kind": "link", "summary": "it", "url": "https://example.com/x"}
                        ],
                    },
                },
            )
        )
        over_mcp = ok(await client.call_tool("task", {"id": task["id"]}))["task"]
        run = ok(await client.call_tool("createRun", {"project": "web", "title": "R"}))["run"]
        ok(await client.call_tool("claimRun", {"id": run["id"]}))
        run_over_mcp = ok(await client.call_tool("run", {"id": run["id"]}))["run"]
    data = await _graphql(
        live_server,
        token,
        f"query($t: ID!, $r: ID!) {{ task(id: $t) {{ {TASK_FIELDS} }} "
        f"run(id: $r) {{ {RUN_FIELDS} }} }}",
        t=task["id"],
        r=run["id"],
    )
    assert over_mcp == data["task"]
    assert over_mcp["state"] == "completed" and over_mcp["result"]["evidence"][0]["content"] is None
    assert run_over_mcp == data["run"]
    assert run_over_mcp["lease"] is not None
