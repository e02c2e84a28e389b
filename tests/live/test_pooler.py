"""`baton serve` with BATON_DATABASE_URL on a real PgBouncer in transaction mode (four server
sessions for its pool of sixteen) and BATON_DATABASE_DIRECT_URL beside it for LISTEN and
migrations: the whole hand-off with a subscriber watching it live over WebSocket, a run claimed
and swept back when its lease runs out, and the webhook worker delivering to a real receiver.
Without a direct URL, and with one that is not direct, it stops at start with one line."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import pytest
from bench.pgbouncer import PgBouncer
from standardwebhooks.webhooks import Webhook
from starlette.applications import Starlette
from starlette.routing import Route

from baton.access.gate import GateDecision
from baton.protocol.handoff import MoveName
from baton.services.tasks import TaskService
from baton.store.db import Database
from tests.conftest import LiveServer, start_server, stop_server
from tests.helpers import RESULT_INPUT, World, agent, owner, result, uvicorn_serving
from tests.live.client import TASK_EVENTS, HTTPClient, WSClient, hand_off_via, move_mutation
from tests.pgbouncer import pgbouncer_in_front
from tests.webhooks.conftest import FAST, Receiver, create_endpoint, own_database

# A claimed run with no heartbeat is swept back within a few seconds.
POOLED = {**FAST, "BATON_RUN_LEASE_SECONDS": "1"}


@dataclass
class Pooled:
    """The database (direct), the PgBouncer in front of it, and `baton serve` through it."""

    direct_url: str
    bouncer: PgBouncer
    server: LiveServer

    @property
    def database(self) -> str:
        return urlsplit(self.direct_url).path.lstrip("/")

    @property
    def pooled_url(self) -> str:
        return self.bouncer.url(self.direct_url)


@pytest.fixture(scope="module")
async def database(server_url: str) -> AsyncIterator[tuple[str, Database]]:
    async with own_database(server_url) as found:
        yield found


@pytest.fixture(scope="module")
def bouncer(server_url: str) -> Iterator[PgBouncer]:
    with pgbouncer_in_front(server_url, pool_size=4) as bouncer:
        yield bouncer


@pytest.fixture(scope="module")
def pooled(
    database: tuple[str, Database], bouncer: PgBouncer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Pooled]:
    url, db = database
    log = tmp_path_factory.mktemp("pooled") / "serve.log"
    env = {
        "BATON_DATABASE_URL": bouncer.url(url),
        "BATON_DATABASE_DIRECT_URL": url,
        **POOLED,
    }
    address, process = start_server(env, log)
    yield Pooled(url, bouncer, LiveServer(address, db, process))
    stop_server(process)


@pytest.fixture
def world(database: tuple[str, Database]) -> World:
    """Gate rules and admin moves, on the same database directly."""
    return World(TaskService(database[1]))


@pytest.fixture
async def clients(pooled: Pooled) -> AsyncIterator[list[HTTPClient | WSClient]]:
    opened: list[HTTPClient | WSClient] = []
    yield opened
    for client in opened:
        if isinstance(client, HTTPClient):
            await client.aclose()
        else:
            await client.close()


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    receiver = Receiver()
    app = Starlette(routes=[Route("/{path:path}", receiver.handle, methods=["POST"])])
    async with uvicorn_serving(app, timeout_graceful_shutdown=1) as port:
        receiver.url = f"http://127.0.0.1:{port}"
        yield receiver


async def move(client: HTTPClient, name: str, task_id: str, extra: str = "", **v: Any) -> None:
    answer = (await client(move_mutation(name, extra), id=task_id, **v))[name]
    assert answer["__typename"] == "MoveSuccess", answer


async def test_a_whole_hand_off_through_the_pooler_reaches_a_subscriber_live(
    pooled: Pooled, world: World, clients: list[HTTPClient | WSClient]
) -> None:
    server = pooled.server
    before = pooled.bouncer.transactions(pooled.database)
    requester = HTTPClient(server.url, await server.token(agent(world.requester)))
    assignee = HTTPClient(server.url, await server.token(agent(world.assignee)))
    clients += [requester, assignee]
    await world.decide(GateDecision.ALLOW)
    handed = await hand_off_via(requester, world.project, world.requester, world.assignee)
    assert handed["__typename"] == "HandOffSuccess", handed
    task_id, created = handed["task"]["id"], handed["events"][0]["id"]

    ws = await WSClient.open(
        server.url, await server.token(agent(world.requester)), "graphql-transport-ws"
    )
    clients.append(ws)
    after = str(int(created) - 1)
    await ws.subscribe(TASK_EVENTS, {"filter": {"taskIds": [task_id]}, "after": after})
    # The replay arrives first, which also shows the stream is listening.
    assert [e["taskEvents"]["toState"] for e in await ws.collect(2)] == ["requested", "routed"]

    await move(assignee, "acceptTask", task_id)
    await move(assignee, "startTask", task_id)
    submitted = await assignee(
        """mutation($id: ID!, $result: ResultInput!) {
             submitResult(input: {id: $id, result: $result}) { __typename } }""",
        id=task_id,
        result=RESULT_INPUT,
    )
    assert submitted["submitResult"]["__typename"] == "MoveSuccess"

    live = [e["taskEvents"] for e in await ws.collect(4)]
    assert [(e["move"], e["toState"]) for e in live] == [
        ("ACCEPT", "accepted"),
        ("START", "working"),
        ("SUBMIT_RESULT", "verifying"),
        ("COMPLETE", "completed"),
    ]
    assert [e["task"]["version"] for e in live] == [3, 4, 5, 6]
    # Every one of them went through the pooler.
    assert pooled.bouncer.transactions(pooled.database) > before


RUN = "id status phase version"


async def test_a_run_is_claimed_and_swept_back_when_its_lease_runs_out(
    pooled: Pooled, clients: list[HTTPClient | WSClient]
) -> None:
    tag = os.urandom(4).hex()
    server = pooled.server
    person = HTTPClient(server.url, await server.token(owner(f"o{tag}")))
    daemon = HTTPClient(server.url, await server.token(agent(f"o{tag}/daemon")))
    clients += [person, daemon]
    created = await person(
        f"""mutation($p: String!) {{ createRun(input: {{project: $p, title: "Fix it"}}) {{
             __typename ... on RunMoveSuccess {{ run {{ {RUN} }} }} }} }}""",
        p=f"p{tag}",
    )
    run_id = created["createRun"]["run"]["id"]
    claim = f"""mutation($p: String) {{ claimRun(input: {{project: $p}}) {{ __typename
                 ... on RunMoveSuccess {{ run {{ {RUN} }} }} ... on Error {{ code }} }} }}"""
    claimed = (await daemon(claim, p=f"p{tag}"))["claimRun"]
    assert claimed["__typename"] == "RunMoveSuccess", claimed
    assert (claimed["run"]["id"], claimed["run"]["status"]) == (run_id, "in_progress")
    beat = await daemon(
        """mutation($id: ID!) { runHeartbeat(input: {id: $id}) { __typename } }""", id=run_id
    )
    assert beat["runHeartbeat"]["__typename"] == "RunHeartbeatSuccess"

    # No more heartbeats: the sweeper (through the pooler) moves it back for another daemon.
    deadline = time.monotonic() + 30
    status = "in_progress"
    while status == "in_progress" and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
        seen = await person("query($id: ID!) { run(id: $id) { status } }", id=run_id)
        status = seen["run"]["status"]
    assert status == "waiting_for_agent"
    again = (await daemon(claim, p=f"p{tag}"))["claimRun"]
    assert (again["run"]["id"], again["run"]["status"]) == (run_id, "in_progress")


async def test_the_webhook_worker_delivers_through_the_pooler(
    pooled: Pooled, world: World, receiver: Receiver
) -> None:
    server = pooled.server
    token = await server.token(owner(world.req_owner))
    made = await create_endpoint(server, token, receiver.at("/pooled"))
    assert made["__typename"] == "WebhookSecretSuccess", made

    task = await world.hand_off()  # created, routed
    task = await world.move(task, MoveName.ACCEPT)
    task = await world.move(task, MoveName.START)
    await world.move(task, MoveName.SUBMIT_RESULT, result=result())  # verifying, completed
    expected = await server.db.fetch(
        "SELECT id FROM task_events WHERE task_id = $1 ORDER BY id", task.id
    )
    messages = await receiver.wait_for("/pooled", len(expected))
    bodies = [Webhook(made["secret"]).verify(m.body, m.headers) for m in messages]
    assert [int(b["data"]["taskEvents"]["id"]) for b in bodies] == [r["id"] for r in expected]
    assert bodies[-1]["data"]["taskEvents"]["toState"] == "completed"


def serve_briefly(env: dict[str, str], command: str = "serve") -> subprocess.CompletedProcess[str]:
    """`baton serve` (or another command) expected to stop at start."""
    args = ["serve", "--port", "0"] if command == "serve" else [command]
    return subprocess.run(
        [sys.executable, "-m", "baton.cli", *args],
        env={**os.environ, "BATON_LOG_LEVEL": "warning", **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


async def test_serving_through_a_pooler_without_a_direct_url_stops_with_one_line(
    pooled: Pooled,
) -> None:
    done = await asyncio.to_thread(serve_briefly, {"BATON_DATABASE_URL": pooled.pooled_url})
    assert done.returncode == 2, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("baton: BATON_DATABASE_DIRECT_URL: unset, and BATON_DATABASE_URL")
    assert "pooler" in last


@pytest.mark.parametrize("which", ["through the pooler", "another database"])
async def test_a_direct_url_that_is_not_the_databases_own_session_is_refused(
    pooled: Pooled, server_url: str, which: str
) -> None:
    direct = pooled.pooled_url if which == "through the pooler" else server_url
    env = {"BATON_DATABASE_URL": pooled.pooled_url, "BATON_DATABASE_DIRECT_URL": direct}
    done = await asyncio.to_thread(serve_briefly, env, "migrate")
    assert done.returncode == 2, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("baton: BATON_DATABASE_DIRECT_URL: ")
    assert ("pooler" if which == "through the pooler" else "another database") in last
