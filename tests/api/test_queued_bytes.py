"""Answers nobody reads hold a bounded number of bytes, against a real `baton serve`.

`server` allows 16 MiB of unsent bytes per token and 48 MiB in all
(`BATON_MAX_QUEUED_BYTES_PER_TOKEN`, `BATON_MAX_QUEUED_BYTES`); `small_server` 8 MiB in all.
The stuck clients are plain sockets with a 4 KB receive buffer that send their requests and
never read: the kernel takes about 3 MB of each connection's answers on loopback, the rest
waits in the server, which keeps a partly sent answer whole (uvloop), and so counts it whole in
`baton_queued_bytes`. The fat answer is four pages of 100 tasks with packets near the schema's
bounds: about 14 MB, under the engine's 16 MiB response budget, so one of them fits in a
token's budget and a second does not.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from baton.store.db import Database
from tests.conftest import LiveServer
from tests.fat_events import (
    CUT,
    MIB,
    PACKET,
    REFUSED,
    BudgetServer,
    budget_server,
    gone,
    metric,
    released,
)
from tests.helpers import World
from tests.live.big_events import big_tasks, until, until_async
from tests.mcp.conftest import call, open_session

PER_TOKEN = 16 * MIB
LIMIT = 48 * MIB
SMALL_LIMIT = 8 * MIB
GRAPHIQL_SCRIPT = "/graphiql/graphiql.min.js"  # 3.5 MB, served without a token


@pytest.fixture(scope="module")
def server(
    database_url: str, db: Database, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[BudgetServer]:
    yield from budget_server(
        database_url,
        db,
        tmp_path_factory,
        max_queued_bytes_per_token=PER_TOKEN,
        max_queued_bytes=LIMIT,
    )


@pytest.fixture(scope="module")
def small_server(
    database_url: str, db: Database, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[BudgetServer]:
    yield from budget_server(database_url, db, tmp_path_factory, max_queued_bytes=SMALL_LIMIT)


def fat_answer(project: str, pages: int = 4) -> str:
    page = (
        f'tasks(first: 100, filter: {{project: "{project}"}}) {{ edges {{ node {{ {PACKET} }} }} }}'
    )
    return "{ " + " ".join(f"a{n}: {page}" for n in range(pages)) + " }"


async def queued(server: BudgetServer) -> float:
    return await metric(server.url, server.metrics_token, "baton_queued_bytes")


def stuck(
    server: LiveServer, method: str, path: str, token: str | None, body: bytes, times: int = 1
) -> Any:
    """A socket that sent a request (`times` of it, pipelined) and will read nothing until
    told to."""
    host, port = server.url.removeprefix("http://").split(":")
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect((host, int(port)))
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host}:{port}"]
    if token is not None:
        lines.append(f"Authorization: Bearer {token}")
    if body:
        lines += ["Content-Type: application/json", f"Content-Length: {len(body)}"]
    sock.sendall(("\r\n".join([*lines, "", ""]).encode() + body) * times)
    return sock


def answered(sock: socket.socket) -> bool:
    try:
        return len(sock.recv(12, socket.MSG_PEEK | socket.MSG_DONTWAIT)) == 12
    except BlockingIOError:
        return False


async def status_of(sock: socket.socket) -> int:
    """The status of the answer on `sock`, peeked at once it begins (nothing is read)."""
    await until(lambda: answered(sock), 60, "the server answers")
    return int(sock.recv(12, socket.MSG_PEEK)[9:12])


def read_small_answer(sock: socket.socket) -> tuple[dict[str, str], Any]:
    """A whole small answer: its headers and its JSON body."""
    sock.settimeout(10)
    raw = b""
    while b"\r\n\r\n" not in raw:
        raw += sock.recv(4096)
    head, _, body = raw.partition(b"\r\n\r\n")
    headers = dict(
        (name.strip().lower(), value.strip())
        for name, _, value in (line.partition(":") for line in head.decode().split("\r\n")[1:])
    )
    while len(body) < int(headers["content-length"]):
        body += sock.recv(4096)
    return headers, json.loads(body)


async def fill_the_token(server: BudgetServer, token: str, project: str) -> list[socket.socket]:
    """Stuck connections asking for the fat answer, one at a time, until one is refused
    (the last of the list); every one before it was answered in full."""
    body = json.dumps({"query": fat_answer(project)}).encode()
    socks: list[socket.socket] = []
    try:
        for _ in range(6):
            socks.append(stuck(server, "POST", "/graphql", token, body))
            status = await status_of(socks[-1])
            if status != 200:
                assert status == 429, status
                assert len(socks) >= 2, "the first answer alone was refused"
                return socks
        raise AssertionError("six answers of about 14 MB each fit in 16 MiB")
    except BaseException:
        for sock in socks:
            sock.close()
        raise


async def test_unread_answers_fill_their_token_s_budget_the_next_is_refused_another_token_served(
    server: BudgetServer, world: World
) -> None:
    await big_tasks(world, 100)
    token = await server.token(world.roles["requester"])
    other = await server.token(world.roles["assignee"])
    socks = await fill_the_token(server, token, world.project)
    try:
        held = await queued(server)
        # What waits for the stuck ones is counted, within the token's budget.
        assert 13 * MIB < held <= PER_TOKEN, held  # the one answer, whole
        headers, refusal = read_small_answer(socks[-1])
        assert headers["retry-after"].isdigit()
        assert headers["content-type"].startswith("application/json")
        [error] = refusal["errors"]
        assert error["extensions"]["code"] == "too_much_unread", error
        # Another token is served in full, at once.
        auth = {"Authorization": f"Bearer {other}"}
        async with httpx.AsyncClient(base_url=server.url, headers=auth, timeout=60) as client:
            response = await client.post("/graphql", json={"query": fat_answer(world.project)})
        assert response.status_code == 200
        body = response.json()
        assert "errors" not in body and len(body["data"]["a3"]["edges"]) == 100
        assert len(response.content) > 13 * MIB
        assert await metric(server.url, server.metrics_token, REFUSED.format("token"))
    finally:
        for sock in socks:
            sock.close()
    await released(server.url, server.metrics_token)


async def test_the_bytes_of_a_stuck_client_are_released_when_it_goes_away(
    server: BudgetServer, world: World
) -> None:
    """The ledger follows the connections: one stuck answer counts, then nothing once its
    client has gone, without the server waiting for it to read."""
    await big_tasks(world, 100)
    token = await server.token(world.roles["requester"])
    body = json.dumps({"query": fat_answer(world.project)}).encode()
    sock = stuck(server, "POST", "/graphql", token, body)
    try:
        assert await status_of(sock) == 200

        async def counted() -> bool:
            return await queued(server) > 13 * MIB  # the answer, whole

        await until_async(counted, 10, "the unsent answer is counted")
    finally:
        sock.close()
    await released(server.url, server.metrics_token)


async def test_a_mutation_of_a_token_without_room_is_refused_before_it_runs(
    server: BudgetServer, world: World
) -> None:
    """A request runs only if its token has room for the largest answer (the engine's 16 MiB):
    with 14 MB of its answers unread, the token's hand-off is refused (429) and no task is
    made; no answer is refused after its request changed something."""
    await big_tasks(world, 100)
    token = await server.token(world.roles["requester"])
    socks = await fill_the_token(server, token, world.project)
    try:
        auth = {"Authorization": f"Bearer {token}"}
        async with httpx.AsyncClient(base_url=server.url, headers=auth, timeout=30) as client:
            response = await client.post("/graphql", json={"query": hand_off(world, "refused")})
    finally:
        for sock in socks:
            sock.close()
    assert response.status_code == 429, response.text
    assert response.headers["retry-after"].isdigit()
    assert response.json()["errors"][0]["extensions"]["code"] == "too_much_unread"
    assert not await made(server, world, "refused")
    await released(server.url, server.metrics_token)
    # Once its clients have gone, the same request runs.
    async with httpx.AsyncClient(base_url=server.url, headers=auth, timeout=30) as client:
        again = await client.post("/graphql", json={"query": hand_off(world, "refused")})
    assert again.json()["data"]["handOff"]["__typename"] == "HandOffSuccess", again.text
    assert await made(server, world, "refused")


async def test_a_token_whose_graphql_answers_wait_unread_is_refused_on_mcp_too(
    server: BudgetServer, world: World
) -> None:
    """One ledger for every door: a GraphQL answer its client does not read holds about
    14 MB of the token's 16 MiB, and the same token's MCP `handOff` is then refused before it
    runs, in MCP's own envelope (a JSON-RPC error carrying Baton's code), making no task; while
    another token's MCP call for its 100 tasks (about 7 MB) is answered."""
    await big_tasks(world, 100)
    token = await server.token(world.roles["requester"])
    other = await server.token(world.roles["assignee"])
    arguments = {
        "project": world.project,
        "requester": world.requester,
        "assignee": world.assignee,
        "packet": {"task": "never made", "deliverableType": "doc", "acceptanceCriteria": ["x"]},
        "id": "refused-on-mcp",
    }
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        sessions = {t: await open_session(client, t) for t in (token, other)}
        socks = await fill_the_token(server, token, world.project)
        try:
            refused = await call(
                client, token, sessions[token], "tools/call", name="handOff", arguments=arguments
            )
            served = await call(
                client, other, sessions[other], "tools/call", name="tasks", arguments={"first": 100}
            )
        finally:
            for sock in socks:
                sock.close()
    assert refused.status_code == 429, refused.text
    assert refused.headers["retry-after"].isdigit()
    error = refused.json()["error"]
    assert error["data"]["code"] == "too_much_unread", error
    assert not await made(server, world, "refused-on-mcp")
    assert served.status_code == 200, served.text[:500]
    assert not served.json()["result"].get("isError"), served.text[:500]
    assert len(served.content) > 6 * MIB
    await released(server.url, server.metrics_token)
    # Once its clients have gone, the same call runs.
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        again = await call(
            client, token, sessions[token], "tools/call", name="handOff", arguments=arguments
        )
    assert again.status_code == 200 and not again.json()["result"].get("isError"), again.text
    assert await made(server, world, "refused-on-mcp")


def hand_off(world: World, client_id: str) -> str:
    return f"""mutation {{ handOff(input: {{project: "{world.project}",
      requester: "{world.requester}", assignee: "{world.assignee}", id: "{client_id}",
      packet: {{task: "never made", deliverableType: doc, acceptanceCriteria: ["x"]}}}})
      {{ __typename }} }}"""


async def made(server: BudgetServer, world: World, client_id: str) -> bool:
    task_id = f"{world.req_owner}_{client_id}"
    return bool(await server.db.fetchval("SELECT count(*) FROM tasks WHERE id = $1", task_id))


async def test_past_the_process_budget_an_answer_larger_than_every_holder_is_refused(
    server: BudgetServer, world: World
) -> None:
    """Four tokens each leave an answer of about 10.6 MB unread (three pages), 42 MB of the
    process's 48 MiB; a fifth token's fat answer (14 MB) does not fit, and no connection holds
    more than it would need: it is refused with 503 and Retry-After, and nothing is reset."""
    await big_tasks(world, 100)
    process = CUT.format("process")
    cuts = await metric(server.url, server.metrics_token, process)
    three_pages = json.dumps({"query": fat_answer(world.project, pages=3)}).encode()
    socks: list[socket.socket] = []
    try:
        for _ in range(4):
            token = await server.token(world.roles["requester"])
            socks.append(stuck(server, "POST", "/graphql", token, three_pages))
            assert await status_of(socks[-1]) == 200
        token = await server.token(world.roles["requester"])
        body = json.dumps({"query": fat_answer(world.project)}).encode()
        socks.append(stuck(server, "POST", "/graphql", token, body))
        assert await status_of(socks[-1]) == 503
        headers, refusal = read_small_answer(socks[-1])
        assert headers["retry-after"].isdigit()
        assert refusal["errors"][0]["extensions"]["code"] == "unavailable"
        assert not any(gone(sock) for sock in socks[:4])
        assert await metric(server.url, server.metrics_token, process) == cuts
        assert 40 * MIB < await queued(server) <= LIMIT
    finally:
        for sock in socks:
            sock.close()
    await released(server.url, server.metrics_token)


async def test_unauthenticated_downloads_count_against_the_process_the_fullest_gives_way(
    small_server: BudgetServer,
) -> None:
    """GraphiQL's script (3.5 MB, no token needed) asked for three times on one connection that
    never reads: the answers the kernel cannot take wait in the server, the last one built
    waits behind them, about 7 MB in all whatever the kernel took, counted against the process
    (8 MiB here). A reader's download then does not fit: the stuck connection, holding more
    than the newcomer needs, is reset to make room, and the reader gets the script whole."""
    process = CUT.format("process")
    cuts = await metric(small_server.url, small_server.metrics_token, process)
    sock = stuck(small_server, "GET", GRAPHIQL_SCRIPT, None, b"", times=3)
    try:

        async def two_answers_wait() -> bool:
            return await queued(small_server) > 6 * MIB

        await until_async(two_answers_wait, 20, "an answer waits behind another")
        async with httpx.AsyncClient(base_url=small_server.url, timeout=30) as client:
            response = await client.get(GRAPHIQL_SCRIPT)
        assert response.status_code == 200
        assert len(response.content) > 3 * MIB
        await until(lambda: gone(sock), 10, "the stuck connection is reset")
        assert await metric(small_server.url, small_server.metrics_token, process) > cuts
    finally:
        sock.close()
    await released(small_server.url, small_server.metrics_token)
