"""Bad requests to the A2A door, sent by hand over both bindings: each is answered with a typed
error (a JSON-RPC error, or A2A's HTTP+JSON error with its status), never a server error."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from baton.access.gate import GateDecision
from tests.a2a.conftest import A2A_VERSION, agent_url
from tests.conftest import LiveServer
from tests.helpers import World

# The A2A error reasons and JSON-RPC codes of the errors these tests expect.
INVALID_PARAMS = ("INVALID_PARAMS", -32602)
CONTENT_TYPE = ("CONTENT_TYPE_NOT_SUPPORTED", -32005)


@dataclass
class Door:
    """One binding of one agent, spoken by hand."""

    http: httpx.AsyncClient
    binding: str

    async def send_message(self, params: Any, raw: bytes | None = None) -> httpx.Response:
        if self.binding == "JSONRPC":
            body = (
                raw
                or json.dumps(
                    {"jsonrpc": "2.0", "id": 7, "method": "SendMessage", "params": params}
                ).encode()
            )
            return await self.http.post("", content=body)
        return await self.http.post("/message:send", content=raw or json.dumps(params).encode())

    async def call(self, method: str, params: dict[str, Any], rest: str) -> httpx.Response:
        if self.binding == "JSONRPC":
            body = {"jsonrpc": "2.0", "id": 7, "method": method, "params": params}
            return await self.http.post("", json=body)
        return await self.http.get(rest)


def error_of(door: Door, answer: httpx.Response) -> tuple[str | None, int, dict[str, Any]]:
    """(ErrorInfo reason, JSON-RPC code or HTTP status, ErrorInfo metadata) of an error."""
    assert answer.status_code < 500, answer.text
    body = answer.json()
    error = body["error"]
    details = error.get("data") if door.binding == "JSONRPC" else error.get("details")
    info = next((d for d in details or [] if d.get("@type", "").endswith("ErrorInfo")), {})
    return info.get("reason"), error["code"], info.get("metadata", {})


@pytest.fixture
async def door(live_server: LiveServer, world: World, binding: str) -> AsyncIterator[Door]:
    await world.decide(GateDecision.ALLOW)
    token = await live_server.token(world.roles["requester"])
    headers = {"Authorization": f"Bearer {token}", **A2A_VERSION}
    base = agent_url(live_server, world.assignee)
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=30) as http:
        yield Door(http, binding)


def sent(*parts: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {"message": {"messageId": "m-bad", "role": "ROLE_USER", "parts": list(parts), **fields}}


def expect(door: Door, answer: httpx.Response, reason: str, code: int) -> dict[str, Any]:
    got_reason, got_code, metadata = error_of(door, answer)
    assert got_reason == reason, answer.text
    if door.binding == "JSONRPC":
        assert answer.status_code == 200 and got_code == code, answer.text
    else:
        assert answer.status_code == got_code == 400, answer.text
    return metadata


async def test_too_many_parts_are_invalid_params(door: Door) -> None:
    answer = await door.send_message(sent(*[{"text": "x"}] * 33))
    metadata = expect(door, answer, *INVALID_PARAMS)
    assert metadata == {"code": "invalid_input", "field": "message.parts"}


async def test_a_file_as_raw_bytes_is_a_content_type_baton_does_not_take(door: Door) -> None:
    raw = {"raw": base64.b64encode(b"\x89PNG").decode(), "mediaType": "image/png"}
    answer = await door.send_message(sent({"text": "look"}, raw))
    metadata = expect(door, answer, *CONTENT_TYPE)
    assert metadata == {"code": "invalid_input", "field": "message.parts[1].raw"}


async def test_a_huge_body_is_refused_before_it_is_read(door: Door) -> None:
    answer = await door.send_message(sent({"text": "x" * (2 * 1024 * 1024)}))
    assert answer.status_code == 413
    if door.binding == "JSONRPC":
        assert answer.json()["error"]["data"][0]["metadata"]["code"] == "payload_too_large"
    else:
        assert answer.json()["error"]["details"][0]["metadata"]["code"] == "payload_too_large"


async def test_a_large_text_part_is_refused_by_the_packets_bound(door: Door) -> None:
    answer = await door.send_message(sent({"text": "x" * 200_000}))
    assert expect(door, answer, *INVALID_PARAMS)["field"] == "packet.task"


@pytest.mark.parametrize(
    ("params", "field"),
    [
        (sent({"text": "a\x00b"}), None),  # PostgreSQL stores no NUL
        (sent({"text": "x"}, {"data": {"colour": "blue"}}), "message.parts[1].data.colour"),
        (sent({"text": "x"}, contextId="c" * 300), "message.contextId"),
        (sent({"text": "x"}, {"data": {"verification": "NEVER"}}), None),
        (sent({"text": "x"}, {"data": {"requester": "admin/x"}}), "requester"),
    ],
)
async def test_bad_values_are_invalid_params_naming_where(
    door: Door, params: dict[str, Any], field: str | None
) -> None:
    metadata = expect(door, await door.send_message(params), *INVALID_PARAMS)
    assert metadata["code"] == "invalid_input"
    if field is not None:
        assert metadata["field"] == field


async def test_deeply_nested_input_is_refused_by_the_bound_every_door_has(door: Door) -> None:
    nested: Any = 1
    for _ in range(200):
        nested = [nested]
    metadata = expect(door, await door.send_message(sent({"data": {"a": nested}})), *INVALID_PARAMS)
    assert metadata["code"] == "invalid_input"


async def test_a_body_that_is_not_json_is_a_parse_error(door: Door) -> None:
    answer = await door.send_message(None, raw=b'{"jsonrpc": "2.0", "id": 1, "meth')
    assert answer.status_code < 500
    error = answer.json()["error"]
    if door.binding == "JSONRPC":
        assert answer.status_code == 200 and error["code"] == -32700
    else:
        assert answer.status_code == error["code"] == 400


async def test_wrong_types_are_refused_by_the_protocols_parser(door: Door) -> None:
    answer = await door.send_message({"message": {"messageId": {"a": 1}, "parts": "x"}})
    assert answer.status_code < 500
    code = answer.json()["error"]["code"]
    assert code == (-32602 if door.binding == "JSONRPC" else 400), answer.text


async def test_a_message_without_its_required_fields_is_invalid_params(door: Door) -> None:
    metadata = expect(door, await door.send_message({"message": {"parts": []}}), *INVALID_PARAMS)
    assert metadata["code"] == "invalid_input"


@pytest.mark.parametrize(
    ("params", "rest", "field"),
    [
        ({"pageSize": 0}, "/tasks?pageSize=0", "pageSize"),
        ({"pageSize": 1000}, "/tasks?pageSize=1000", "pageSize"),
        ({"pageToken": "not-a-token"}, "/tasks?pageToken=not-a-token", "pageToken"),
        ({"historyLength": 500}, "/tasks?historyLength=500", "historyLength"),
    ],
)
async def test_list_tasks_bounds_are_invalid_params(
    door: Door, params: dict[str, Any], rest: str, field: str
) -> None:
    metadata = expect(door, await door.call("ListTasks", params, rest), *INVALID_PARAMS)
    assert metadata == {"code": "invalid_input", "field": field}


async def test_get_task_history_past_the_bound_is_invalid_params(door: Door) -> None:
    answer = await door.call(
        "GetTask", {"id": "x", "historyLength": 101}, "/tasks/x?historyLength=101"
    )
    assert expect(door, answer, *INVALID_PARAMS)["field"] == "historyLength"


async def test_an_unknown_jsonrpc_method_is_method_not_found(door: Door) -> None:
    if door.binding != "JSONRPC":
        pytest.skip("JSON-RPC only")
    answer = await door.call("DropTables", {}, "")
    assert answer.status_code == 200 and answer.json()["error"]["code"] == -32601


@pytest.mark.parametrize("token", [None, "not-a-token"])
async def test_without_a_working_token_every_operation_is_401(
    live_server: LiveServer, world: World, binding: str, token: str | None
) -> None:
    headers = {**A2A_VERSION, **({"Authorization": f"Bearer {token}"} if token else {})}
    base = agent_url(live_server, world.assignee)
    async with httpx.AsyncClient(base_url=base, headers=headers) as http:
        if binding == "JSONRPC":
            body = {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}
            answer = await http.post("", json=body)
            error = answer.json()["error"]
            assert error["data"][0]["metadata"] == {"code": "unauthenticated"}
        else:
            answer = await http.get("/tasks")
            error = answer.json()["error"]
            assert error["status"] == "UNAUTHENTICATED"
            assert error["details"][0]["metadata"] == {"code": "unauthenticated"}
    assert answer.status_code == 401
    assert answer.headers["www-authenticate"].startswith("Bearer")
