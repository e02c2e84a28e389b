"""Pipeline runs end to end against real `baton serve` processes, over HTTP and WebSockets."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import agent, mint, owner
from tests.live.client import PROTOCOLS, HTTPClient
from tests.live.cluster import Cluster
from tests.live.conftest import OpenHTTP, OpenWS

RUN = "id status phase checkpoint version"
EVENT_FIELDS = "id kind runId event fromStatus toStatus actor run { status phase checkpoint }"
RUN_EVENTS = f"""
subscription($filter: RunEventFilter, $after: ID) {{
  runEvents(filter: $filter, after: $after) {{ {EVENT_FIELDS} }}
}}
"""


def event_mutation(field: str, extra: str = "", variables: str = "") -> str:
    return f"""mutation($id: ID!{variables}) {{ {field}(input: {{id: $id{extra}}}) {{
        __typename
        ... on RunMoveSuccess {{ run {{ {RUN} }} events {{ id event }} }}
        ... on Error {{ code message }}
    }} }}"""


class Daemon:
    """A daemon's loop, as the README shows it: claim, heartbeat, reach checkpoints, open the
    pull request; and the owner's answers, over real HTTP."""

    def __init__(self, http: HTTPClient) -> None:
        self.http = http

    async def call(self, field: str, run_id: str | None, extra: str = "", **v: Any) -> Any:
        answer = (await self.http(event_mutation(field, extra), id=run_id, **v))[field]
        assert answer["__typename"] == "RunMoveSuccess", answer
        return answer["run"]

    async def create(self, project: str, title: str = "Fix the login page") -> dict[str, Any]:
        data = await self.http(
            """mutation($p: String!, $t: String!) { createRun(input: {project: $p, title: $t}) {
                 __typename
                 ... on RunMoveSuccess { run { id status version } events { id } } } }""",
            p=project,
            t=title,
        )
        assert data["createRun"]["__typename"] == "RunMoveSuccess", data
        return data["createRun"]  # type: ignore[no-any-return]

    async def claim(self, project: str) -> dict[str, Any]:
        data = await self.http(
            f"""mutation($p: String) {{ claimRun(input: {{project: $p}}) {{ __typename
                 ... on RunMoveSuccess {{ run {{ {RUN} }} }}
                 ... on Error {{ code message }} }} }}""",
            p=project,
        )
        assert data["claimRun"]["__typename"] == "RunMoveSuccess", data
        return data["claimRun"]["run"]  # type: ignore[no-any-return]

    async def heartbeat(self, run_id: str) -> str:
        data = await self.http(
            """mutation($id: ID!) { runHeartbeat(input: {id: $id}) { __typename
                 ... on RunHeartbeatSuccess { lease { expiresAt } } ... on Error { code } } }""",
            id=run_id,
        )
        return data["runHeartbeat"]["__typename"]  # type: ignore[no-any-return]

    async def reach(self, run_id: str, checkpoint: str) -> Any:
        return await self.call("reachCheckpoint", run_id, f", checkpoint: {checkpoint}")


@pytest.fixture
def names() -> dict[str, Any]:
    tag = secrets.token_hex(4)
    return {"owner": owner(f"o{tag}"), "daemon": agent(f"o{tag}/daemon"), "project": f"p{tag}"}


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_run_from_creation_to_done_with_a_subscriber_watching_every_step(
    names: dict[str, Any], ws_for: OpenWS, http_for: OpenHTTP, protocol: str
) -> None:
    person = Daemon(await http_for(names["owner"]))
    daemon = Daemon(await http_for(names["daemon"]))
    created = await person.create(names["project"])
    run_id = created["run"]["id"]
    before_created = str(int(created["events"][0]["id"]) - 1)
    watcher = await ws_for(names["owner"], protocol)
    await watcher.subscribe(RUN_EVENTS, {"filter": {"runIds": [run_id]}, "after": before_created})
    assert [e["runEvents"]["kind"] for e in await watcher.collect(1)] == ["created"]

    run = await daemon.claim(names["project"])
    assert (run["id"], run["status"], run["phase"]) == (run_id, "in_progress", "planning")
    assert await daemon.heartbeat(run_id) == "RunHeartbeatSuccess"
    for checkpoint in (
        "plans_complete",
        "generation_complete",
        "verification_complete",
        "reviews_addressed",
        "summary_complete",
    ):
        await daemon.reach(run_id, checkpoint)
    opened = await daemon.call(
        "openPullRequest", run_id, ', url: "https://example.com/acme/web/pull/7"'
    )
    assert (opened["status"], opened["checkpoint"]) == ("in_review", "pr_complete")
    done = await daemon.call("mergePullRequest", run_id)
    assert (done["status"], done["phase"], done["checkpoint"]) == ("completed", "done", "notified")

    events = [e["runEvents"] for e in await watcher.collect(8)]
    assert [e["event"] for e in events] == [
        "CLAIM",
        "CHECKPOINT_REACHED",
        "CHECKPOINT_REACHED",
        "CHECKPOINT_REACHED",
        "CHECKPOINT_REACHED",
        "CHECKPOINT_REACHED",
        "PR_OPENED",
        "PR_MERGED",
    ]
    assert events[-1]["run"] == {"status": "completed", "phase": "done", "checkpoint": "notified"}
    ids = [int(e["id"]) for e in events]
    assert ids == sorted(set(ids))

    # A subscriber resuming from the middle gets the rest exactly once, then live events.
    again = await ws_for(names["owner"], protocol)
    await again.subscribe(RUN_EVENTS, {"filter": {"runIds": [run_id]}, "after": events[3]["id"]})
    rest = [e["runEvents"]["id"] for e in await again.collect(4)]
    assert rest == [e["id"] for e in events[4:]]


async def test_the_question_path_keeps_the_checkpoint(
    names: dict[str, Any], http_for: OpenHTTP
) -> None:
    person = Daemon(await http_for(names["owner"]))
    daemon = Daemon(await http_for(names["daemon"]))
    run_id = (await person.create(names["project"]))["run"]["id"]
    await daemon.claim(names["project"])
    data = await daemon.http(
        """mutation($id: ID!, $q: [String!]!) { requestUserInput(input: {id: $id, questions: $q}) {
             __typename ... on RunMoveSuccess { run { status phase questions } } } }""",
        id=run_id,
        q=["Which database?"],
    )
    asked = data["requestUserInput"]
    assert asked["run"] == {
        "status": "awaiting_user",
        "phase": "idle",
        "questions": ["Which database?"],
    }
    data = await person.http(
        """mutation($id: ID!, $a: [String!]!) { provideUserInput(input: {id: $id, answers: $a}) {
             __typename ... on RunMoveSuccess { run { status checkpoint answers } } } }""",
        id=run_id,
        a=["PostgreSQL"],
    )
    assert data["provideUserInput"]["run"] == {
        "status": "backlog",
        "checkpoint": "none",
        "answers": ["PostgreSQL"],
    }
    again = await daemon.claim(names["project"])
    assert (again["id"], again["status"], again["phase"]) == (run_id, "in_progress", "planning")


async def test_interrupt_resume_and_fail_rerun(names: dict[str, Any], http_for: OpenHTTP) -> None:
    person = Daemon(await http_for(names["owner"]))
    daemon = Daemon(await http_for(names["daemon"]))
    run_id = (await person.create(names["project"]))["run"]["id"]
    await daemon.claim(names["project"])
    await daemon.reach(run_id, "generation_complete")
    stopped = await person.call("interruptRun", run_id)
    assert (stopped["status"], stopped["phase"], stopped["checkpoint"]) == (
        "interrupted",
        "idle",
        "generation_complete",
    )
    resumed = await person.call("resumeRun", run_id)
    assert (resumed["status"], resumed["checkpoint"]) == ("backlog", "generation_complete")
    claimed = await daemon.claim(names["project"])
    assert (claimed["phase"], claimed["checkpoint"]) == ("testing", "generation_complete")
    failed = await daemon.call("failRun", run_id, ', reason: "tests kept failing"')
    assert (failed["status"], failed["phase"]) == ("errored", "testing")
    rerun = await person.call("requestRerun", run_id)
    assert (rerun["status"], rerun["phase"], rerun["checkpoint"]) == ("backlog", "idle", "none")


async def test_a_subscriber_never_sees_another_owners_runs(
    names: dict[str, Any], ws_for: OpenWS, http_for: OpenHTTP
) -> None:
    other = {"owner": owner(f"x{secrets.token_hex(4)}")}
    watcher = await ws_for(other["owner"], "graphql-transport-ws")
    await watcher.subscribe(RUN_EVENTS, {})
    await Daemon(await http_for(names["owner"])).create(names["project"])
    mine = await Daemon(await http_for(other["owner"])).create("mine")
    received = [e["runEvents"] for e in await watcher.collect(1)]
    assert [e["runId"] for e in received] == [mine["run"]["id"]]


@pytest.fixture
async def two_servers(database_url: str, tmp_path: Path) -> AsyncIterator[Cluster]:
    """Two `baton serve` processes on the test database, leases of one second."""
    env = {"BATON_DATABASE_URL": database_url, "BATON_RUN_LEASE_SECONDS": "1"}
    cluster = await asyncio.to_thread(Cluster.start, 2, env, tmp_path)
    yield cluster
    await asyncio.to_thread(cluster.stop)


async def test_two_processes_sweeping_record_one_host_offline_per_run_and_another_daemon_claims(
    database_url: str, two_servers: Cluster, names: dict[str, Any]
) -> None:
    person = Daemon(HTTPClient(two_servers.urls[0], await mint(database_url, names["owner"])))
    first = Daemon(HTTPClient(two_servers.urls[1], await mint(database_url, names["daemon"])))
    second_agent = agent(f"{names['owner'].handle}/second")
    second = Daemon(HTTPClient(two_servers.urls[0], await mint(database_url, second_agent)))
    ids = [(await person.create(names["project"]))["run"]["id"] for _ in range(5)]
    for _ in ids:
        await first.claim(names["project"])
    # No heartbeats: every lease runs out and both processes sweep. Wait for that to show.
    query = """query($p: String!) { runs(filter: {project: $p}) { edges { node { id status
             events { edges { node { event actor } } } } } } }"""
    for _ in range(300):
        listing = await person.http(query, p=names["project"])
        if all(e["node"]["status"] == "waiting_for_agent" for e in listing["runs"]["edges"]):
            break
        await asyncio.sleep(0.1)
    assert len(listing["runs"]["edges"]) == len(ids)
    for edge in listing["runs"]["edges"]:
        node = edge["node"]
        assert node["status"] == "waiting_for_agent", node
        offline = [
            e["node"] for e in node["events"]["edges"] if e["node"]["event"] == "HOST_OFFLINE"
        ]
        assert offline == [{"event": "HOST_OFFLINE", "actor": "system"}], node
    reclaimed = {(await second.claim(names["project"]))["id"] for _ in ids}
    assert reclaimed == set(ids)
    for client in (person, first, second):
        await client.http.aclose()
