"""A fresh machine: `baton serve` with no database URL, driven over real HTTP."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import start_server, stop_server
from tests.helpers import PACKET_INPUT, RESULT_INPUT


@pytest.fixture(scope="module")
def embedded_env() -> Iterator[dict[str, str]]:
    with tempfile.TemporaryDirectory(prefix="baton-e2e-", dir="/tmp") as tmp:
        env = {k: v for k, v in os.environ.items() if k != "BATON_DATABASE_URL"}
        env["BATON_DATA_DIR"] = str(Path(tmp) / "data")
        yield env


@pytest.fixture(scope="module")
def embedded_server(
    embedded_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    log = tmp_path_factory.mktemp("embedded") / "serve.log"
    url, process = start_server(embedded_env, log, inherit=False)
    yield url
    stop_server(process)


def mint(env: dict[str, str], *args: str) -> str:
    """`baton token create …`, which must print only the token."""
    out = subprocess.run(
        [sys.executable, "-m", "baton.cli", "token", "create", *args],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    assert out.count("\n") == 1 and out.startswith("baton_"), out
    return out.strip()


class Client:
    def __init__(self, url: str, token: str) -> None:
        self.http = httpx.Client(
            base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30
        )

    def __call__(self, query: str, **variables: Any) -> dict[str, Any]:
        response = self.http.post("/graphql", json={"query": query, "variables": variables})
        assert response.status_code == 200, response.text
        body = response.json()
        assert "errors" not in body, body
        return body["data"]  # type: ignore[no-any-return]


MOVE = """
mutation($id: ID!) {{
  {name}(input: {{id: $id}}) {{
    __typename
    ... on MoveSuccess {{ task {{ state version }} events {{ move fromState toState }} }}
    ... on Error {{ code message }}
  }}
}}
"""


def move(client: Client, name: str, task_id: str, expected: str) -> None:
    answer = client(MOVE.format(name=name), id=task_id)[name]
    assert answer["__typename"] == "MoveSuccess", answer
    assert answer["task"]["state"] == expected


@pytest.fixture
def client_for(
    embedded_server: str, embedded_env: dict[str, str]
) -> Iterator[Callable[[str], Client]]:
    """A GraphQL client holding a fresh token for a principal; closed after the test."""
    opened: list[Client] = []

    def make(principal: str) -> Client:
        opened.append(Client(embedded_server, mint(embedded_env, "--principal", principal)))
        return opened[-1]

    yield make
    for client in opened:
        client.http.close()


def test_hand_off_route_accept_start_submit_complete_over_http(
    client_for: Callable[[str], Client],
) -> None:
    requester = client_for("bob/writer")
    assignee = client_for("alice/coder")
    alice = client_for("alice")

    rule = alice(
        """mutation { setGateRule(input: {requester: "bob/*", decision: EXTERNAL}) {
             __typename ... on GateRuleSuccess { rule { id decision } } } }"""
    )["setGateRule"]
    assert rule["rule"]["decision"] == "EXTERNAL"

    handed = requester(
        """mutation($packet: PacketInput!) {
             handOff(input: {project: "site", requester: "bob/writer", assignee: "alice/coder",
                             packet: $packet, verification: REVIEW}) {
               __typename ... on HandOffSuccess { task { id state version } events { kind } }
             } }""",
        packet=PACKET_INPUT,
    )["handOff"]
    assert handed["__typename"] == "HandOffSuccess"
    assert handed["task"]["state"] == "requested"
    task_id = handed["task"]["id"]

    move(alice, "routeTask", task_id, "routed")
    move(assignee, "acceptTask", task_id, "accepted")
    move(assignee, "startTask", task_id, "working")
    submitted = assignee(
        """mutation($id: ID!, $result: ResultInput!) {
             submitResult(input: {id: $id, result: $result}) {
               __typename ... on MoveSuccess { task { state result { returnedBy } } } } }""",
        id=task_id,
        result=RESULT_INPUT,
    )["submitResult"]
    assert submitted["task"] == {"state": "verifying", "result": {"returnedBy": "alice/coder"}}
    move(requester, "completeTask", task_id, "completed")

    history = requester(
        """query($id: ID!) { task(id: $id) { version
             events { edges { node { kind fromState toState actor } } } } }""",
        id=task_id,
    )["task"]
    states = [e["node"]["toState"] for e in history["events"]["edges"]]
    assert states == ["requested", "routed", "accepted", "working", "verifying", "completed"]
    assert history["version"] == 6

    # An outsider sees nothing of it.
    outsider = client_for("carol")
    assert outsider("query($id: ID!) { task(id: $id) { id } }", id=task_id) == {"task": None}


def test_readyz_reports_the_embedded_database_at_head(embedded_server: str) -> None:
    ready = httpx.get(f"{embedded_server}/readyz", timeout=10)
    assert ready.status_code == 200
    assert ready.json()["status"] == "ready"
