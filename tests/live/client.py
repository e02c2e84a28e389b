"""A small GraphQL-over-WebSocket client speaking both subprotocols, for tests.

It exposes what the tests check (close codes, message order) that a full client hides.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any

import httpx
from websockets.asyncio.client import ClientConnection, connect

from tests.helpers import PACKET_INPUT

TRANSPORT_WS = "graphql-transport-ws"
LEGACY_WS = "graphql-ws"
PROTOCOLS = (TRANSPORT_WS, LEGACY_WS)


class SubscriptionError(Exception):
    pass


class WSClient:
    def __init__(self, ws: ClientConnection, protocol: str) -> None:
        self.ws = ws
        self.protocol = protocol
        self._ids = itertools.count(1)

    @classmethod
    async def open(cls, http_url: str, token: str | None, protocol: str) -> WSClient:
        url = http_url.replace("http://", "ws://") + "/graphql"
        ws = await connect(url, subprotocols=[protocol], open_timeout=10)  # type: ignore[list-item]
        client = cls(ws, protocol)
        payload = {"authorization": f"Bearer {token}"} if token is not None else {}
        await client._send({"type": "connection_init", "payload": payload})
        message = await client._receive(10)
        if message["type"] != "connection_ack":
            raise SubscriptionError(message)
        return client

    async def close(self) -> None:
        await self.ws.close()

    async def _send(self, message: dict[str, Any]) -> None:
        await self.ws.send(json.dumps(message))

    async def _receive(self, wait: float) -> dict[str, Any]:
        while True:
            raw = await asyncio.wait_for(self.ws.recv(), wait)
            message: dict[str, Any] = json.loads(raw)
            if message["type"] not in ("ka", "ping", "pong"):
                return message

    async def subscribe(self, query: str, variables: dict[str, Any] | None = None) -> str:
        op_id = str(next(self._ids))
        kind = "subscribe" if self.protocol == TRANSPORT_WS else "start"
        payload = {"query": query, "variables": variables or {}}
        await self._send({"id": op_id, "type": kind, "payload": payload})
        return op_id

    async def next(self, wait: float = 10) -> dict[str, Any] | None:
        """The next result's `data`, or None once the server completes the operation; raises
        `SubscriptionError` with the list of errors of a result or of an `error` message, and
        which of the two it was (`args[1]`)."""
        message = await self._receive(wait)
        if message["type"] in ("next", "data"):
            if message["payload"].get("errors"):
                raise SubscriptionError(message["payload"]["errors"], message["type"])
            return message["payload"]["data"]  # type: ignore[no-any-return]
        if message["type"] == "complete":
            return None
        if message["type"] == "error":  # the legacy protocol's carries one error, not a list
            payload = message["payload"]
            raise SubscriptionError(payload if isinstance(payload, list) else [payload], "error")
        raise SubscriptionError(message)

    async def collect(self, count: int, wait: float = 15) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        while len(out) < count:
            data = await self.next(wait)
            if data is None:
                break
            out.append(data)
        return out


class HTTPClient:
    """GraphQL over HTTP with a bearer token; fails the test on GraphQL errors."""

    def __init__(self, base_url: str, token: str) -> None:
        self.http = httpx.AsyncClient(
            base_url=base_url, headers={"Authorization": f"Bearer {token}"}, timeout=30
        )

    async def __call__(self, query: str, **variables: Any) -> dict[str, Any]:
        response = await self.http.post("/graphql", json={"query": query, "variables": variables})
        body = response.json()
        assert response.status_code == 200 and "errors" not in body, body
        return body["data"]  # type: ignore[no-any-return]

    async def aclose(self) -> None:
        await self.http.aclose()


HAND_OFF = """
mutation($project: String!, $requester: String!, $assignee: String!, $packet: PacketInput!,
         $verification: VerificationMode) {
  handOff(input: {project: $project, requester: $requester, assignee: $assignee,
                  packet: $packet, verification: $verification}) {
    __typename
    ... on HandOffSuccess { task { id state version } events { id kind } }
    ... on Error { code message }
  }
}
"""


async def hand_off_via(
    client: HTTPClient, project: str, requester: str, assignee: str, **extra: Any
) -> dict[str, Any]:
    """`handOff` with the standard packet; the union member it answered."""
    data = await client(
        HAND_OFF,
        project=project,
        requester=requester,
        assignee=assignee,
        packet=PACKET_INPUT,
        **extra,
    )
    return data["handOff"]  # type: ignore[no-any-return]


EVENT_FIELDS = "id kind taskId move fromState toState actor task { id state version }"

TASK_EVENTS = f"""
subscription($filter: TaskEventFilter, $after: ID) {{
  taskEvents(filter: $filter, after: $after) {{ {EVENT_FIELDS} }}
}}
"""


def move_mutation(name: str, extra: str = "") -> str:
    return f"""
mutation($id: ID!) {{
  {name}(input: {{id: $id{extra}}}) {{
    __typename
    ... on MoveSuccess {{ task {{ state version }} events {{ id }} }}
    ... on Error {{ code message }}
  }}
}}
"""
