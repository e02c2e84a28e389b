"""MCP tool arguments are held to the bounds GraphQL's variables are held to, by the same check,
before their schema: every tool, every argument, hostile values, against a real `baton serve`
whose log must stay free of tracebacks."""

from __future__ import annotations

import copy
import json
import secrets
import warnings
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp.shared.exceptions import MCPError

from baton import inputs
from baton.access.principals import Principal, PrincipalKind
from baton.inputs import MAX_DEPTH, MAX_INT, MAX_VALUES, MIN_INT
from baton.mcp.tools import TOOLS
from baton.store.db import Database
from tests.conftest import LiveServer, start_server, stop_server
from tests.helpers import PACKET_INPUT
from tests.mcp import raw
from tests.mcp.conftest import http_client, refused

# Codes a refused call may carry (whatever the refusal, never a JSON-RPC error).
BATON_CODES = {
    "invalid_input",
    "not_found",
    "forbidden",
    "invalid_state",
    "version_conflict",
    "lease_lost",
}
TOO_MANY = f"more than {MAX_VALUES} values in one request"
NUL = "strings may not contain the NUL character"
SURROGATE = "strings must be valid Unicode, with no lone surrogates"
OUT_OF_INT = f"must be a whole number from {MIN_INT} to {MAX_INT} (GraphQL's Int)"
# Within BATON_MAX_BODY_BYTES (1 MiB) once the envelope is around it.
LONG = "x" * (1024 * 1024 - 2048)


@dataclass
class LoggedServer(LiveServer):
    log: Path = Path()


@pytest.fixture(scope="module")
def server(
    database_url: str, db: Database, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LoggedServer]:
    """`baton serve` of its own, so its log holds only what these tests made it write."""
    log = tmp_path_factory.mktemp("bounds") / "serve.log"
    url, process = start_server({"BATON_DATABASE_URL": database_url}, log)
    yield LoggedServer(url, db, process, log)
    stop_server(process)


@pytest.fixture
async def agent(server: LoggedServer) -> AsyncIterator[tuple[str, str]]:
    """A fresh agent's handle and token."""
    handle = f"b{secrets.token_hex(4)}/a"
    yield handle, await server.token(Principal(PrincipalKind.AGENT, handle))


def assert_quiet_log(server: LoggedServer) -> None:
    text = server.log.read_text()
    assert "Traceback" not in text, text[-3000:]
    assert " ERROR " not in text and "ERROR:" not in text, text[-3000:]


# --- the issue's cases, through the SDK's own client in both eras ---------------------------


async def test_nul_in_ids_projects_and_packets_and_a_version_of_2_40_are_invalid_input(
    server: LoggedServer, agent: tuple[str, str], era: str
) -> None:
    handle, token = agent
    hand_off = {"project": "web", "requester": handle, "assignee": handle}
    cases: list[tuple[str, dict[str, Any], str, str]] = [
        ("task", {"id": "t\x00"}, "id", NUL),
        ("tasks", {"project": "web\x00"}, "project", NUL),
        ("runs", {"project": "web\x00"}, "project", NUL),
        ("run", {"id": "r\x00"}, "id", NUL),
        (
            "handOff",
            {**hand_off, "packet": {**PACKET_INPUT, "task": "a\x00b"}},
            "packet.task",
            NUL,
        ),
        (
            "handOff",
            {**hand_off, "packet": {**PACKET_INPUT, "files": ["ok", "b\x00"]}},
            "packet.files[1]",
            NUL,
        ),
        ("acceptTask", {"id": "t1", "expectedVersion": 2**40}, "expectedVersion", OUT_OF_INT),
        ("acceptTask", {"id": "t1", "expectedVersion": -(2**40)}, "expectedVersion", OUT_OF_INT),
        ("tasks", {"first": 2**40}, "first", OUT_OF_INT),
    ]
    async with http_client(server.url, token, mode=era) as client:
        for name, arguments, field, reason in cases:
            error = refused(await client.call_tool(name, arguments))
            assert (error["code"], error["field"]) == ("invalid_input", field), (name, error)
            assert error["message"] == f"{field}: {reason}"
    assert_quiet_log(server)


async def test_half_a_million_list_items_in_a_megabyte_are_refused_by_their_count(
    server: LoggedServer, agent: tuple[str, str]
) -> None:
    handle, token = agent
    hand_off = {"project": "web", "requester": handle, "assignee": handle}
    async with http_client(server.url, token) as client:
        for files in ([0] * 524_000, ["a"] * 260_000):  # each a body of about 1 MiB
            packet = {**PACKET_INPUT, "files": files}
            error = refused(await client.call_tool("handOff", {**hand_off, "packet": packet}))
            assert (error["code"], error["field"]) == ("invalid_input", "packet.files")
            assert error["message"] == f"packet.files: {TOO_MANY}"

        # The arguments around `files` hold 10 values (the object and its 4 keys, the packet's
        # 4, one criterion): one value past the bound is refused the same way; at the bound
        # the schema has its say.
        def with_files(n: int) -> dict[str, Any]:
            return {**hand_off, "packet": {**PACKET_INPUT, "files": [0] * n}}

        assert inputs.check(with_files(MAX_VALUES - 10)).values == MAX_VALUES
        error = refused(await client.call_tool("handOff", with_files(MAX_VALUES - 9)))
        assert error["message"] == f"packet.files: {TOO_MANY}"
        error = refused(await client.call_tool("handOff", with_files(MAX_VALUES - 10)))
        assert (error["field"], error["message"]) == (
            "packet.files[0]",
            "packet.files[0]: must be of type string",
        )
    assert_quiet_log(server)


async def test_a_lone_surrogate_and_deep_nesting_are_invalid_input(
    server: LoggedServer, agent: tuple[str, str]
) -> None:
    handle, token = agent
    hand_off = {"project": "web", "requester": handle, "assignee": handle}
    deep: Any = "x"
    for _ in range(MAX_DEPTH + 10):
        deep = [deep]
    async with raw.raw_client(server.url, token) as http:
        error = raw.tool_error(await raw.call(http, "task", {"id": "\ud800"}))
        assert (error["field"], error["message"]) == ("id", f"id: {SURROGATE}")
        packet = {**PACKET_INPUT, "context": "fine \udfff"}
        error = raw.tool_error(await raw.call(http, "handOff", {**hand_off, "packet": packet}))
        assert (error["field"], error["message"]) == (
            "packet.context",
            f"packet.context: {SURROGATE}",
        )
        packet = {**PACKET_INPUT, "files": deep}
        error = raw.tool_error(await raw.call(http, "handOff", {**hand_off, "packet": packet}))
        assert error["code"] == "invalid_input"
        assert error["field"] == "packet.files" + "[0]" * (MAX_DEPTH - 1)  # at depth 65
        assert error["message"].endswith("input nested too deeply")
    assert_quiet_log(server)


async def test_a_resource_uri_holding_nul_is_invalid_input_before_any_lookup(
    server: LoggedServer, agent: tuple[str, str], era: str
) -> None:
    _, token = agent
    async with http_client(server.url, token, mode=era) as client:
        uris = ["baton://tasks/t\x00", "baton://runs/r\x00x"]
        for uri in uris:
            with pytest.raises(MCPError) as read:
                await client.read_resource(uri)
            assert read.value.error.data == {"code": "invalid_input", "message": f"uri: {NUL}"}
        if era == "legacy":
            with warnings.catch_warnings(), pytest.raises(MCPError) as subscribed:
                warnings.simplefilter("ignore")  # resources/subscribe is the handshake era's
                await client.subscribe_resource(uris[0])
            assert subscribed.value.error.data["code"] == "invalid_input"
        else:
            with pytest.raises(MCPError) as listened:
                async with client.listen(resource_subscriptions=["baton://tasks/ok", uris[1]]):
                    pass
            assert listened.value.error.data == {
                "code": "invalid_input",
                "message": f"notifications.resourceSubscriptions[1]: {NUL}",
            }
    assert_quiet_log(server)


# --- every tool, every argument ------------------------------------------------------------


def sample(schema: dict[str, Any]) -> Any:
    """A value of `schema` (a tool's shape) with every optional property and one item in every
    list, so that every place an argument can be is there to be made hostile."""
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema["type"]
    if kind == "object":
        return {name: sample(prop) for name, prop in schema["properties"].items()}
    if kind == "array":
        return [sample(schema["items"])]
    return {"string": "x", "integer": 1}[kind]


def places(value: Any, schema: dict[str, Any], path: str = "") -> Iterator[tuple[str, str]]:
    """(path as the door names it, JSON type) of every value in `value`."""
    if path:
        yield path, schema["type"]
    if schema["type"] == "object":
        for name, prop in schema["properties"].items():
            yield from places(value[name], prop, f"{path}.{name}" if path else name)
    elif schema["type"] == "array":
        yield from places(value[0], schema["items"], f"{path}[0]")


def replaced(value: Any, path: str, new: Any) -> Any:
    """A copy of `value` with what is at `path` (`a.b[0].c`) replaced by `new`."""
    keys: list[Any] = [
        int(part[1:-1]) if part.startswith("[") else part
        for part in path.replace("[", ".[").split(".")
    ]
    out = copy.deepcopy(value)
    inner = out
    for key in keys[:-1]:
        inner = inner[key]
    inner[keys[-1]] = new
    return out


def nested(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = [value]
    return value


HOSTILE_STRINGS = [("a\x00b", NUL), ("\x00", NUL), ("ok\ud800", SURROGATE), ("\udc00x", SURROGATE)]
HOSTILE_INTS: list[Any] = [2**40, -(2**40), MAX_INT + 1, MIN_INT - 1, 10**30, 1e300]


def test_the_sample_arguments_fit_every_tools_shape() -> None:
    for tool in TOOLS.values():
        assert tool.checker.is_valid(sample(tool.shape)), tool.name


def integers(schema: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every integer schema within `schema`."""
    if schema.get("type") == "integer":
        yield schema
    for prop in schema.get("properties", {}).values():
        yield from integers(prop)
    if isinstance(schema.get("items"), dict):
        yield from integers(schema["items"])


def test_every_integer_a_tool_takes_is_declared_within_graphqls_int() -> None:
    declared = 0
    for tool in TOOLS.values():
        for schema in integers(tool.input_schema):
            declared += 1
            assert MIN_INT <= schema["minimum"] <= schema["maximum"] <= MAX_INT, tool.name
        for schema in integers(tool.shape):  # what the door checks: GraphQL's Int, no more
            assert (schema["minimum"], schema["maximum"]) == (MIN_INT, MAX_INT), tool.name
        version = tool.input_schema["properties"].get("expectedVersion")
        if version is not None:
            assert (version["minimum"], version["maximum"]) == (MIN_INT, MAX_INT)
    assert declared >= len([t for t in TOOLS.values() if t.move is not None])


async def test_every_tool_refuses_hostile_values_in_every_argument_naming_it(
    server: LoggedServer, agent: tuple[str, str]
) -> None:
    _, token = agent
    calls = 0
    async with raw.raw_client(server.url, token) as http:

        async def refused_as(name: str, arguments: Any, field: str, reason: str | None) -> None:
            nonlocal calls
            calls += 1
            error = raw.tool_error(await raw.call(http, name, arguments))
            assert (error["code"], error["field"]) == ("invalid_input", field), (name, error)
            if reason is not None:
                assert error["message"] == f"{field}: {reason}", (name, error)

        for tool in TOOLS.values():
            base = sample(tool.shape)
            # Within every bound, the call reaches its service, which answers as Baton does.
            answer = await raw.call(http, tool.name, base)
            assert "error" not in answer, (tool.name, answer)
            if answer["result"].get("isError"):
                assert answer["result"]["structuredContent"]["code"] in BATON_CODES
            for path, kind in places(base, tool.shape):
                if kind == "string":
                    for text, reason in HOSTILE_STRINGS:
                        await refused_as(tool.name, replaced(base, path, text), path, reason)
                if kind == "integer":
                    for number in HOSTILE_INTS:
                        await refused_as(tool.name, replaced(base, path, number), path, OUT_OF_INT)
                    for wrong in (1.5, "1", True, None):
                        await refused_as(tool.name, replaced(base, path, wrong), path, None)
                # Lists down to MAX_DEPTH + 1: the first one that deep is named.
                depth = path.count(".") + path.count("[") + 1
                too_deep = replaced(base, path, nested(MAX_DEPTH + 1))
                deepest = path + "[0]" * (MAX_DEPTH + 1 - depth)
                await refused_as(tool.name, too_deep, deepest, "input nested too deeply")
                too_many = replaced(base, path, ["x"] * (MAX_VALUES + 1))
                await refused_as(tool.name, too_many, path, TOO_MANY)
            for name, prop in tool.shape["properties"].items():
                if prop["type"] == "string":
                    # A string as long as a body may carry: whatever it is refused as, it is
                    # refused as Baton refuses (or answered), never a failure of the server.
                    answer = await raw.call(http, tool.name, {**base, name: LONG})
                    assert "error" not in answer, (tool.name, name, answer["error"])
                    if answer["result"].get("isError"):
                        code = answer["result"]["structuredContent"]["code"]
                        assert code in BATON_CODES, (tool.name, name, code)
                if prop["type"] == "integer":
                    answer = await raw.call(http, tool.name, {**base, name: -1})
                    assert "error" not in answer, (tool.name, name, answer["error"])
                    error = raw.tool_error(answer)
                    assert error["code"] in BATON_CODES, (tool.name, name, error)
    assert calls > 1000  # every tool, every place: not a sweep that found nothing to do
    assert_quiet_log(server)


async def test_a_body_of_deep_nesting_past_the_json_parser_is_a_parse_error_not_a_failure(
    server: LoggedServer, agent: tuple[str, str]
) -> None:
    """Nesting the JSON parser itself refuses never reaches the tool: a JSON-RPC parse error."""
    _, token = agent
    async with raw.raw_client(server.url, token) as http:
        deep = b"[" * 100_000 + b"]" * 100_000
        envelope = raw.body("task", {"id": "PLACE"}).replace(b'"PLACE"', deep)
        response = await http.post("/mcp", content=envelope, headers={"Mcp-Name": "task"})
        answer = response.json()
        assert answer["error"]["code"] == -32700, answer  # the SDK's: JSON-RPC's parse error
    assert_quiet_log(server)


async def test_the_graphql_door_and_the_mcp_door_refuse_the_same_input_alike(
    server: LoggedServer, agent: tuple[str, str]
) -> None:
    """Each hostile value through both doors: the same code, and the same words from the one
    check both doors call."""
    handle, token = agent
    hand_off = {"project": "web", "requester": handle, "assignee": handle}
    handoff_query = """mutation($in: HandOffInput!) { handOff(input: $in) { __typename } }"""
    cases: list[tuple[str, dict[str, Any], str, dict[str, Any], str]] = [
        ("task", {"id": "t\x00"}, "query($v: ID!) { task(id: $v) { id } }", {"v": "t\x00"}, NUL),
        (
            "tasks",
            {"project": "web\x00"},
            "query($v: String) { tasks(filter: {project: $v}) { pageInfo { hasNextPage } } }",
            {"v": "web\x00"},
            NUL,
        ),
        (
            "handOff",
            {**hand_off, "packet": {**PACKET_INPUT, "context": "\ud800"}},
            handoff_query,
            {"in": {**hand_off, "packet": {**PACKET_INPUT, "context": "\ud800"}}},
            "",  # GraphQL's HTTP door refuses it sooner, as a body that is not valid JSON
        ),
        (
            "handOff",
            {**hand_off, "packet": {**PACKET_INPUT, "files": [0] * 500_000}},
            handoff_query,
            {"in": {**hand_off, "packet": {**PACKET_INPUT, "files": [0] * 500_000}}},
            TOO_MANY,
        ),
        (
            "handOff",
            {**hand_off, "packet": {**PACKET_INPUT, "files": nested(80)}},
            handoff_query,
            {"in": {**hand_off, "packet": {**PACKET_INPUT, "files": nested(80)}}},
            "input nested too deeply",
        ),
        (
            "acceptTask",
            {"id": "t1", "expectedVersion": 2**40},
            'mutation($v: Int) { acceptTask(input: {id: "t1", expectedVersion: $v}) '
            "{ __typename } }",
            {"v": 2**40},
            "",
        ),
        (
            "tasks",
            {"first": 1.5},
            "query($v: Int!) { tasks(first: $v) { pageInfo { hasNextPage } } }",
            {"v": 1.5},
            "",
        ),
    ]
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        raw.raw_client(server.url, token) as mcp,
        httpx.AsyncClient(base_url=server.url, headers=headers, timeout=60) as graphql,
    ):
        for tool, arguments, query, variables, reason in cases:
            error = raw.tool_error(await raw.call(mcp, tool, arguments))
            response = await graphql.post(
                "/graphql",
                content=json.dumps(
                    {"query": query, "variables": variables}, separators=(",", ":")
                ).encode(),
                headers={"Content-Type": "application/json"},
            )
            body = response.json()
            assert "data" not in body or body["data"] is None, body
            (refusal,) = body["errors"]
            assert refusal["extensions"]["code"] == error["code"] == "invalid_input", (tool, body)
            assert reason in refusal["message"] and reason in error["message"], (refusal, error)
    assert_quiet_log(server)
