"""The executor's answers and bounds, against a real `baton serve`.

What an attacker or a careless client can send: explicit nulls where a value is required,
mutations after one that nulls the response, arguments out of bounds, documents whose
validation would be quadratic or recurse too deep, introspection beside other fields, and
responses far larger than anyone should get. Each answers a typed error, never a 500, and the
server's memory stays bounded.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import connect

from baton.access.principals import Principal
from baton.engine.limits import DEFAULT_LIMITS
from baton.protocol.handoff import TaskState
from baton.services.tasks import TaskService
from tests.conftest import LiveServer, start_server, stop_server
from tests.helpers import World, agent, counting_statements

LIMITS = DEFAULT_LIMITS


@pytest.fixture
async def http(live_server: LiveServer) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=live_server.url, timeout=60) as client:
        yield client


async def post(
    http: httpx.AsyncClient,
    token: str,
    query: str,
    variables: dict[str, Any] | None = None,
) -> dict[str, Any]:
    response = await http.post(
        "/graphql",
        json={"query": query, "variables": variables},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


def codes(body: dict[str, Any]) -> list[str]:
    return [e["extensions"]["code"] for e in body.get("errors", ())]


# --- explicit nulls where a value is required: a field error with its path ------------------


async def test_a_null_variable_for_a_required_argument_is_a_field_error(
    live_server: LiveServer, http: httpx.AsyncClient
) -> None:
    token = await live_server.token(Principal.parse(f"n{secrets.token_hex(4)}"))
    query = "query($first: Int) { tasks(first: $first) { totalCount } }"
    body = await post(http, token, query, {"first": None})
    assert body["data"] is None  # `tasks` is non-null: the null reaches the root
    [error] = body["errors"]
    assert error["path"] == ["tasks"]
    assert error["extensions"]["code"] == "invalid_input"
    assert "non-null type 'Int!'" in error["message"]


async def test_a_null_directive_condition_nulls_the_object_it_sits_in(
    live_server: LiveServer, http: httpx.AsyncClient, world: World
) -> None:
    await world.task_in(TaskState.working)
    token = await live_server.token(world.roles["requester_owner"])
    query = """query($s: Boolean = false) { viewer { handle }
        tasks(first: 5) { edges { node { id state @skip(if: $s) } } } }"""
    body = await post(http, token, query, {"s": None})
    assert body["data"] is None
    [error] = body["errors"]
    # graphql-core's answer: the error at the object whose fields could not be collected
    assert error["path"] == ["tasks", "edges", 0, "node"]
    assert error["extensions"]["code"] == "invalid_input"
    # the same document with a value runs
    ok = await post(http, token, query, {"s": True})
    assert ok["data"]["tasks"]["edges"][0]["node"] == {
        "id": ok["data"]["tasks"]["edges"][0]["node"]["id"]
    }


async def test_a_null_variable_is_a_field_error_over_websocket(
    live_server: LiveServer, world: World
) -> None:
    token = await live_server.token(world.roles["requester_owner"])
    url = live_server.url.replace("http://", "ws://") + "/graphql"
    async with connect(url, subprotocols=["graphql-transport-ws"]) as ws:  # type: ignore[list-item]
        await ws.send(
            json.dumps({"type": "connection_init", "payload": {"authorization": f"Bearer {token}"}})
        )
        assert json.loads(await ws.recv())["type"] == "connection_ack"
        query = """query($n: Int) { tasks(first: 1) { edges { node { dependents(first: $n) {
            id } } } } totalTasks: tasks { totalCount } }"""
        await world.task_in(TaskState.routed)
        payload = {"query": query, "variables": {"n": None}}
        await ws.send(json.dumps({"id": "1", "type": "subscribe", "payload": payload}))
        message = json.loads(await ws.recv())
        assert message["type"] == "next", message
        [error] = message["payload"]["errors"]
        assert error["extensions"]["code"] == "invalid_input"
        assert error["path"][:3] == ["tasks", "edges", 0]
        assert message["payload"]["data"] is None
        assert json.loads(await ws.recv())["type"] == "complete"


# --- mutations stop at the first that nulls the response ------------------------------------


async def test_mutations_after_one_that_nulls_the_response_do_not_run(
    live_server: LiveServer, http: httpx.AsyncClient, service: TaskService, world: World
) -> None:
    task = await world.task_in(TaskState.routed)
    token = await live_server.token(world.roles["assignee"])
    query = """mutation($id: ID!, $n: Int) {
      a: acceptTask(input: {id: $id}) { __typename }
      bad: startTask(input: {id: $id}) { ... on MoveSuccess { task { dependents(first: $n) {
        id } } } }
      c: pauseTask(input: {id: $id, waitingOn: human}) { __typename } }"""
    body = await post(http, token, query, {"id": task.id, "n": None})
    assert body["data"] is None
    assert [e["path"][0] for e in body["errors"]] == ["bad"]
    after = await service.get(world.roles["admin"], task.id)
    # `a` and `bad` ran (the client is told `bad` failed after its move); `c` did not
    assert after.state is TaskState.working
    assert after.waiting_on is None


async def test_a_nullable_failure_lets_the_next_mutation_run(
    live_server: LiveServer, http: httpx.AsyncClient, service: TaskService, world: World
) -> None:
    """Only a null that reaches the root stops the rest (a failed union member does not)."""
    task = await world.task_in(TaskState.routed)
    token = await live_server.token(world.roles["assignee"])
    query = """mutation($id: ID!) {
      a: startTask(input: {id: $id}) { ... on Error { code } }
      b: acceptTask(input: {id: $id}) { ... on MoveSuccess { task { state } } } }"""
    body = await post(http, token, query, {"id": task.id})
    assert body["data"] == {"a": {"code": "invalid_state"}, "b": {"task": {"state": "accepted"}}}
    assert (await service.get(world.roles["admin"], task.id)).state is TaskState.accepted


# --- one rule for arguments: out of bounds refuses the whole request before it runs ---------


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("{ tasks(first: 101) { totalCount } }", "first"),
        ('{ taskGraph(ids: ["x"], depth: 99) { nodes { id } } }', "depth"),
        (
            '{ tasks(first: 1) { edges { node { events(after: "nope") { edges { cursor } } } } } }',
            "after",
        ),
        ('{ tasks(after: "not-a-cursor") { totalCount } }', "after"),
        (
            '{ runs(first: 1) { edges { node { events(after: "-1") { edges { cursor } } } } } }',
            "after",
        ),
        (
            "{ taskGraph(ids: ["
            + ",".join(f'"t{i}"' for i in range(101))
            + "]) { nodes { id } } }",
            "ids",
        ),
        ('{ tasks(filter: {updatedAfter: "9999-12-31T23:59:59-14:00"}) { totalCount } }', "filter"),
    ],
)
async def test_arguments_out_of_bounds_refuse_the_request_before_it_runs(
    live_server: LiveServer, http: httpx.AsyncClient, query: str, field: str
) -> None:
    token = await live_server.token(Principal.parse(f"b{secrets.token_hex(4)}"))
    body = await post(http, token, query)
    assert "data" not in body
    [error] = body["errors"]
    assert error["extensions"] == {"code": "invalid_input", "field": field}
    assert "path" not in error


async def test_a_mutation_with_a_bad_argument_in_its_selection_changes_nothing(
    live_server: LiveServer, http: httpx.AsyncClient, service: TaskService, world: World
) -> None:
    task = await world.task_in(TaskState.routed)
    token = await live_server.token(world.roles["assignee"])
    query = """mutation($id: ID!) { acceptTask(input: {id: $id}) { ... on MoveSuccess {
        task { events(after: "nope") { edges { cursor } } } } } }"""
    body = await post(http, token, query, {"id": task.id})
    assert "data" not in body and codes(body) == ["invalid_input"]
    assert (await service.get(world.roles["admin"], task.id)).version == task.version


# --- documents that would cost validation too much -------------------------------------------


async def test_a_name_selected_hundreds_of_times_is_refused_before_validation(
    live_server: LiveServer, http: httpx.AsyncClient
) -> None:
    token = await live_server.token(Principal.parse(f"v{secrets.token_hex(4)}"))
    body = await post(http, token, "{ " + "viewer { handle } " * 450 + "}")
    assert "data" not in body
    [error] = body["errors"]
    assert "`viewer` is selected 450 times" in error["message"]
    # merged through fragments too: each fragment selects it a few times
    fragments = " ".join(f"fragment F{i} on Query {{ viewer {{ handle }} }}" for i in range(40))
    spreads = " ".join(f"...F{i}" for i in range(40))
    body = await post(http, token, f"{{ {spreads} }} {fragments}")
    assert "data" not in body and "`viewer` is selected 40 times" in body["errors"][0]["message"]
    # as many copies as the bound allows run
    allowed = "{ " + "viewer { handle } " * LIMITS.max_same_name + "}"
    assert (await post(http, token, allowed))["data"]["viewer"]["handle"]


@pytest.mark.parametrize(
    "document",
    [
        # a chain of 600 fragment spreads
        "{ ...F0 } "
        + " ".join(f"fragment F{i} on Query {{ ...F{i + 1} }}" for i in range(599))
        + " fragment F599 on Query { viewer { handle } }",
        # a cycle of 300 fragments
        "{ ...C0 } "
        + " ".join(f"fragment C{i} on Query {{ ...C{(i + 1) % 300} }}" for i in range(300)),
        # inline fragments nested 1,500 deep
        "{ " + "... on Query { " * 1500 + "viewer { handle }" + " }" * 1500 + " }",
        # fields nested past the parser's recursion
        "{ " + "viewer { " * 2400 + "handle" + " }" * 2400 + " }",
    ],
    ids=["fragment-chain", "fragment-cycle", "inline-nesting", "field-nesting"],
)
async def test_deeply_nested_documents_are_refused_with_a_typed_error(
    live_server: LiveServer, http: httpx.AsyncClient, document: str
) -> None:
    token = await live_server.token(Principal.parse(f"d{secrets.token_hex(4)}"))
    body = await post(http, token, document)
    assert "data" not in body
    assert codes(body) and set(codes(body)) == {"invalid_input"}


async def test_a_comment_does_not_make_a_document_new(
    live_server: LiveServer, http: httpx.AsyncClient
) -> None:
    """Two spellings of one refused document are one entry: the second is answered alike."""
    token = await live_server.token(Principal.parse(f"c{secrets.token_hex(4)}"))
    base = "{ " + "viewer { handle } " * 100 + "}"
    first = await post(http, token, base)
    second = await post(http, token, base + " # a comment\n")
    assert first == second and "data" not in first


# --- introspection is inside the budget ----------------------------------------------------


async def test_introspection_beside_other_fields_runs_on_the_engine_within_the_budget(
    live_server: LiveServer, http: httpx.AsyncClient, world: World
) -> None:
    await world.task_in(TaskState.working)
    token = await live_server.token(world.roles["requester_owner"])
    mixed = """{ __type(name: "Task") { name fields { name } }
        tasks(first: 3) { edges { node { id dependents { id } } } } __typename }"""
    body = await post(http, token, mixed)
    assert "errors" not in body
    assert body["data"]["__type"]["name"] == "Task"
    assert {"id", "state"} <= {f["name"] for f in body["data"]["__type"]["fields"]}
    assert list(body["data"]) == ["__type", "tasks", "__typename"]  # document order
    # too costly as a whole: the introspection's values count with the rest
    heavy = """{ __schema { types { name fields { name args { name } } } }
        tasks(first: 100) { edges { node { events(first: 100) { edges { node { id kind
        move actor task { id } } } } } } } }"""
    body = await post(http, token, heavy)
    assert "data" not in body
    [error] = body["errors"]
    assert error["extensions"]["budget"] == LIMITS.max_cost


async def test_introspection_beside_a_list_is_batched_like_the_list_alone(
    service: TaskService, world: World
) -> None:
    from tests.helpers import execute

    for _ in range(3):
        await world.task_in(TaskState.working)
    principal = world.roles["requester_owner"]
    plain = (
        "{ tasks(first: 10) { edges { node { id dependents { id } events { edges { cursor } } } } }"
        " }"
    )
    with counting_statements() as counted:
        await execute(service, principal, plain)
        alone = counted()
    mixed = plain[:-1] + " __schema { queryType { name } } }"
    with counting_statements() as counted:
        data = await execute(service, principal, mixed)
        beside = counted()
    assert data["__schema"] == {"queryType": {"name": "Query"}}
    assert beside == alone == 3  # the listing, then one look-up per nested list


# --- responses and loads bounded in bytes ---------------------------------------------------

BIG = "x" * 490


def maximal_checkpoint(n: int) -> dict[str, Any]:
    """A checkpoint at every bound of the task schema (about 60 KB)."""
    return {
        "progress": f"{n} " + "p" * 1990,
        "decisions": [BIG] * 20,
        "files_touched": [f"src/{'f' * 280}/{i}.py" for i in range(100)],
        "next_steps": [BIG] * 20,
        "open_questions": [BIG] * 20,
    }


@pytest.fixture(scope="module")
def fresh_server(
    database_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, int, Path]]:
    """A server of its own, so its memory is this module's alone: (url, pid, log)."""
    log = tmp_path_factory.mktemp("bounded") / "serve.log"
    url, process = start_server({"BATON_DATABASE_URL": database_url}, log)
    yield url, process.pid, log
    stop_server(process)


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


async def test_a_response_that_would_be_hundreds_of_mib_is_refused_and_memory_stays_bounded(
    fresh_server: tuple[str, int, Path], live_server: LiveServer, service: TaskService, world: World
) -> None:
    url, pid, _ = fresh_server
    task = await world.task_in(TaskState.working)
    for n in range(100):
        await service.save_checkpoint(agent(world.assignee), task.id, maximal_checkpoint(n))
    token = await live_server.token(world.roles["requester_owner"])
    aliases = " ".join(
        f'a{i}: task(id: "{task.id}") {{ events(first: 100) {{ edges {{ node {{ task {{ '
        "protocolObject latestCheckpoint { decisions } } } } } }"
        for i in range(20)
    )
    async with httpx.AsyncClient(base_url=url, timeout=120) as http:
        before = peak_rss_mib(pid)
        answers = await asyncio.gather(*(post(http, token, f"{{ {aliases} }}") for _ in range(3)))
        grown = peak_rss_mib(pid) - before
    for body in answers:
        assert "too_expensive" in codes(body), codes(body)
        assert len(json.dumps(body)) < LIMITS.max_response_bytes
    # Three at once took 1.85 GB before the byte budgets; now each holds at most its budgets
    # of JSON (loaded and answered) with Python's overhead on them.
    assert grown < 600, f"the server grew by {grown:.0f} MiB"


async def test_a_response_within_its_byte_budget_is_answered_whole(
    live_server: LiveServer, http: httpx.AsyncClient, service: TaskService, world: World
) -> None:
    task = await world.task_in(TaskState.working)
    for n in range(3):
        await service.save_checkpoint(agent(world.assignee), task.id, maximal_checkpoint(n))
    token = await live_server.token(world.roles["requester_owner"])
    body = await post(
        http,
        token,
        """query($id: ID!) { task(id: $id) { events { edges { node { task {
            protocolObject } } } } } }""",
        {"id": task.id},
    )
    assert "errors" not in body
    assert len(body["data"]["task"]["events"]["edges"]) == task.version + 3


async def test_a_chain_of_fragments_leaves_no_traceback_in_the_log(
    fresh_server: tuple[str, int, Path], live_server: LiveServer
) -> None:
    url, _, log = fresh_server
    token = await live_server.token(Principal.parse(f"t{secrets.token_hex(4)}"))
    chain = (
        "{ ...F0 } "
        + " ".join(f"fragment F{i} on Query {{ ...F{i + 1} }}" for i in range(599))
        + " fragment F599 on Query { viewer { handle } }"
    )
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        body = await post(http, token, chain)
    assert codes(body) == ["invalid_input"]
    assert "Traceback" not in log.read_text()
