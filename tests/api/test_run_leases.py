"""Leases that fence, against a real `baton serve`: a daemon that lost its run is told so.

The server's lease is 60 seconds: tests put a lease out of date with SQL and sweep themselves
(sweeping is global and safe to run beside the server's own sweeper).
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from baton.access.principals import ADMIN
from baton.services.runs import RunService
from tests.conftest import LiveServer
from tests.helpers import agent, owner

CLAIM = """mutation($id: ID) { claimRun(input: {id: $id}) {
    __typename
    ... on RunMoveSuccess {
        run { id version lease { id holder expiresAt } } lease { id holder expiresAt } }
    ... on Error { code message } } }"""
REACH = """mutation($id: ID!, $lease: ID) {
    reachCheckpoint(input: {id: $id, checkpoint: plans_complete, leaseId: $lease}) {
    __typename ... on RunMoveSuccess { run { version checkpoint } }
    ... on LeaseLostError { id } ... on Error { code message } } }"""
FAIL = """mutation($id: ID!, $lease: ID) {
    failRun(input: {id: $id, reason: "lost the thread", leaseId: $lease}) {
    __typename ... on RunMoveSuccess { run { status } }
    ... on LeaseLostError { id } ... on Error { code message } } }"""
BEAT = """mutation($id: ID!, $lease: ID) { runHeartbeat(input: {id: $id, leaseId: $lease}) {
    __typename ... on RunHeartbeatSuccess { lease { id holder expiresAt } }
    ... on LeaseLostError { id } ... on InvalidInputError { field }
    ... on Error { code message } } }"""
RUN = """query($id: ID!) { run(id: $id) { status phase checkpoint version failureReason
    allowedEvents lease { id holder } } }"""


@dataclass
class Caller:
    client: httpx.AsyncClient
    token: str

    async def __call__(self, query: str, **variables: Any) -> dict[str, Any]:
        response = await self.client.post(
            "/graphql",
            json={"query": query, "variables": variables},
            headers={"Authorization": f"Bearer {self.token}"},
        )
        assert response.status_code == 200, response.text
        body = response.json()
        assert "errors" not in body, body
        return body["data"]  # type: ignore[no-any-return]


@dataclass
class Team:
    server: LiveServer
    client: httpx.AsyncClient
    owner: str
    project: str

    async def caller(self, handle: str) -> Caller:
        principal = agent(handle) if "/" in handle else owner(handle)
        return Caller(self.client, await self.server.token(principal))

    async def run(self) -> str:
        me = await self.caller(self.owner)
        data = await me(
            """mutation($p: String!) { createRun(input: {project: $p, title: "Fix it"}) {
                ... on RunMoveSuccess { run { id } } } }""",
            p=self.project,
        )
        return data["createRun"]["run"]["id"]  # type: ignore[no-any-return]

    async def expire_and_sweep(self, run_id: str) -> None:
        await self.server.db.execute(
            "UPDATE run_leases SET expires_at = now() - interval '1 second' WHERE run_id = $1",
            run_id,
        )
        await RunService(self.server.db).sweep(limit=10_000)


@pytest.fixture
async def team(live_server: LiveServer) -> AsyncIterator[Team]:
    tag = secrets.token_hex(4)
    async with httpx.AsyncClient(base_url=live_server.url, timeout=30) as client:
        yield Team(live_server, client, f"lease{tag}", f"p{tag}")


async def claim(daemon: Caller, run_id: str) -> dict[str, Any]:
    answer = (await daemon(CLAIM, id=run_id))["claimRun"]
    assert answer["__typename"] == "RunMoveSuccess", answer
    return answer  # type: ignore[no-any-return]


async def test_a_daemon_whose_lease_expired_and_another_claimed_is_told_it_lost_the_run(
    team: Team,
) -> None:
    first = await team.caller(f"{team.owner}/first")
    second = await team.caller(f"{team.owner}/second")
    run_id = await team.run()
    mine = (await claim(first, run_id))["lease"]["id"]
    await team.expire_and_sweep(run_id)
    await claim(second, run_id)
    as_owner = await team.caller(team.owner)
    before = (await as_owner(RUN, id=run_id))["run"]
    for lease in (None, mine):
        for query, field in ((REACH, "reachCheckpoint"), (FAIL, "failRun"), (BEAT, "runHeartbeat")):
            answer = (await first(query, id=run_id, lease=lease))[field]
            assert answer["__typename"] == "LeaseLostError", (field, lease, answer)
            assert (answer["code"], answer["id"]) == ("lease_lost", run_id)
    after = (await as_owner(RUN, id=run_id))["run"]
    assert after == before  # nothing changed, the lease included
    assert after["lease"]["holder"] == f"{team.owner}/second"
    assert (await second(REACH, id=run_id))["reachCheckpoint"]["run"]["checkpoint"] == (
        "plans_complete"
    )


async def test_two_daemons_sharing_one_token_are_told_apart_by_lease_id(team: Team) -> None:
    daemon = await team.caller(f"{team.owner}/daemon")  # both daemons use this one token
    run_id = await team.run()
    old = (await claim(daemon, run_id))["lease"]["id"]
    await team.expire_and_sweep(run_id)
    new = (await claim(daemon, run_id))["lease"]["id"]
    assert old != new
    for query, field in ((REACH, "reachCheckpoint"), (FAIL, "failRun"), (BEAT, "runHeartbeat")):
        answer = (await daemon(query, id=run_id, lease=old))[field]
        assert answer["__typename"] == "LeaseLostError", (field, answer)
    beat = (await daemon(BEAT, id=run_id, lease=new))["runHeartbeat"]
    assert beat["lease"]["id"] == new
    reached = (await daemon(REACH, id=run_id, lease=new))["reachCheckpoint"]
    assert reached["run"] == {"version": 5, "checkpoint": "plans_complete"}


async def test_a_heartbeat_after_expiry_is_refused_and_revives_nothing(team: Team) -> None:
    daemon = await team.caller(f"{team.owner}/daemon")
    run_id = await team.run()
    lease = (await claim(daemon, run_id))["lease"]["id"]
    await team.server.db.execute(
        "UPDATE run_leases SET expires_at = now() - interval '1 second' WHERE run_id = $1", run_id
    )
    beat = (await daemon(BEAT, id=run_id, lease=lease))["runHeartbeat"]
    assert beat["__typename"] == "LeaseLostError", beat
    # Not revived: the lease is still out of date (or already swept, the run requeued).
    alive = await team.server.db.fetchval(
        "SELECT expires_at > now() FROM run_leases WHERE run_id = $1", run_id
    )
    assert alive is not True
    await RunService(team.server.db).sweep(limit=10_000)
    run = (await daemon(RUN, id=run_id))["run"]
    assert (run["status"], run["lease"]) == ("waiting_for_agent", None)


async def test_the_claim_answers_its_lease_and_only_the_holder_sees_the_runners_events(
    team: Team,
) -> None:
    daemon = await team.caller(f"{team.owner}/daemon")
    sibling = await team.caller(f"{team.owner}/sibling")
    as_owner = await team.caller(team.owner)
    run_id = await team.run()
    answer = await claim(daemon, run_id)
    assert answer["lease"] == answer["run"]["lease"]
    assert answer["lease"]["holder"] == f"{team.owner}/daemon"
    assert (await daemon(RUN, id=run_id))["run"]["allowedEvents"] == [
        "CHECKPOINT_REACHED",
        "PLAN_NEEDS_INPUT",
        "FAILED",
    ]
    assert (await sibling(RUN, id=run_id))["run"]["allowedEvents"] == []
    assert (await as_owner(RUN, id=run_id))["run"]["allowedEvents"] == ["USER_INTERRUPTED"]
    # The owner may still stop the run.
    stopped = await as_owner(
        """mutation($id: ID!) { interruptRun(input: {id: $id}) {
            ... on RunMoveSuccess { run { status lease { id } } } } }""",
        id=run_id,
    )
    assert stopped["interruptRun"]["run"] == {"status": "interrupted", "lease": None}


async def test_a_malformed_lease_id_is_invalid_input(team: Team) -> None:
    daemon = await team.caller(f"{team.owner}/daemon")
    run_id = await team.run()
    await claim(daemon, run_id)
    for lease in ("nope", "L" + "0" * 24, "l" * 5000):
        beat = (await daemon(BEAT, id=run_id, lease=lease))["runHeartbeat"]
        assert (beat["__typename"], beat["field"]) == ("InvalidInputError", "leaseId"), beat


async def test_admin_drives_a_claimed_run_unless_it_names_a_stale_lease(team: Team) -> None:
    daemon = await team.caller(f"{team.owner}/daemon")
    admin = Caller(team.client, await team.server.token(ADMIN))
    run_id = await team.run()
    await claim(daemon, run_id)
    stale = "l" + "e" * 24
    refused = (await admin(REACH, id=run_id, lease=stale))["reachCheckpoint"]
    assert refused["__typename"] == "LeaseLostError"
    failed = (await admin(FAIL, id=run_id))["failRun"]
    assert failed["run"]["status"] == "errored"
