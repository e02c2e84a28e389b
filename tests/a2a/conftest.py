"""A2A clients for the tests: the official SDK's (`a2a.client`), made from an agent's card URL
and a bearer token, over either binding, against a real `baton serve`; GraphQL for the other
side of a hand-off (the assignee working, the owner approving)."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import Client, ClientConfig, ClientFactory
from a2a.client.errors import A2AClientError
from a2a.helpers.proto_helpers import new_data_part, new_text_part
from a2a.types.a2a_pb2 import (
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    StreamResponse,
    Task,
    TaskState,
)
from a2a.utils.constants import TransportProtocol
from a2a.utils.errors import A2AError

from baton.store.db import Database
from tests.conftest import LiveServer, start_server, stop_server
from tests.live.client import HTTPClient

BINDINGS = (TransportProtocol.JSONRPC.value, TransportProtocol.HTTP_JSON.value)
A2A_VERSION = {"A2A-Version": "1.0"}


@pytest.fixture(params=BINDINGS)
def binding(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def agent_url(server: LiveServer, agent: str) -> str:
    return f"{server.url}/a2a/agents/{agent}"


@asynccontextmanager
async def a2a_client(
    base_url: str, token: str, binding: str, *, streaming: bool = False
) -> AsyncIterator[Client]:
    """The SDK's client for the agent at `base_url`, from its card, speaking `binding` only."""
    http = httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30)
    config = ClientConfig(
        httpx_client=http,
        supported_protocol_bindings=[binding],
        streaming=streaming,
    )
    try:
        client = await ClientFactory(config).create_from_url(base_url)
        yield client
    finally:
        await http.aclose()


def message(
    text: str | None = "Write the release notes",
    data: dict[str, Any] | None = None,
    *,
    task_id: str = "",
    context_id: str = "",
    parts: list[Part] | None = None,
    reference_task_ids: list[str] | None = None,
) -> Message:
    """A user message: `text` as a text part, `data` as a JSON data part."""
    given = list(parts or [])
    if text is not None:
        given.insert(0, new_text_part(text))
    if data is not None:
        given.append(new_data_part(data, "application/json"))
    return Message(
        message_id=f"m-{secrets.token_hex(8)}",
        role=Role.ROLE_USER,
        parts=given,
        task_id=task_id,
        context_id=context_id,
        reference_task_ids=reference_task_ids or [],
    )


async def send(client: Client, sent: Message, **configuration: Any) -> Task:
    """SendMessage, returning at once unless `configuration` says otherwise: the Task."""
    configuration.setdefault("return_immediately", True)
    request = SendMessageRequest(
        message=sent, configuration=SendMessageConfiguration(**configuration)
    )
    answers = [answer async for answer in client.send_message(request)]
    assert len(answers) == 1 and answers[0].HasField("task"), answers
    return answers[0].task


async def get(client: Client, task_id: str, history: int | None = None) -> Task:
    request = GetTaskRequest(id=task_id)
    if history is not None:
        request.history_length = history
    return await client.get_task(request)


async def refused(call: Any) -> A2AError:
    """The A2A error a call raised (the test fails if it did not)."""
    try:
        await call
    except A2AError as error:
        return error
    except A2AClientError as error:  # pragma: no cover - a failure shows what came back
        raise AssertionError(f"not an A2A error: {error!r}") from error
    raise AssertionError("the call was not refused")


def code_of(error: A2AError) -> str | None:
    """Baton's code, from the error's data (the ErrorInfo metadata of either binding)."""
    data = error.data or {}
    return data.get("code") if isinstance(data, dict) else None


def state(task: Task) -> str:
    """The task's A2A state by name: `TASK_STATE_WORKING`."""
    return TaskState.Name(task.status.state)


def kinds(events: list[StreamResponse]) -> list[str]:
    return [str(e.WhichOneof("payload")) for e in events]


MOVE = """mutation($in: %s!) { %s(input: $in) { __typename
  ... on MoveSuccess { task { state version } } ... on Error { code message } } }"""


async def move(graphql: HTTPClient, name: str, task_id: str, **fields: Any) -> dict[str, Any]:
    """A move over GraphQL (`name` its mutation), which must succeed: the task after it."""
    input_type = name[0].upper() + name[1:] + "Input"
    answer = await graphql(MOVE % (input_type, name), **{"in": {"id": task_id, **fields}})
    assert answer[name]["__typename"] == "MoveSuccess", answer
    task: dict[str, Any] = answer[name]["task"]
    return task


@asynccontextmanager
async def graphql_as(server: LiveServer, principal: Any) -> AsyncIterator[HTTPClient]:
    client = HTTPClient(server.url, await server.token(principal))
    try:
        yield client
    finally:
        await client.aclose()


# --- a server with small stream bounds -----------------------------------------------------

# The bounds of `bounded_server`: small enough for a test to reach them.
LIMITS = {
    "BATON_TOKEN_CHECK_SECONDS": "1",
    "BATON_SSE_KEEP_ALIVE_SECONDS": "0.3",
    "BATON_SSE_MAX_STREAMS": "5",
    "BATON_SSE_MAX_STREAMS_PER_TOKEN": "3",
    "BATON_SSE_MAX_QUEUED_BYTES": "65536",
    "BATON_A2A_BLOCKING_SECONDS": "1",
}


@dataclass
class BoundedServer(LiveServer):
    log: Path = Path()  # what the server logs (warnings and up)


@pytest.fixture(scope="session")
def bounded_server(
    database_url: str, db: Database, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[BoundedServer]:
    """`baton serve` with the stream bounds of `LIMITS`."""
    log = tmp_path_factory.mktemp("a2a-bounded") / "serve.log"
    url, process = start_server({"BATON_DATABASE_URL": database_url, **LIMITS}, log)
    yield BoundedServer(url, db, process, log)
    stop_server(process)
