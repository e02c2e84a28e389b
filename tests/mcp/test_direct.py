"""A 2026-07-28 `tools/call` or `resources/read` answered by the door itself
(`baton.mcp.direct`), against the same requests answered through the SDK's dispatch (a second
`baton serve` on the same database, its door set to leave every request to the SDK): the same
statuses, media types and JSON, for calls, reads, refusals, bad params, unknown tools, bad
envelopes and headers, notifications, batches and other methods; and a listen stream's frames,
the same bytes."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from mcp.shared.inbound import encode_header_value

from baton.protocol.handoff import TaskState
from tests.conftest import LiveServer, through_sdk
from tests.helpers import World, checkpoint
from tests.mcp import raw

HEADERS = {
    "Accept": "application/json, text/event-stream",
    "Content-Type": "application/json",
    "MCP-Protocol-Version": raw.VERSION,
    "Mcp-Method": "tools/call",
}
CHECKPOINT = {"progress": "half way, naïve café ✓", "nextSteps": ["measure again"]}


@pytest.fixture(scope="module")
def sdk_server(
    database_url: str, live_server: LiveServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    log = tmp_path_factory.mktemp("serve-sdk") / "serve.log"
    with through_sdk("baton.mcp.http", "MCPDoor", database_url, live_server.db, log) as server:
        yield server


@dataclass(frozen=True)
class Answer:
    status: int
    media_type: str
    body: Any  # the JSON answered, or the text when it is not JSON
    raw: bytes

    @classmethod
    def of(cls, response: httpx.Response) -> Answer:
        media_type = response.headers.get("content-type", "")
        body: Any = response.text
        if media_type.startswith("application/json"):
            body = response.json()
        return cls(response.status_code, media_type, body, response.content)

    def same_as(self, other: Answer) -> bool:
        return (self.status, self.media_type, self.body) == (
            other.status,
            other.media_type,
            other.body,
        )


@dataclass
class Doors:
    """One agent's requests to `/mcp`, at both servers."""

    direct: httpx.AsyncClient
    sdk: httpx.AsyncClient

    async def send(
        self,
        at: httpx.AsyncClient,
        content: Any,
        headers: dict[str, str] | None = None,
        method: str = "POST",
    ) -> Answer:
        if not isinstance(content, (bytes, str)) and content is not None:
            content = json.dumps(content)
        return Answer.of(await at.request(method, "/mcp", content=content, headers=headers))

    async def both(self, content: Any, **given: Any) -> tuple[Answer, Answer]:
        """The door's own answer, then the SDK's, to the same request."""
        return await self.send(self.direct, content, **given), await self.send(
            self.sdk, content, **given
        )


@pytest.fixture
async def doors(
    live_server: LiveServer, sdk_server: LiveServer, world: World
) -> AsyncIterator[Doors]:
    token = await live_server.token(world.roles["assignee"])
    headers = {"Authorization": f"Bearer {token}", **HEADERS}
    async with (
        httpx.AsyncClient(base_url=live_server.url, headers=headers, timeout=30) as a,
        httpx.AsyncClient(base_url=sdk_server.url, headers=headers, timeout=30) as b,
    ):
        yield Doors(a, b)


def call(name: Any, arguments: Any, *, request_id: Any = 1, **more: Any) -> dict[str, Any]:
    params = {"name": name, "arguments": arguments, "_meta": raw.META}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params, **more}


def named(name: str) -> dict[str, str]:
    return {"Mcp-Name": name}


VOLATILE = {"id", "taskId", "createdAt", "updatedAt", "at"}


def masked(value: Any) -> Any:
    """`value` with what differs between two tasks made alike (ids, times) masked."""
    if isinstance(value, dict):
        return {k: "…" if k in VOLATILE else masked(v) for k, v in value.items()}
    if isinstance(value, list):
        return [masked(v) for v in value]
    return value


def unwrapped(answer: Answer) -> dict[str, Any]:
    """A tool's answer, its text parsed, with ids and times masked."""
    result = dict(answer.body["result"])
    result["content"] = [
        {**part, "text": masked(json.loads(part["text"]))} for part in result["content"]
    ]
    result["structuredContent"] = masked(result["structuredContent"])
    return {**answer.body, "result": result}


async def test_a_move_is_answered_alike(doors: Doors, world: World) -> None:
    one = await world.task_in(TaskState.working)
    other = await world.task_in(TaskState.working)
    arguments = {"checkpoint": CHECKPOINT}
    direct = await doors.send(
        doors.direct, call("saveCheckpoint", {"id": one.id, **arguments}), named("saveCheckpoint")
    )
    sdk = await doors.send(
        doors.sdk, call("saveCheckpoint", {"id": other.id, **arguments}), named("saveCheckpoint")
    )
    assert (
        (direct.status, direct.media_type)
        == (sdk.status, sdk.media_type)
        == (
            200,
            "application/json",
        )
    )
    assert direct.body["result"]["isError"] is False
    assert unwrapped(direct) == unwrapped(sdk)
    assert direct.body["result"]["structuredContent"]["task"]["id"] == one.id
    # The same JSON, and the door wrote it: its UTF-8 where the SDK's `json` escapes.
    assert "naïve".encode() in direct.raw and "naïve".encode() not in sdk.raw


async def test_reads_and_refusals_are_answered_alike(doors: Doors, world: World) -> None:
    task = await world.task_in(TaskState.working)
    calls = [
        ("task", {"id": task.id}),
        ("task", {"id": "no-such-task"}),
        ("protocol", {}),
        ("waitingOnMe", {}),
        ("acceptTask", {"id": task.id}),  # invalid_state, with the allowed moves
        ("saveCheckpoint", {"id": task.id, "checkpoint": CHECKPOINT, "expectedVersion": 1}),
        ("saveCheckpoint", {"id": task.id}),  # a required field missing
        ("saveCheckpoint", {"id": task.id, "checkpoint": CHECKPOINT, "extra": 1}),
        ("saveCheckpoint", {"id": 7, "checkpoint": CHECKPOINT}),  # the wrong type
        ("saveCheckpoint", {"id": "a\u0000b", "checkpoint": CHECKPOINT}),  # NUL
        ("task", {"id": "x" * 200_000}),  # past the bounds of a string
        ("task", None),  # no arguments
    ]
    for name, arguments in calls:
        direct, sdk = await doors.both(call(name, arguments), headers=named(name))
        assert direct.same_as(sdk), (name, arguments, direct, sdk)
        assert direct.status == 200 and "result" in direct.body, (name, direct)


async def test_ids_are_answered_alike(doors: Doors, world: World) -> None:
    task = await world.task_in(TaskState.working)
    for request_id in ("call-7", 0, -3, 1.0, 2**70, 1.5, None, True, {"a": 1}):
        sent = call("task", {"id": task.id}, request_id=request_id)
        direct, sdk = await doors.both(sent, headers=named("task"))
        assert direct.same_as(sdk), (request_id, direct, sdk)


async def test_bad_params_and_unknown_tools_are_answered_alike(doors: Doors) -> None:
    bodies: list[tuple[Any, dict[str, str]]] = [
        (call("noSuchTool", {}), named("noSuchTool")),
        (call(123, {}), {}),
        (call("task", ["not", "an", "object"]), named("task")),
        (call("task", "text"), named("task")),
        (
            {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"_meta": raw.META}},
            {},
        ),
        ({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": [1]}, named("task")),
        ({"jsonrpc": "2.0", "id": 1, "method": "tools/call"}, named("task")),
        (call("task", {}, params_extra=1), named("task")),
    ]
    for body, headers in bodies:
        direct, sdk = await doors.both(body, headers=headers)
        assert direct.same_as(sdk), (body, direct, sdk)


async def test_bad_envelopes_and_bodies_are_answered_alike(doors: Doors) -> None:
    good = call("protocol", {})
    bodies: list[Any] = [
        b"{not json",
        b"",
        b"[]",
        b"null",
        b'"text"',
        b"1e400",
        b"[" * 5000 + b"]" * 5000,
        "\ufeff" + json.dumps(good),
        json.dumps(good).encode("utf-16"),
        [good, good],  # a batch
        {**good, "jsonrpc": "1.0"},
        {**good, "method": 7},
        {k: v for k, v in good.items() if k != "method"},
        {"jsonrpc": "2.0", "id": 1, "result": {}},  # a posted response
        {"jsonrpc": "2.0", "id": 1, "error": {"code": 1, "message": "x"}},
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}},
        {"jsonrpc": "2.0", "method": "tools/call", "params": good["params"]},  # no id
        {**good, "params": {"name": "protocol", "arguments": {}}},  # no _meta
        {**good, "params": {**good["params"], "_meta": {}}},
        {
            **good,
            "params": {
                **good["params"],
                "_meta": {**raw.META, "io.modelcontextprotocol/protocolVersion": "2099-01-01"},
            },
        },
    ]
    for body in bodies:
        direct, sdk = await doors.both(body, headers=named("protocol"))
        assert direct.same_as(sdk), (body, direct, sdk)


async def test_other_methods_are_answered_alike(doors: Doors) -> None:
    for method in ("tools/list", "ping", "resources/list", "resources/templates/list", "nope"):
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": method,
            "params": {"_meta": raw.META},
        }
        direct, sdk = await doors.both(body, headers={"Mcp-Method": method})
        assert direct.same_as(sdk), (method, direct, sdk)


async def test_headers_are_held_alike(doors: Doors, world: World) -> None:
    task = await world.task_in(TaskState.working)
    body = json.dumps(call("task", {"id": task.id}))
    variants: list[dict[str, str]] = [
        {},  # no Mcp-Name: the body's name is not checked against one
        named("taskGraph"),  # a name that disagrees
        {**named("task"), "Mcp-Method": "tools/list"},
        {**named("task"), "MCP-Protocol-Version": "2099-01-01"},
        {**named("task"), "MCP-Protocol-Version": "2025-06-18"},  # the handshake era
        {**named("task"), "Content-Type": "text/plain"},
        {**named("task"), "Content-Type": "Application/JSON; charset=utf-8"},
        {**named("task"), "Accept": "text/event-stream"},
        {**named("task"), "Accept": "*/*"},
        {**named("task"), "Accept": "application/*"},
        {**named("task"), "Mcp-Param-Id": task.id},
    ]
    for headers in variants:
        direct, sdk = await doors.both(body, headers=headers)
        assert direct.same_as(sdk), (headers, direct, sdk)
    # A routing header sent twice: the raw header lines, as the SDK reads them.
    answers = []
    for at in (doors.direct, doors.sdk):
        request = at.build_request("POST", "/mcp", content=body)
        twice = [("mcp-name", "task"), ("mcp-name", "task")]
        request.headers = httpx.Headers([*request.headers.multi_items(), *twice])
        answers.append(Answer.of(await at.send(request)))
    assert answers[0].same_as(answers[1]), answers


async def test_bodies_past_the_bound_and_other_verbs_are_answered_alike(doors: Doors) -> None:
    big = json.dumps(call("task", {"id": "x" * (2 * 1024 * 1024)})).encode()

    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: counted as it comes
        for start in range(0, len(big), 65536):
            yield big[start : start + 65536]

    answers = []
    for at in (doors.direct, doors.sdk):
        response = await at.post("/mcp", content=chunks(), headers=named("task"))
        answers.append(Answer.of(response))
    assert answers[0].same_as(answers[1]) and answers[0].status == 413, answers
    # Declared in Content-Length: refused before it is read.
    direct, sdk = await doors.both(big, headers=named("task"))
    assert direct.same_as(sdk) and direct.status == 413, (direct, sdk)
    for method in ("GET", "DELETE", "PUT"):
        direct, sdk = await doors.both(None, method=method)
        assert direct.same_as(sdk), (method, direct, sdk)


async def test_a_call_with_a_token_that_does_not_work_is_refused_alike(
    doors: Doors, world: World
) -> None:
    task = await world.task_in(TaskState.working)
    body = call("task", {"id": task.id})
    headers = {**named("task"), "Authorization": "Bearer nope"}
    direct, sdk = await doors.both(body, headers=headers)
    assert direct.same_as(sdk) and direct.status == 401, (direct, sdk)
    assert direct.body["error"]["data"]["code"] == "unauthenticated"


# --- resources/read -------------------------------------------------------------------------


def read(uri: Any, *, request_id: Any = 1, **params: Any) -> dict[str, Any]:
    body = {"uri": uri, "_meta": raw.META, **params}
    return {"jsonrpc": "2.0", "id": request_id, "method": "resources/read", "params": body}


def reading(uri: Any) -> dict[str, str]:
    headers = {"Mcp-Method": "resources/read"}
    if isinstance(uri, str):
        headers["Mcp-Name"] = encode_header_value(uri)  # as the SDK's client sends it
    return headers


async def test_resource_reads_are_answered_alike(doors: Doors, world: World) -> None:
    task = await world.task_in(TaskState.working)
    assignee = world.roles["assignee"]
    await world.service.save_checkpoint(assignee, task.id, checkpoint(progress="naïve café ✓"))
    theirs = await World(world.service).task_in(TaskState.working)  # another owner's
    made = await doors.send(
        doors.direct,
        call("createRun", {"project": "web", "title": "Ship it ✓"}),
        named("createRun"),
    )
    run_id = made.body["result"]["structuredContent"]["run"]["id"]
    uris = [
        f"baton://tasks/{task.id}",
        f"baton://runs/{run_id}",
        f"baton://tasks/{theirs.id}",
        "baton://tasks/t" + "0" * 28,  # no such task
        "baton://runs/nope",
        "baton://tasks/",
        "baton://tasks/a/b",
        "baton://tasks/a?b=1",
        "baton://nope/x",
        "https://example.com/",
        "",
        "baton://tasks/a\u0000b",  # NUL
        "baton://tasks/" + "x" * 2_000,  # past an id's length
    ]
    for uri in uris:
        direct, sdk = await doors.both(read(uri), headers=reading(uri))
        assert direct.same_as(sdk), (uri, direct, sdk)
    direct, sdk = await doors.both(read(uris[0]), headers=reading(uris[0]))
    assert direct.status == 200 and direct.same_as(sdk), (direct, sdk)
    # The door wrote it: its UTF-8 where the SDK's `json` escapes.
    assert "naïve".encode() in direct.raw and "naïve".encode() not in sdk.raw
    assert json.loads(direct.body["result"]["contents"][0]["text"])["id"] == task.id
    # A refusal carries Baton's code, as the SDK's handler gives it.
    direct, sdk = await doors.both(read(uris[2]), headers=reading(uris[2]))
    assert direct.body["error"]["data"]["code"] == "not_found", direct


async def test_bad_read_params_and_ids_are_answered_alike(doors: Doors, world: World) -> None:
    task = await world.task_in(TaskState.working)
    uri = f"baton://tasks/{task.id}"
    bodies: list[tuple[Any, dict[str, str]]] = [
        (read(7), reading(7)),
        (read(None), reading(None)),
        (read(["a"]), reading(None)),
        (read(uri, extra=1), reading(uri)),
        (
            {"jsonrpc": "2.0", "id": 1, "method": "resources/read", "params": {"_meta": raw.META}},
            reading(None),
        ),
        ({"jsonrpc": "2.0", "id": 1, "method": "resources/read", "params": [1]}, reading(uri)),
        ({"jsonrpc": "2.0", "id": 1, "method": "resources/read"}, reading(uri)),
        ({**read(uri), "params": {"uri": uri}}, reading(uri)),  # no _meta
        (read(uri), {"Mcp-Method": "resources/read"}),  # no Mcp-Name
        (read(uri), {"Mcp-Method": "resources/read", "Mcp-Name": "baton://tasks/other"}),
        (read(uri), {"Mcp-Method": "tools/call", "Mcp-Name": uri}),
        (read(uri), {**reading(uri), "MCP-Protocol-Version": "2025-06-18"}),
        (read(uri), {**reading(uri), "Accept": "text/event-stream"}),
        ({"jsonrpc": "2.0", "method": "resources/read", "params": read(uri)["params"]}, {}),
    ]
    for request_id in ("read-7", 0, 1.0, 2**70, None, True):
        bodies.append((read(uri, request_id=request_id), reading(uri)))
    for body, headers in bodies:
        direct, sdk = await doors.both(body, headers=headers)
        assert direct.same_as(sdk), (body, headers, direct, sdk)


async def _frames(
    at: httpx.AsyncClient, uri: str, wanted: int, acknowledged: asyncio.Event
) -> list[bytes]:
    """The first `wanted` SSE frames of a listen stream on `uri` (`acknowledged` set after the
    first: the stream follows from then on), then it is closed."""
    body = {
        "jsonrpc": "2.0",
        "id": "listen-1",
        "method": "subscriptions/listen",
        "params": {"notifications": {"resourceSubscriptions": [uri]}, "_meta": raw.META},
    }
    frames: list[bytes] = []
    headers = {"Mcp-Method": "subscriptions/listen"}
    async with at.stream("POST", "/mcp", json=body, headers=headers) as response:
        assert response.status_code == 200, await response.aread()
        buffer = b""
        async for chunk in response.aiter_bytes():
            buffer += chunk
            while b"\r\n\r\n" in buffer:
                frame, buffer = buffer.split(b"\r\n\r\n", 1)
                if not frame.startswith(b":"):  # not a ping
                    frames.append(frame)
                    acknowledged.set()
            if len(frames) >= wanted:
                return frames
    raise AssertionError(f"the stream ended after {frames}")


async def test_listen_streams_write_the_sdks_frames(doors: Doors, world: World) -> None:
    task = await world.task_in(TaskState.working)
    uri = f"baton://tasks/{task.id}"
    acknowledged = [asyncio.Event(), asyncio.Event()]
    streams = [
        asyncio.create_task(_frames(at, uri, 3, ack))
        for at, ack in zip((doors.direct, doors.sdk), acknowledged, strict=True)
    ]
    waits = asyncio.gather(*(ack.wait() for ack in acknowledged))
    await asyncio.wait_for(waits, 30)
    for i in range(2):
        saved = checkpoint(progress=f"step {i}")
        await world.service.save_checkpoint(world.roles["assignee"], task.id, saved)
    direct, sdk = await asyncio.wait_for(asyncio.gather(*streams), 30)
    # The acknowledgement, then one update per change: the same bytes from both.
    assert direct == sdk, (direct, sdk)
    updated = json.loads(direct[1].split(b"data: ", 1)[1])
    assert updated == {
        "jsonrpc": "2.0",
        "method": "notifications/resources/updated",
        "params": {"uri": uri, "_meta": {"io.modelcontextprotocol/subscriptionId": "listen-1"}},
    }
    assert direct[2] == direct[1]
