"""SendMessage answered by the door itself, over both bindings, against the same requests answered
through the SDK's dispatchers (a second `baton serve` on the same database, its door set to use
them): the same statuses, media types and JSON, for hand-offs, repeats, replies and refusals."""

from __future__ import annotations

import base64
import json
import secrets
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from baton.access.gate import GateDecision
from tests.a2a.conftest import A2A_VERSION
from tests.conftest import LiveServer, through_sdk
from tests.helpers import World


@pytest.fixture(scope="module")
def sdk_server(
    database_url: str, live_server: LiveServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    log = tmp_path_factory.mktemp("serve-sdk") / "serve.log"
    with through_sdk("baton.a2a.http", "A2ADoor", database_url, live_server.db, log) as server:
        yield server


@dataclass(frozen=True)
class Answer:
    status: int
    media_type: str
    retry_after: str | None
    body: Any

    @classmethod
    def of(cls, response: httpx.Response) -> Answer:
        return cls(
            response.status_code,
            response.headers.get("content-type", ""),
            response.headers.get("retry-after"),
            response.json(),
        )


@dataclass
class Doors:
    """One agent's SendMessage in one binding, at both servers."""

    direct: httpx.AsyncClient
    sdk: httpx.AsyncClient
    binding: str

    def request(
        self, params: Any, raw: bytes | None, request_id: Any, tenant: str
    ) -> tuple[str, bytes]:
        if self.binding == "JSONRPC":
            envelope = {"jsonrpc": "2.0", "id": request_id, "method": "SendMessage"}
            if params is not None:
                envelope["params"] = params
            return "", raw or json.dumps(envelope).encode()
        path = f"/{tenant}/message:send" if tenant else "/message:send"
        return path, raw or json.dumps(params).encode()

    async def send(
        self,
        at: httpx.AsyncClient,
        params: Any,
        *,
        raw: bytes | None = None,
        request_id: Any = 7,
        tenant: str = "",
        headers: dict[str, str] | None = None,
    ) -> Answer:
        path, body = self.request(params, raw, request_id, tenant)
        return Answer.of(await at.post(path, content=body, headers=headers))

    async def both(self, params: Any, **given: Any) -> tuple[Answer, Answer]:
        """The answer of the door itself, then the SDK's, to the same request."""
        return await self.send(self.direct, params, **given), await self.send(
            self.sdk, params, **given
        )


@pytest.fixture
async def doors(
    live_server: LiveServer, sdk_server: LiveServer, world: World, binding: str
) -> AsyncIterator[Doors]:
    await world.decide(GateDecision.ALLOW)
    token = await live_server.token(world.roles["requester"])
    headers = {"Authorization": f"Bearer {token}", **A2A_VERSION}
    path = f"/a2a/agents/{world.assignee}"
    async with (
        httpx.AsyncClient(base_url=live_server.url + path, headers=headers, timeout=30) as a,
        httpx.AsyncClient(base_url=sdk_server.url + path, headers=headers, timeout=30) as b,
    ):
        yield Doors(a, b, binding)


def hand_off(world: World, text: str = "Write the release notes", **more: Any) -> dict[str, Any]:
    return {
        "message": {
            "messageId": f"m-{secrets.token_hex(8)}",
            "role": "ROLE_USER",
            "parts": [{"text": text}, {"data": {"project": world.project}}],
            **more,
        },
        "configuration": {"returnImmediately": True},
    }


def task_of(doors: Doors, answer: Answer) -> dict[str, Any]:
    assert answer.status == 200, answer
    body = answer.body["result"] if doors.binding == "JSONRPC" else answer.body
    task: dict[str, Any] = body["task"]
    return task


async def test_a_hand_off_and_its_repeats_are_answered_alike(doors: Doors, world: World) -> None:
    sent = hand_off(world)
    first = await doors.send(doors.direct, sent)
    repeat_sdk = await doors.send(doors.sdk, sent)
    repeat_direct = await doors.send(doors.direct, sent)
    assert task_of(doors, first)["id"] == task_of(doors, repeat_sdk)["id"]
    assert repeat_direct == repeat_sdk
    # A new hand-off answered by the SDK, repeated at the door: the same answer again.
    other = hand_off(world, "Write the changelog")
    new_sdk = await doors.send(doors.sdk, other)
    assert await doors.send(doors.direct, other) == await doors.send(doors.sdk, other)
    assert task_of(doors, new_sdk)["status"]["state"] == "TASK_STATE_SUBMITTED"


async def test_a_hand_off_with_history_a_string_id_and_a_tenant_is_answered_alike(
    doors: Doors, world: World
) -> None:
    sent = hand_off(world)
    sent["configuration"]["historyLength"] = 5
    sent["tenant"] = "t1"
    await doors.send(doors.sdk, sent, request_id="call-1", tenant="t1")
    direct, sdk = await doors.both(sent, request_id="call-1", tenant="t1")
    assert direct == sdk
    assert task_of(doors, direct)["history"]


async def test_replies_to_a_task_are_answered_alike(doors: Doors, world: World) -> None:
    task = task_of(doors, await doors.send(doors.direct, hand_off(world)))
    # Refused replies: one to a task the caller may not move, one to a task that is not there.
    for task_id in (task["id"], "no-such-task"):
        reply = {
            "message": {
                "messageId": f"m-{secrets.token_hex(8)}",
                "role": "ROLE_USER",
                "taskId": task_id,
                "parts": [{"text": "Looks good"}],
            }
        }
        direct, sdk = await doors.both(reply)
        assert direct == sdk
        assert direct.body.get("error"), direct


async def test_a_reply_that_moves_a_task_is_answered_alike(
    doors: Doors, world: World, live_server: LiveServer
) -> None:
    # The assignee accepts two twin tasks by replying: once at the door, once through the SDK.
    token = await live_server.token(world.roles["assignee"])
    auth = {"Authorization": f"Bearer {token}"}
    twins = [task_of(doors, await doors.send(doors.direct, hand_off(world))) for _ in range(2)]
    answers = []
    for at, task in zip((doors.direct, doors.sdk), twins, strict=True):
        reply = {
            "message": {
                "messageId": "m-accept",
                "role": "ROLE_USER",
                "taskId": task["id"],
                "parts": [{"text": "On it"}, {"data": {"move": "acceptTask"}}],
            },
            "configuration": {"returnImmediately": True},
        }
        answer = await doors.send(at, reply, headers=auth)
        answers.append(_without_ids(answer, task))
    assert answers[0] == answers[1]
    assert answers[0].status == 200, answers[0]


# What Baton makes afresh for each task: times, and its messages' ids (from the task's events).
MADE_PER_TASK = frozenset({"timestamp", "messageId"})


def _without_ids(answer: Answer, task: dict[str, Any]) -> Answer:
    """The answer with the task's own ids and times put aside (twins differ in those alone)."""
    names = {task["id"]: "<task>", task["contextId"]: "<context>"}

    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: "<>" if k in MADE_PER_TASK else strip(v) for k, v in value.items()}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return names.get(value, value) if isinstance(value, str) else value

    return Answer(answer.status, answer.media_type, answer.retry_after, strip(answer.body))


def bad(*parts: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {"message": {"messageId": "m-bad", "role": "ROLE_USER", "parts": list(parts), **fields}}


RAW_FILE = {"raw": base64.b64encode(b"\x89PNG").decode(), "mediaType": "image/png"}


@pytest.mark.parametrize(
    "params",
    [
        pytest.param({"message": {"parts": []}}, id="missing-fields"),
        pytest.param({}, id="no-message"),
        pytest.param({"message": {"messageId": {"a": 1}, "parts": "x"}}, id="wrong-types"),
        pytest.param({"message": {"messageId": "m", "role": "ROLE_NOPE"}}, id="unknown-enum"),
        pytest.param(bad({"text": "x"}, {"data": {"colour": "blue"}}), id="unknown-data-key"),
        pytest.param(bad({"text": "look"}, RAW_FILE), id="raw-file-bytes"),
        pytest.param(bad({"text": "x" * 200_000}), id="oversized-part"),
        pytest.param(bad(*[{"text": "x"}] * 33), id="too-many-parts"),
        pytest.param(bad({"text": "a\x00b"}), id="nul"),
        pytest.param([1, 2], id="not-an-object"),
        pytest.param("text", id="a-string"),
    ],
)
async def test_bad_requests_are_refused_alike(doors: Doors, params: Any) -> None:
    direct, sdk = await doors.both(params)
    assert direct == sdk
    assert direct.status != 200 or direct.body.get("error"), direct


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(b'{"message": {"messageId": "a", "messageId": "b"}}', id="duplicate-key"),
        pytest.param(b'{"message": {"parts": [{"text": "x", "text": "y"}]}}', id="duplicate-deep"),
        pytest.param(b'{"jsonrpc": "2.0", "id": true, "method": "SendMessage"}', id="bool-id"),
        pytest.param(b'{"jsonrpc": "2.0", "method": "SendMessage", "params": {}}', id="no-id"),
        pytest.param(b'{"jsonrpc": "1.0", "id": 1, "method": "SendMessage"}', id="old-version"),
        pytest.param(
            b'{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": [1]}', id="list"
        ),
        pytest.param(
            b'{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "extra": 1}', id="extra"
        ),
        pytest.param(
            b'{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":'
            b'{"messageId":"a","messageId":"b"}}}',
            id="duplicate-in-params",
        ),
    ],
)
async def test_odd_bodies_are_refused_alike(doors: Doors, raw: bytes) -> None:
    if doors.binding == "JSONRPC" and not raw.startswith(b'{"jsonrpc'):
        pytest.skip("not a JSON-RPC request: the SDK refuses it, naming fields in no set order")
    direct, sdk = await doors.both(None, raw=raw)
    assert direct == sdk
    assert direct.status != 200 or direct.body.get("error"), direct


async def test_unknown_fields_are_ignored_alike(doors: Doors, world: World) -> None:
    sent = {**hand_off(world), "surplus": 1}
    sent["message"]["surplus"] = {"a": [1]}
    await doors.send(doors.sdk, sent)
    direct, sdk = await doors.both(sent)
    assert direct == sdk
    assert task_of(doors, direct)["id"]


async def test_a_version_the_door_does_not_speak_is_refused_alike(
    doors: Doors, world: World
) -> None:
    direct, sdk = await doors.both(hand_off(world), headers={"A2A-Version": "0.3"})
    assert direct == sdk
    assert "error" in direct.body, direct


async def test_a_huge_body_is_refused_alike(doors: Doors, world: World) -> None:
    direct, sdk = await doors.both(bad({"text": "x" * (2 * 1024 * 1024)}))
    assert direct == sdk and direct.status == 413
