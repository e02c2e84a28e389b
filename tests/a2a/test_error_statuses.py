"""Every A2A error Baton answers has the JSON-RPC code, gRPC status and HTTP status of A2A's
error table (v1.0.1, §5.4 "Error Code Mappings"), sent by hand over both bindings to a real
`baton serve`; and what the door refuses before any operation has its HTTP status.

A2A 1.0.0's table answered TaskNotCancelableError with 409 and ContentTypeNotSupportedError
with 415; 1.0.1 made every status the one `google.rpc.Code` gives its gRPC status (both 400),
as the SDK does. A request whose body is declared as something other than JSON is no A2A error:
HTTP's 415 Unsupported Media Type.
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from a2a.utils.errors import A2A_ERROR_MAPPING, A2A_REASON_TO_ERROR, JSON_RPC_ERROR_CODE_MAP

from baton.protocol.handoff import TaskState
from tests.a2a.conftest import A2A_VERSION, agent_url
from tests.conftest import LiveServer
from tests.helpers import World

# A2A 1.0.1 §5.4, the rows Baton answers: reason -> (JSON-RPC code, gRPC status, HTTP status).
# Never answered: PushNotificationNotSupported (Baton pushes), InvalidAgentResponse (a
# client's error), ExtensionSupportRequired (no extension is required).
SPEC = {
    "TASK_NOT_FOUND": (-32001, "NOT_FOUND", 404),
    "TASK_NOT_CANCELABLE": (-32002, "FAILED_PRECONDITION", 400),
    "UNSUPPORTED_OPERATION": (-32004, "FAILED_PRECONDITION", 400),
    "CONTENT_TYPE_NOT_SUPPORTED": (-32005, "INVALID_ARGUMENT", 400),
    "EXTENDED_AGENT_CARD_NOT_CONFIGURED": (-32007, "FAILED_PRECONDITION", 400),
    "VERSION_NOT_SUPPORTED": (-32009, "FAILED_PRECONDITION", 400),
    # JSON-RPC's own errors, with their google.rpc statuses.
    "INVALID_PARAMS": (-32602, "INVALID_ARGUMENT", 400),
    "INVALID_REQUEST": (-32600, "INVALID_ARGUMENT", 400),
}


@dataclass
class Door:
    """One binding of one agent, spoken by hand: `call` sends an A2A method, as JSON-RPC or as
    the HTTP+JSON request given."""

    http: httpx.AsyncClient
    binding: str

    async def call(
        self,
        method: str,
        params: dict[str, Any],
        rest: tuple[str, str, dict[str, Any] | None],
        headers: dict[str, str] | None = None,
    ) -> httpx.Response:
        if self.binding == "JSONRPC":
            body = {"jsonrpc": "2.0", "id": 9, "method": method, "params": params}
            return await self.http.post("", json=body, headers=headers)
        verb, path, json_body = rest
        return await self.http.request(verb, path, json=json_body, headers=headers)


@dataclass
class Caller:
    world: World
    door: Door
    assignee: Door  # the same agent's URL, with the assignee's token


Provoke = Callable[[Caller], Awaitable[httpx.Response]]


def sent(*parts: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {
        "message": {"messageId": "m-status", "role": "ROLE_USER", "parts": list(parts), **fields}
    }


async def missing_task(c: Caller) -> httpx.Response:
    return await c.door.call("GetTask", {"id": "nope_x"}, ("GET", "/tasks/nope_x", None))


async def cancel_completed(c: Caller) -> httpx.Response:
    task = await c.world.task_in(TaskState.completed)
    return await c.door.call(
        "CancelTask", {"id": task.id}, ("POST", f"/tasks/{task.id}:cancel", {})
    )


async def message_to_a_final_task(c: Caller) -> httpx.Response:
    task = await c.world.task_in(TaskState.completed)
    params = sent({"text": "more"}, taskId=task.id)
    return await c.door.call("SendMessage", params, ("POST", "/message:send", params))


async def raw_bytes(c: Caller) -> httpx.Response:
    raw = {"raw": base64.b64encode(b"\x89PNG").decode(), "mediaType": "image/png"}
    params = sent({"text": "look"}, raw)
    return await c.door.call("SendMessage", params, ("POST", "/message:send", params))


async def extended_card(c: Caller) -> httpx.Response:
    return await c.door.call("GetExtendedAgentCard", {}, ("GET", "/extendedAgentCard", None))


async def another_version(c: Caller) -> httpx.Response:
    return await c.door.call(
        "ListTasks", {}, ("GET", "/tasks", None), headers={"A2A-Version": "9.9"}
    )


async def bad_page_size(c: Caller) -> httpx.Response:
    return await c.door.call("ListTasks", {"pageSize": 0}, ("GET", "/tasks?pageSize=0", None))


async def cancel_by_the_assignee(c: Caller) -> httpx.Response:
    task = await c.world.task_in(TaskState.working)
    return await c.assignee.call(
        "CancelTask", {"id": task.id}, ("POST", f"/tasks/{task.id}:cancel", {})
    )


CASES: list[tuple[Provoke, str, str]] = [
    (missing_task, "TASK_NOT_FOUND", "not_found"),
    (cancel_completed, "TASK_NOT_CANCELABLE", "invalid_state"),
    (message_to_a_final_task, "UNSUPPORTED_OPERATION", "invalid_state"),
    (raw_bytes, "CONTENT_TYPE_NOT_SUPPORTED", "invalid_input"),
    (extended_card, "EXTENDED_AGENT_CARD_NOT_CONFIGURED", "not_found"),
    (another_version, "VERSION_NOT_SUPPORTED", ""),
    (bad_page_size, "INVALID_PARAMS", "invalid_input"),
    (cancel_by_the_assignee, "INVALID_REQUEST", "forbidden"),
]


@pytest.fixture
async def caller(live_server: LiveServer, world: World, binding: str) -> AsyncIterator[Caller]:
    base = agent_url(live_server, world.assignee)
    clients = []
    for role in ("requester", "assignee"):
        token = await live_server.token(world.roles[role])
        headers = {"Authorization": f"Bearer {token}", **A2A_VERSION}
        clients.append(httpx.AsyncClient(base_url=base, headers=headers, timeout=30))
    try:
        yield Caller(world, Door(clients[0], binding), Door(clients[1], binding))
    finally:
        for client in clients:
            await client.aclose()


def error_info(details: list[dict[str, Any]]) -> dict[str, Any]:
    return next(d for d in details if d.get("@type", "").endswith("google.rpc.ErrorInfo"))


@pytest.mark.parametrize(("provoke", "reason", "code"), CASES, ids=[c[1] for c in CASES])
async def test_each_error_has_the_code_and_status_of_a2as_table(
    caller: Caller, provoke: Provoke, reason: str, code: str
) -> None:
    answer = await provoke(caller)
    rpc_code, grpc_status, http_status = SPEC[reason]
    error = answer.json()["error"]
    if caller.door.binding == "JSONRPC":
        assert answer.status_code == 200 and error["code"] == rpc_code, answer.text
        info = error_info(error["data"])
    else:
        assert answer.status_code == error["code"] == http_status, answer.text
        assert error["status"] == grpc_status, answer.text
        info = error_info(error["details"])
    assert (info["reason"], info["domain"]) == (reason, "a2a-protocol.org"), answer.text
    if code:  # Baton's own code, where Baton refused (the SDK's version check has none)
        assert info["metadata"]["code"] == code, answer.text


def test_the_sdk_maps_every_error_as_a2as_table_does() -> None:
    for reason, (rpc_code, grpc_status, http_status) in SPEC.items():
        kind = A2A_REASON_TO_ERROR[reason]
        mapping = A2A_ERROR_MAPPING[kind]
        assert (JSON_RPC_ERROR_CODE_MAP[kind], mapping.grpc_status, mapping.http_code) == (
            rpc_code,
            grpc_status,
            http_status,
        ), reason


@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/x-www-form-urlencoded", "application/xml"]
)
async def test_a_body_declared_as_anything_but_json_is_415(
    caller: Caller, content_type: str
) -> None:
    params = sent({"text": "x"})
    if caller.door.binding == "JSONRPC":
        path = ""
        params = {"jsonrpc": "2.0", "id": 9, "method": "SendMessage", "params": params}
    else:
        path = "/message:send"
    answer = await caller.door.http.post(
        path, content=json.dumps(params), headers={"Content-Type": content_type}
    )
    assert answer.status_code == 415, answer.text
    error = answer.json()["error"]
    details = error["data"] if caller.door.binding == "JSONRPC" else error["details"]
    assert error_info(details)["metadata"]["code"] == "unsupported_media_type"


@pytest.mark.parametrize(
    "content_type",
    ["application/json", "application/a2a+json", "application/json; charset=utf-8", None],
)
async def test_json_under_its_media_types_or_none_is_taken(
    caller: Caller, content_type: str | None
) -> None:
    params = sent({"text": "x"}, {"data": {"project": caller.world.project}})
    params["message"]["messageId"] = f"m-{content_type}"
    params["configuration"] = {"returnImmediately": True}
    if caller.door.binding == "JSONRPC":
        path = ""
        params = {"jsonrpc": "2.0", "id": 9, "method": "SendMessage", "params": params}
    else:
        path = "/message:send"
    headers = {"Content-Type": content_type} if content_type else {}
    answer = await caller.door.http.post(path, content=json.dumps(params), headers=headers)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert "task" in (body["result"] if caller.door.binding == "JSONRPC" else body), answer.text
