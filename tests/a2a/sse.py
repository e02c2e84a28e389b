"""A2A streams read by hand (httpx-sse), for what the SDK's client hides: each event's `id:`,
`Last-Event-ID`, and how a stream ends."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
from httpx_sse import EventSource, aconnect_sse

from tests.a2a.conftest import A2A_VERSION


@dataclass
class Update:
    """One event of a stream: its id, its SSE name, and the StreamResponse (or error) it
    carries, unwrapped from JSON-RPC's response."""

    id: str
    event: str
    body: dict[str, Any]

    @property
    def kind(self) -> str:
        (kind,) = self.body
        return kind

    @property
    def label(self) -> str:
        """Its state, or `artifact:<id>` for an artifact update (as `AFTER_WORK` lists them)."""
        if "artifactUpdate" in self.body:
            return f"artifact:{self.body['artifactUpdate']['artifact']['artifactId']}"
        return self.state or self.kind

    @property
    def state(self) -> str | None:
        if "task" in self.body:
            return str(self.body["task"]["status"]["state"])
        if "statusUpdate" in self.body:
            return str(self.body["statusUpdate"]["status"]["state"])
        return None


class Stream:
    def __init__(self, source: EventSource, binding: str) -> None:
        self.source = source
        self.binding = binding
        self.response = source.response
        self._events = source.aiter_sse()

    async def next(self, wait: float = 20) -> Update | None:
        """The next event, or None once the stream has ended. httpx-sse makes an event of
        every comment once an id was seen (the id stays the last one): those are skipped."""
        while True:
            try:
                sse = await asyncio.wait_for(anext(self._events), wait)
            except StopAsyncIteration:
                return None
            if sse.data:
                break
        data = json.loads(sse.data)
        if self.binding == "JSONRPC":
            data = data.get("result", data)
        return Update(sse.id, sse.event, data)

    async def take(self, count: int, wait: float = 20) -> list[Update]:
        out = []
        for _ in range(count):
            update = await self.next(wait)
            assert update is not None, f"the stream ended after {out}"
            out.append(update)
        return out

    async def rest(self, wait: float = 20) -> list[Update]:
        """Every event until the stream ends."""
        out = []
        while (update := await self.next(wait)) is not None:
            out.append(update)
        return out


def request(binding: str, method: str, params: dict[str, Any]) -> tuple[str, str, Any]:
    """(HTTP method, path under the agent's URL, JSON body) of a streaming operation."""
    if binding == "JSONRPC":
        return "POST", "", {"jsonrpc": "2.0", "id": 11, "method": method, "params": params}
    if method == "SubscribeToTask":
        return "GET", f"/tasks/{params['id']}:subscribe", None
    return "POST", "/message:stream", params


@asynccontextmanager
async def stream(
    base: str,
    token: str,
    binding: str,
    method: str,
    params: dict[str, Any],
    *,
    last_event_id: str | None = None,
) -> AsyncIterator[Stream]:
    """A streaming operation opened by hand; the response is checked by the caller."""
    headers = {"Authorization": f"Bearer {token}", **A2A_VERSION}
    if last_event_id is not None:
        headers["Last-Event-ID"] = last_event_id
    verb, path, body = request(binding, method, params)
    async with (
        httpx.AsyncClient(base_url=base, timeout=httpx.Timeout(30, read=60)) as http,
        aconnect_sse(http, verb, path, json=body, headers=headers) as source,
    ):
        yield Stream(source, binding)


def subscribe(
    base: str, token: str, binding: str, task_id: str, *, last_event_id: str | None = None
) -> Any:
    return stream(
        base, token, binding, "SubscribeToTask", {"id": task_id}, last_event_id=last_event_id
    )
