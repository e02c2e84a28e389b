"""graphql-sse's own npm client (2.6.1, distinct connections mode, on the machine's Node)
against a running `baton serve`: it subscribes, replays from a cursor, receives live events,
gets queries and refusals as results, and sees a revoked token's stream end."""

from __future__ import annotations

import asyncio
import json
import os
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from baton.access.gate import GateDecision
from baton.access.tokens import create_token
from tests.conftest import TUNED, LiveServer, TunedServer
from tests.helpers import World
from tests.live.client import TASK_EVENTS, HTTPClient, hand_off_via, move_mutation
from tests.proxy import DatabaseProxy
from tests.sse.test_revocation import SLACK, revoke

CHECK = float(TUNED["BATON_TOKEN_CHECK_SECONDS"])


class NodeClient:
    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process

    async def line(self, wait: float = 20) -> dict[str, Any]:
        assert self.process.stdout is not None
        raw = await asyncio.wait_for(self.process.stdout.readline(), wait)
        assert raw, "the client exited without a word"
        return json.loads(raw)  # type: ignore[no-any-return]

    async def results(self, count: int) -> list[dict[str, Any]]:
        out = []
        for _ in range(count):
            line = await self.line()
            assert "next" in line and "errors" not in line["next"], line
            out.append(line["next"]["data"])
        return out


@asynccontextmanager
async def run_client(
    script: Path, server: LiveServer, token: str, query: str, variables: dict[str, Any]
) -> AsyncIterator[NodeClient]:
    process = await asyncio.create_subprocess_exec(
        "node",
        str(script),
        f"{server.url}/graphql",
        token,
        query,
        json.dumps(variables),
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        yield NodeClient(process)
    finally:
        if process.returncode is None:
            process.kill()
        await process.wait()


async def test_the_npm_client_replays_from_a_cursor_then_receives_live_events(
    live_server: LiveServer, world: World, graphql_sse_client: Path
) -> None:
    await world.decide(GateDecision.ALLOW)
    requester = HTTPClient(live_server.url, await live_server.token(world.roles["requester"]))
    assignee = HTTPClient(live_server.url, await live_server.token(world.roles["assignee"]))
    try:
        handed = await hand_off_via(requester, world.project, world.requester, world.assignee)
        task_id = handed["task"]["id"]
        after = str(int(handed["events"][0]["id"]) - 1)
        token = await live_server.token(world.roles["requester"])
        variables = {"filter": {"taskIds": [task_id]}, "after": after}
        async with run_client(
            graphql_sse_client, live_server, token, TASK_EVENTS, variables
        ) as client:
            replayed = [r["taskEvents"] for r in await client.results(2)]
            accepted = await assignee(move_mutation("acceptTask"), id=task_id)
            assert accepted["acceptTask"]["__typename"] == "MoveSuccess"
            live = [r["taskEvents"] for r in await client.results(1)]
    finally:
        await requester.aclose()
        await assignee.aclose()
    assert [e["toState"] for e in replayed + live] == ["requested", "routed", "accepted"]
    assert [e["id"] for e in replayed] == [e["id"] for e in handed["events"]]
    assert live[0]["id"] == accepted["acceptTask"]["events"][0]["id"]


async def test_the_npm_client_gets_a_query_as_one_result_then_completes(
    live_server: LiveServer, world: World, graphql_sse_client: Path
) -> None:
    token = await live_server.token(world.roles["requester"])
    async with run_client(
        graphql_sse_client, live_server, token, "{ viewer { handle } }", {}
    ) as client:
        assert await client.line() == {"next": {"data": {"viewer": {"handle": world.requester}}}}
        assert await client.line() == {"complete": True}


async def test_the_npm_client_gets_a_refused_subscription_as_errors_at_once(
    live_server: LiveServer, world: World, graphql_sse_client: Path
) -> None:
    """In the stream, as the protocol requires: the client reports the errors and completes,
    instead of retrying an HTTP error."""
    token = await live_server.token(world.roles["requester"])
    async with run_client(
        graphql_sse_client, live_server, token, "subscription { taskEvents { nope } }", {}
    ) as client:
        refused = await client.line(wait=10)
        assert await client.line() == {"complete": True}
    assert "nope" in refused["next"]["errors"][0]["message"]
    assert refused["next"]["errors"][0]["extensions"]["code"] == "invalid_input"


async def test_a_revoked_token_ends_the_npm_clients_stream(
    tuned_server: TunedServer, world: World, graphql_sse_client: Path
) -> None:
    await world.decide(GateDecision.ALLOW)
    token = await create_token(tuned_server.db, world.roles["requester"])
    requester = HTTPClient(tuned_server.url, token)
    try:
        handed = await hand_off_via(requester, world.project, world.requester, world.assignee)
    finally:
        await requester.aclose()
    variables = {"filter": {"projects": [world.project]}, "after": handed["events"][0]["id"]}
    async with run_client(
        graphql_sse_client, tuned_server, token, TASK_EVENTS, variables
    ) as client:
        await client.results(1)  # the replayed `routed`: the stream is open
        await revoke(tuned_server, token)
        ended = await client.line(wait=CHECK + SLACK)
        assert await client.line() == {"complete": True}
    assert ended["next"]["errors"][0]["extensions"]["code"] == "unauthenticated"


README = Path(__file__).resolve().parents[2] / "README.md"
README_SCRIPT = re.compile(r"```js\n(// follow\.mjs.*?)```", re.S)


async def test_the_readmes_javascript_client_replays_follows_and_resumes_after_a_cut(
    live_server: LiveServer, world: World, graphql_sse_client: Path
) -> None:
    """The README's graphql-sse example, run as written on Node (only its URL pointed at this
    server, through a proxy the test can cut): it replays, follows live events and, after the
    connection is cut, resubscribes from the newest id it saw, with nothing missed or shown
    twice."""
    found = README_SCRIPT.search(README.read_text())
    assert found is not None, "the README's follow.mjs example is missing"
    with DatabaseProxy(live_server.url) as proxy:  # any TCP upstream: here the server
        source = found[1].replace("http://127.0.0.1:8000", f"http://127.0.0.1:{proxy.port}")
        assert source != found[1]
        script = graphql_sse_client.with_name("follow.mjs")
        script.write_text(source)
        await world.decide(GateDecision.ALLOW)
        token = await live_server.token(world.roles["requester"])
        requester = HTTPClient(live_server.url, token)
        assignee = HTTPClient(live_server.url, await live_server.token(world.roles["assignee"]))
        process = await asyncio.create_subprocess_exec(
            "node",
            str(script),
            env={**os.environ, "TOKEN": token},
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        assert process.stdout is not None and process.stderr is not None
        try:
            handed = await hand_off_via(requester, world.project, world.requester, world.assignee)
            task_id = handed["task"]["id"]
            seen: list[dict[str, Any]] = []

            async def until(state: str) -> None:
                assert process.stdout is not None
                while not any(e["taskId"] == task_id and e["toState"] == state for e in seen):
                    line = await asyncio.wait_for(process.stdout.readline(), 30)
                    assert line, "the script exited"
                    seen.append(json.loads(line))

            await until("routed")  # replayed from "0", then live
            proxy.cut()
            proxy.restore()
            cut = await asyncio.wait_for(process.stderr.readline(), 30)
            assert b"resuming after" in cut
            accepted = await assignee(move_mutation("acceptTask"), id=task_id)
            assert accepted["acceptTask"]["__typename"] == "MoveSuccess"
            await until("accepted")
        finally:
            await requester.aclose()
            await assignee.aclose()
            if process.returncode is None:
                process.kill()
            await process.wait()
    ids = [int(e["id"]) for e in seen]
    assert ids == sorted(set(ids)), "an event was shown twice or out of order"
    mine = [e["toState"] for e in seen if e["taskId"] == task_id]
    assert mine == ["requested", "routed", "accepted"]
