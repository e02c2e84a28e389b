"""The npm A2A client, @a2a-js/sdk (1.3.0, pinned by tests/a2a/npm/package-lock.json, on the
machine's Node), against a real `baton serve`: from nothing but an agent's card URL and a
token it streams a hand-off to the agent, over JSON-RPC and over HTTP+JSON, and follows the
task while the assignee works through GraphQL: the task first, the assignee's moves as status
updates, its checkpoint as a status message, its result as an artifact, the stream closing at
`completed`; then GetTask gives the completed task with its result."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from baton.access.gate import GateDecision
from tests.conftest import LiveServer
from tests.helpers import World
from tests.live.client import HTTPClient
from tests.tools import missing, require

HERE = Path(__file__).parent
CLIENT_SCRIPT = HERE / "a2a_js_client.mjs"
PACKAGE = HERE / "npm"  # package.json and its lock file: @a2a-js/sdk and what it needs
LINE_WAIT = 20.0


@pytest.fixture(scope="session")
def a2a_js_client(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """@a2a-js/sdk installed with `npm ci` from the lock file into a temporary folder, the
    script that drives it beside its node_modules. Without Node, npm or the registry the tests
    skip, except under CI, where that is a failure."""
    npm = require("npm", "apt-get install npm")  # Debian's npm brings Node with it
    folder = tmp_path_factory.mktemp("a2a-js")
    for name in ("package.json", "package-lock.json"):
        shutil.copyfile(PACKAGE / name, folder / name)
    try:
        done = subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=folder,
            capture_output=True,
            text=True,
            timeout=180,
        )
        problem = done.stderr.strip()[-2000:] if done.returncode != 0 else None
    except (OSError, subprocess.TimeoutExpired) as exc:
        problem = str(exc)
    if problem is not None:
        missing("@a2a-js/sdk", f"npm ci failed: {problem}")
    script = folder / CLIENT_SCRIPT.name
    shutil.copyfile(CLIENT_SCRIPT, script)
    return script


class NodeClient:
    """The script's JSON lines, one at a time."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process

    async def line(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        raw = await asyncio.wait_for(self.process.stdout.readline(), LINE_WAIT)
        assert raw, "the client exited without a word"
        line: dict[str, Any] = json.loads(raw)
        assert "error" not in line, line["error"]
        return line

    async def event(self) -> dict[str, Any]:
        line = await self.line()
        assert "event" in line, line
        event: dict[str, Any] = line["event"]
        return event


@asynccontextmanager
async def run_client(
    script: Path, card_url: str, token: str, binding: str, message: dict[str, Any]
) -> AsyncIterator[NodeClient]:
    process = await asyncio.create_subprocess_exec(
        "node",
        str(script),
        card_url,
        token,
        binding,
        json.dumps(message),
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        yield NodeClient(process)
    finally:
        if process.returncode is None:
            process.kill()
        await process.wait()


MOVE = """mutation($in: %s!) { %s(input: $in) { __typename
  ... on MoveSuccess { task { state } } ... on Error { code message } } }"""
PROGRESS, SUMMARY = "Half of the notes written", "Release notes written"
CHECKPOINT = {"progress": PROGRESS, "nextSteps": ["the other half"]}
RESULT = {
    "summary": SUMMARY,
    "evidence": [{"kind": "note", "summary": "every change covered", "content": "all 12"}],
}


async def move(assignee: HTTPClient, name: str, task_id: str, **fields: Any) -> None:
    input_type = name[0].upper() + name[1:] + "Input"
    answer = await assignee(MOVE % (input_type, name), **{"in": {"id": task_id, **fields}})
    assert answer[name]["__typename"] == "MoveSuccess", answer


def state_of(event: dict[str, Any]) -> str | None:
    """The task state an event carries: the task's, or a status update's."""
    if "task" in event:
        return str(event["task"]["status"]["state"])
    if "statusUpdate" in event:
        return str(event["statusUpdate"]["status"]["state"])
    return None


def texts(parts: list[dict[str, Any]]) -> list[str]:
    return [p["text"] for p in parts if "text" in p]


def assert_result(artifacts: list[dict[str, Any]]) -> None:
    """The `result` artifact says the result's summary, and with its data (or an `evidence`
    artifact's) the whole result: the evidence too."""
    by_id = {a["artifactId"]: a for a in artifacts}
    assert SUMMARY in texts(by_id["result"]["parts"])
    data = [p["data"] for a in by_id.values() for p in a["parts"] if "data" in p]
    evidence = [e for d in data for e in d.get("evidence", [])]
    assert [(e["summary"], e["content"]) for e in evidence] == [("every change covered", "all 12")]


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
async def test_the_npm_client_streams_a_hand_off_and_follows_the_assignees_work(
    live_server: LiveServer, world: World, a2a_js_client: Path, binding: str
) -> None:
    await world.decide(GateDecision.ALLOW)
    token = await live_server.token(world.roles["requester"])
    assignee = HTTPClient(live_server.url, await live_server.token(world.roles["assignee"]))
    card_url = f"{live_server.url}/a2a/agents/{world.assignee}/.well-known/agent-card.json"
    message = {
        "role": "ROLE_USER",
        "messageId": f"npm-{world.tag}",
        "parts": [
            {"text": "Write the release notes"},
            {
                "data": {
                    "project": world.project,
                    "deliverableType": "doc",
                    "acceptanceCriteria": ["covers every change"],
                },
                "mediaType": "application/json",
            },
        ],
    }
    try:
        async with run_client(a2a_js_client, card_url, token, binding, message) as client:
            assert await client.line() == {"binding": binding}
            first = await client.event()
            assert "task" in first, first  # the task comes first, as the gate left it
            task_id = first["task"]["id"]
            assert state_of(first) == "TASK_STATE_SUBMITTED"  # routed: not yet accepted
            events = [first]
            await move(assignee, "acceptTask", task_id)
            await move(assignee, "startTask", task_id)
            await move(assignee, "saveCheckpoint", task_id, checkpoint=CHECKPOINT)
            await move(assignee, "submitResult", task_id, result=RESULT)
            while (line := await client.line()) != {"closed": True}:
                events.append(line["event"])
            fetched = (await client.line())["task"]
    finally:
        await assignee.aclose()

    states = [s for s in map(state_of, events) if s is not None]
    # Accepted, started, a checkpoint: working; the result: completed, the last event.
    assert states[0] == "TASK_STATE_SUBMITTED"
    assert set(states[1:-1]) == {"TASK_STATE_WORKING"}
    assert states[-1] == "TASK_STATE_COMPLETED" and state_of(events[-1]) == states[-1]
    assert all(e[kind]["taskId"] == task_id for e in events[1:] for kind in e if kind != "task"), (
        "an update of another task"
    )
    # The checkpoint, as a status message.
    said = [
        text
        for e in events
        if "statusUpdate" in e and "message" in e["statusUpdate"]["status"]
        for text in texts(e["statusUpdate"]["status"]["message"]["parts"])
    ]
    assert any(PROGRESS in text for text in said), said
    # The result as the `result` artifact (its summary as text, all of it as data, the
    # evidence with it), before the task completes.
    artifacts = [e["artifactUpdate"]["artifact"] for e in events if "artifactUpdate" in e]
    assert "result" in [a["artifactId"] for a in artifacts]
    assert_result(artifacts)
    kinds = [next(iter(e)) for e in events]
    assert max(i for i, k in enumerate(kinds) if k == "artifactUpdate") < len(kinds) - 1

    # GetTask: the completed task, its result among its artifacts, its context kept, its
    # history opening with the client's own message.
    assert fetched["id"] == task_id
    assert fetched["status"]["state"] == "TASK_STATE_COMPLETED"
    assert fetched["contextId"] == first["task"]["contextId"]
    handed = fetched["history"][0]
    assert (handed["messageId"], handed["role"]) == (message["messageId"], "ROLE_USER")
    assert texts(handed["parts"])[0] == "Write the release notes"
    assert_result(fetched["artifacts"])
