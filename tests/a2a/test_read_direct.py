"""GetTask, ListTasks and CancelTask answered by the door itself, over both bindings, against the
same requests answered through the SDK's dispatchers (`test_send_direct`'s second `baton serve`
on the same database, its door set to use them): the same statuses, media types and JSON for
tasks that are there, hidden or missing, every kind of historyLength, bad params and envelopes."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from baton.protocol.handoff import MoveName, TaskState, WaitingOn
from baton.store.records import TaskRecord
from tests.a2a.conftest import A2A_VERSION
from tests.a2a.test_send_direct import Answer, sdk_server
from tests.conftest import LiveServer
from tests.helpers import World, agent, checkpoint

__all__ = ["sdk_server"]  # the module's fixture, used here too

# A request: HTTP method, path under the agent's URL ("" for JSON-RPC), body, extra headers.
Request = tuple[str, str, bytes | None, dict[str, str]]


@dataclass
class Doors:
    """The agent's URL at the door answering itself, and at the one using the SDK's."""

    direct: httpx.AsyncClient
    sdk: httpx.AsyncClient

    async def both(self, request: Request) -> tuple[Answer, Answer]:
        verb, path, body, headers = request
        answers = []
        for at in (self.direct, self.sdk):
            response = await at.request(verb, path, content=body, headers=headers)
            answers.append(Answer.of(response))
        return answers[0], answers[1]

    async def alike(self, requests: dict[str, Request]) -> dict[str, Answer]:
        """Each request's answer, the same from both servers."""
        answers = {}
        for name, request in requests.items():
            direct, sdk = await self.both(request)
            assert direct == sdk, (name, direct, sdk)
            answers[name] = direct
        return answers


async def _doors(live_server: LiveServer, sdk_server: LiveServer, world: World, agent: str) -> Any:
    token = await live_server.token(world.roles["requester"])
    headers = {"Authorization": f"Bearer {token}", **A2A_VERSION}
    path = f"/a2a/agents/{agent}"
    return (
        httpx.AsyncClient(base_url=live_server.url + path, headers=headers, timeout=30),
        httpx.AsyncClient(base_url=sdk_server.url + path, headers=headers, timeout=30),
    )


@pytest.fixture
async def doors(
    live_server: LiveServer, sdk_server: LiveServer, world: World
) -> AsyncIterator[Doors]:
    a, b = await _doors(live_server, sdk_server, world, world.assignee)
    async with a, b:
        yield Doors(a, b)


def rpc(method: str, params: Any = None, request_id: Any = 7, **more: Any) -> Request:
    envelope: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method, **more}
    if params is not None:
        envelope["params"] = params
    return "POST", "", json.dumps(envelope).encode(), {}


def raw(body: bytes, **headers: str) -> Request:
    return "POST", "", body, headers


def get(path: str, **headers: str) -> Request:
    return "GET", path, None, headers


async def _tasks(world: World) -> dict[str, TaskRecord]:
    return {
        "working": await world.task_in(TaskState.working),
        "completed": await world.task_in(TaskState.completed),  # its result: artifacts
        "approval": await world.task_in(TaskState.waiting, WaitingOn.owner_approval),
    }


def get_task_corpus(task_id: str) -> dict[str, Request]:
    """GetTask of `task_id`, over both bindings, well and badly asked."""
    corpus: dict[str, Request] = {
        "rpc": rpc("GetTask", {"id": task_id}),
        "rpc-string-id": rpc("GetTask", {"id": task_id}, request_id="call-1"),
        "rpc-tenant": rpc("GetTask", {"id": task_id, "tenant": "t1"}),
        "rpc-unknown-field": rpc("GetTask", {"id": task_id, "surplus": {"a": [1]}}),
        "rpc-proto-name": rpc("GetTask", {"id": task_id, "history_length": 1}),
        "rpc-both-names": rpc("GetTask", {"id": task_id, "history_length": 1, "historyLength": 2}),
        "rpc-empty-id": rpc("GetTask", {"id": ""}),
        "rpc-tenant-number": rpc("GetTask", {"id": task_id, "tenant": 1}),
        "rpc-no-params": rpc("GetTask"),
        "rpc-no-id": rpc("GetTask", {}),
        "rpc-id-number": rpc("GetTask", {"id": 5}),
        "rpc-id-list": rpc("GetTask", {"id": [task_id]}),
        "rpc-id-null": rpc("GetTask", {"id": None}),
        "rpc-params-list": rpc("GetTask", [task_id]),
        "rpc-params-null": raw(b'{"jsonrpc":"2.0","id":1,"method":"GetTask","params":null}'),
        "rpc-no-envelope-id": raw(b'{"jsonrpc":"2.0","method":"GetTask","params":{"id":"x"}}'),
        "rpc-bool-id": rpc("GetTask", {"id": task_id}, request_id=True),
        "rpc-float-id": rpc("GetTask", {"id": task_id}, request_id=1.5),
        "rpc-old-version": raw(b'{"jsonrpc":"1.0","id":1,"method":"GetTask","params":{}}'),
        "rpc-extra-member": rpc("GetTask", {"id": task_id}, extra=1),
        "rpc-a2a-0.3": (*rpc("GetTask", {"id": task_id})[:3], {"A2A-Version": "0.3"}),
        "rpc-no-version": (*rpc("GetTask", {"id": task_id})[:3], {"A2A-Version": ""}),
        "rest": get(f"/tasks/{task_id}"),
        "rest-tenant": get(f"/t1/tasks/{task_id}"),
        "rest-unknown-param": get(f"/tasks/{task_id}?surplus=1"),
        "rest-a2a-0.3": get(f"/tasks/{task_id}", **{"A2A-Version": "0.3"}),
        "rest-colon": get(f"/tasks/{task_id}:cancel"),
        "rest-with-body": ("GET", f"/tasks/{task_id}", b'{"historyLength": 0}', {}),
    }
    for history in (0, 1, 2, 100, 101, 5000, -1, 2**31, "3", "x", 1.5, None, True):
        corpus[f"rpc-history-{history}"] = rpc("GetTask", {"id": task_id, "historyLength": history})
    for query in ("0", "1", "2", "100", "101", "-1", "x", "1.5", "", "2&historyLength=0"):
        corpus[f"rest-history-{query}"] = get(f"/tasks/{task_id}?historyLength={query}")
    return corpus


async def test_tasks_are_read_alike(doors: Doors, world: World) -> None:
    for name, task in (await _tasks(world)).items():
        answers = await doors.alike(get_task_corpus(task.id))
        assert answers["rpc"].body["result"]["id"] == task.id, name
        assert answers["rest"].body["id"] == task.id, name
        assert answers["rest"].media_type == "application/a2a+json"
        assert answers["rpc-history-0"].body["result"].get("history") is None
        assert answers["rest-history-1"].body["history"]
        assert answers["rpc-no-id"].body["error"]["code"] == -32602
        assert answers["rest-history-x"].status == 400
        assert bool(answers["rest"].body.get("artifacts")) == (name == "completed")


async def test_missing_and_hidden_tasks_are_refused_alike(
    doors: Doors, world: World, live_server: LiveServer, sdk_server: LiveServer
) -> None:
    task = await world.task_in(TaskState.working)
    missing = {**get_task_corpus("no-such-task"), **get_task_corpus(f"{task.id}x")}
    for name, answer in (await doors.alike(missing)).items():
        assert answer.status != 200 or "error" in answer.body, (name, answer)
    not_found = (await doors.alike({"rpc": rpc("GetTask", {"id": "no-such-task"})}))["rpc"]
    assert not_found.body["error"]["code"] == -32001  # TaskNotFoundError
    # Another agent's URL does not show the task; nor does the token of someone else's agent.
    a, b = await _doors(live_server, sdk_server, world, world.roles["assignee_sibling"].handle)
    async with a, b:
        other = Doors(a, b)
        for name, answer in (await other.alike(get_task_corpus(task.id))).items():
            assert answer.status != 200 or "error" in answer.body, (name, answer)
    token = await live_server.token(world.roles["outsider_agent"])
    outsider = {"Authorization": f"Bearer {token}"}
    for request in (rpc("GetTask", {"id": task.id}), get(f"/tasks/{task.id}")):
        direct, sdk = await doors.both((*request[:3], outsider))
        assert direct == sdk
        assert direct.status == 404 or direct.body["error"]["code"] == -32001, direct


async def test_tasks_are_listed_alike(doors: Doors, world: World) -> None:
    await _tasks(world)
    corpus: dict[str, Request] = {
        "rpc": rpc("ListTasks", {}),
        "rpc-no-params": rpc("ListTasks"),
        "rpc-page": rpc("ListTasks", {"pageSize": 2}),
        "rpc-page-0": rpc("ListTasks", {"pageSize": 0}),
        "rpc-page-x": rpc("ListTasks", {"pageSize": "x"}),
        "rpc-history": rpc("ListTasks", {"historyLength": 3, "includeArtifacts": True}),
        "rpc-history-big": rpc("ListTasks", {"historyLength": 100}),
        "rpc-state": rpc("ListTasks", {"status": "TASK_STATE_WORKING"}),
        "rpc-state-unknown": rpc("ListTasks", {"status": "TASK_STATE_NOPE"}),
        "rpc-token": rpc("ListTasks", {"pageToken": "not-a-token"}),
        "rpc-unknown-field": rpc("ListTasks", {"surplus": 1}),
        "rpc-tenant": rpc("ListTasks", {"tenant": "t1"}),
        "rest": get("/tasks"),
        "rest-tenant": get("/t1/tasks"),
        "rest-page": get("/tasks?pageSize=2&includeArtifacts=true&historyLength=1"),
        "rest-page-x": get("/tasks?pageSize=x"),
        "rest-state": get("/tasks?status=TASK_STATE_COMPLETED"),
        "rest-a2a-0.3": get("/tasks", **{"A2A-Version": "0.3"}),
    }
    answers = await doors.alike(corpus)
    assert len(answers["rest"].body["tasks"]) == 3
    assert len(answers["rpc-page"].body["result"]["tasks"]) == 2
    first = answers["rpc-page"].body["result"]["nextPageToken"]
    following = {
        "rpc": rpc("ListTasks", {"pageSize": 2, "pageToken": first}),
        "rest": get(f"/tasks?pageSize=2&pageToken={first}"),
    }
    assert len((await doors.alike(following))["rest"].body["tasks"]) == 1


def cancel(task_id: str) -> dict[str, Request]:
    return {
        "rpc": rpc("CancelTask", {"id": task_id}),
        "rpc-no-id": rpc("CancelTask", {}),
        "rpc-id-number": rpc("CancelTask", {"id": 3}),
        "rest": ("POST", f"/tasks/{task_id}:cancel", None, {}),
        "rest-tenant": ("POST", f"/t1/tasks/{task_id}:cancel", None, {}),
        "rest-a2a-0.3": ("POST", f"/tasks/{task_id}:cancel", None, {"A2A-Version": "0.3"}),
    }


async def test_cancels_are_answered_alike(doors: Doors, world: World) -> None:
    completed = await world.task_in(TaskState.completed)
    refused = await doors.alike({**cancel(completed.id), **cancel("no-such-task")})
    assert refused["rpc"].body["error"]["code"] in (-32001, -32002)
    # A task cancelled at the door answers as it is, at either door (cancel is idempotent).
    working = await world.task_in(TaskState.working)
    first = await doors.direct.post(
        "", json={"jsonrpc": "2.0", "id": 1, "method": "CancelTask", "params": {"id": working.id}}
    )
    assert first.json()["result"]["status"]["state"] == "TASK_STATE_CANCELED"
    again = await doors.alike(cancel(working.id))
    assert again["rest"].body == first.json()["result"]


async def test_a_task_read_again_after_it_moved_is_answered_as_it_is_now(
    doors: Doors, world: World
) -> None:
    # The door keeps a task's rendered answer per version: a move must show at the next read.
    task = await world.task_in(TaskState.working)
    before = await doors.alike(get_task_corpus(task.id))
    await world.move(task, MoveName.PAUSE, waiting_on=WaitingOn.human)
    after = await doors.alike(get_task_corpus(task.id))
    assert after["rest"].body != before["rest"].body
    assert after["rest"].body["metadata"]["baton"]["state"] == "waiting"
    # A checkpoint saved on the task shows at the next read too.
    working = await world.task_in(TaskState.working)
    before = await doors.alike(get_task_corpus(working.id))
    saved = checkpoint(progress="Drafted the outline")
    await world.service.save_checkpoint(agent(world.assignee), working.id, saved)
    after = await doors.alike(get_task_corpus(working.id))
    assert "Drafted the outline" in json.dumps(after["rest"].body)
    assert "Drafted the outline" not in json.dumps(before["rest"].body)
