"""What `scripts/a2a-tck` puts between the conformance kit and Baton, without the kit (which CI
does not fetch): the plugin that gives the kit's requests a token and changes its messages as
documented, and the worker's plan for the kit's scenarios, against a real `baton serve`."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
from bench.a2a_tck import BEARER_PLUGIN, KitScenarios
from bench.a2a_worker import Worker

from baton.access.gate import GateDecision
from baton.protocol.handoff import TaskState, WaitingOn
from tests.conftest import LiveServer
from tests.helpers import World

# The kit's requests, through the plugin, to an httpx transport that answers each with what it
# was sent: (method, URL, Authorization, body).
KIT = """
import json, sys
import httpx
import baton_bearer  # noqa: F401  (patches httpx.Client.send, as `-p baton_bearer` does)

seen = []
def answer(request):
    body = json.loads(request.content) if request.content else None
    seen.append([request.url.path, request.headers.get("authorization"), body])
    return httpx.Response(200, json={})

client = httpx.Client(transport=httpx.MockTransport(answer))
for url, body in json.loads(sys.argv[1]):
    client.post(url, json=body)
print(json.dumps(seen))
"""


def through_plugin(tmp_path: Path, env: dict[str, str], requests: list[Any]) -> list[Any]:
    (tmp_path / "baton_bearer.py").write_text(BEARER_PLUGIN)
    done = subprocess.run(
        [sys.executable, "-c", KIT, json.dumps(requests)],
        env={
            "PYTHONPATH": str(tmp_path),
            "BATON_TCK_BEARER": "secret",
            "BATON_TCK_ORIGIN": "http://baton:1",
            **env,
        },
        capture_output=True,
        text=True,
        check=True,
    )
    seen: list[Any] = json.loads(done.stdout)
    return seen


def message(message_id: str, **more: Any) -> dict[str, Any]:
    return {"role": "ROLE_USER", "messageId": message_id, "parts": [{"text": "x"}], **more}


def test_the_plugin_gives_only_batons_requests_the_token(tmp_path: Path) -> None:
    seen = through_plugin(
        tmp_path,
        {},
        [
            ["http://baton:1/a2a/agents/o/a", {"jsonrpc": "2.0", "method": "GetTask"}],
            ["http://elsewhere:1/hook", {"x": 1}],
        ],
    )
    assert [auth for _, auth, _ in seen] == ["Bearer secret", None]
    assert seen[0][2] == {"jsonrpc": "2.0", "method": "GetTask"}  # nothing else changed


def test_the_plugin_makes_the_kits_message_ids_unique_keeping_their_prefix(
    tmp_path: Path,
) -> None:
    rpc = {"jsonrpc": "2.0", "method": "SendMessage"}
    seen = through_plugin(
        tmp_path,
        {"BATON_TCK_UNIQUE_IDS": "1"},
        [
            ["http://baton:1/a", {**rpc, "params": {"message": message("tck-complete-task-s")}}],
            ["http://baton:1/a/message:send", {"message": message("tck-complete-task-s")}],
            ["http://baton:1/a/message:send", {"message": message("")}],  # the kit's bad input
        ],
    )
    ids = [(body.get("params") or body)["message"]["messageId"] for _, _, body in seen]
    assert ids == ["tck-complete-task-s-1", "tck-complete-task-s-2", ""]


def test_the_plugin_says_the_input_required_scenario_in_batons_words(tmp_path: Path) -> None:
    seen = through_plugin(
        tmp_path,
        {"BATON_TCK_REVIEW": "1"},
        [
            ["http://baton:1/a/message:send", {"message": message("tck-input-required-s")}],
            [
                "http://baton:1/a/message:send",
                {"message": message("tck-complete-task-s", taskId="t1")},
            ],
            ["http://baton:1/a/message:send", {"message": message("tck-complete-task-s")}],
        ],
    )
    data = [[p.get("data") for p in body["message"]["parts"][1:]] for _, _, body in seen]
    assert data == [[{"verification": "REVIEW"}], [{"move": "completeTask"}], []]
    assert [body["message"]["messageId"] for _, _, body in seen] == [
        "tck-input-required-s",
        "tck-complete-task-s",
        "tck-complete-task-s",
    ]


async def test_the_worker_acts_out_the_kits_scenarios_read_from_the_message_id(
    live_server: LiveServer, world: World
) -> None:
    """An input-required task is parked waiting on a person (Baton's INPUT_REQUIRED is the
    requester's turn); a text-artifact task is finished with the text the kit checks."""
    await world.decide(GateDecision.ALLOW)
    requester = await live_server.token(world.roles["requester"])
    assignee = await live_server.token(world.roles["assignee"])
    base = f"{live_server.url}/a2a/agents/{world.assignee}"
    headers = {"Authorization": f"Bearer {requester}", "A2A-Version": "1.0"}
    scenarios = KitScenarios(live_server.url, assignee, world.assignee)
    worker = Worker(live_server.url, assignee, plan=scenarios)
    working = asyncio.create_task(worker.run())
    try:
        await asyncio.wait_for(worker.listening.wait(), 20)
        sent: dict[str, str] = {}
        async with httpx.AsyncClient(headers=headers, timeout=30) as http:
            for message_id in (f"tck-input-required-{world.tag}", f"tck-artifact-text-{world.tag}"):
                body = {
                    "message": {
                        **message(message_id),
                        "parts": [
                            {"text": "TCK"},
                            {"data": {"project": world.project}, "mediaType": "application/json"},
                        ],
                    },
                    "configuration": {"returnImmediately": True},
                }
                answer = await http.post(f"{base}/message:send", json=body)
                assert answer.status_code == 200, answer.text
                sent[message_id] = answer.json()["task"]["id"]
        await asyncio.wait_for(worker.finished(*sent.values()), 20)
    finally:
        working.cancel()
        await asyncio.gather(working, return_exceptions=True)
    parked, finished = sent.values()
    assert scenarios.seen == {task_id: message_id for message_id, task_id in sent.items()}
    task = await world.service.get(world.roles["assignee"], parked)
    assert (task.state, task.waiting_on) == (TaskState.waiting, WaitingOn.human)
    task = await world.service.get(world.roles["assignee"], finished)
    assert task.state is TaskState.completed
    assert task.result is not None and task.result["summary"] == "Generated text content"
