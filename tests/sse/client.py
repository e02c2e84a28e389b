"""GraphQL over Server-Sent Events for tests: httpx-sse as the client, and a raw socket for
what a full client hides (a reader that stops reading, the bytes on the wire)."""

from __future__ import annotations

import asyncio
import json
import re
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx
from httpx_sse import EventSource, aconnect_sse


@dataclass
class Message:
    event: str
    data: Any  # the `next` event's execution result; None for `complete`


class Stream:
    """One open event stream: its messages in order, `None` once the body has ended."""

    def __init__(self, source: EventSource) -> None:
        self.source = source
        self.response = source.response
        self._events = source.aiter_sse()

    async def message(self, wait: float = 15) -> Message | None:
        try:
            sse = await asyncio.wait_for(anext(self._events), wait)
        except StopAsyncIteration:
            return None
        return Message(sse.event, json.loads(sse.data) if sse.data else None)

    async def results(self, count: int, wait: float = 15) -> list[dict[str, Any]]:
        """The next `count` `next` results' data; fails on errors or an early end."""
        out: list[dict[str, Any]] = []
        while len(out) < count:
            message = await self.message(wait)
            assert message is not None and message.event == "next", (message, out)
            assert "errors" not in message.data, message.data
            out.append(message.data["data"])
        return out

    async def rest(self, wait: float = 15) -> list[Message]:
        """Every message until the body ends."""
        out: list[Message] = []
        while (message := await self.message(wait)) is not None:
            out.append(message)
        return out


@asynccontextmanager
async def subscribe(
    base_url: str,
    token: str | None,
    query: str,
    variables: dict[str, Any] | None = None,
    *,
    path: str = "/graphql",
    headers: dict[str, str] | None = None,
) -> AsyncIterator[Stream]:
    """POST `query` asking for an event stream (httpx-sse sets `Accept: text/event-stream`)."""
    sent = dict(headers or {})
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"
    async with (
        httpx.AsyncClient(base_url=base_url, timeout=httpx.Timeout(30, read=60)) as client,
        aconnect_sse(
            client,
            "POST",
            path,
            json={"query": query, "variables": variables or {}},
            headers=sent,
        ) as source,
    ):
        yield Stream(source)


async def raw_request(url: str, head: str, body: bytes = b"", rcvbuf: int | None = None) -> Any:
    """A socket that sent `head` (request line and headers, CRLF-separated, without the blank
    line) and `body`; `rcvbuf` shrinks its receive buffer before connecting."""
    parts = urlsplit(url)
    sock = socket.socket()
    if rcvbuf is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.setblocking(False)
    loop = asyncio.get_running_loop()
    await loop.sock_connect(sock, (parts.hostname, parts.port))
    await loop.sock_sendall(sock, head.encode() + b"\r\n\r\n" + body)
    return sock


async def read_until_closed(sock: socket.socket, wait: float) -> bytes:
    """Everything the server sends until it closes the connection (fails after `wait`)."""
    loop = asyncio.get_running_loop()
    chunks: list[bytes] = []
    async with asyncio.timeout(wait):
        while chunk := await loop.sock_recv(sock, 1 << 16):
            chunks.append(chunk)
    return b"".join(chunks)


def dechunk(raw: bytes) -> tuple[bytes, bool]:
    """The body in a chunked transfer, however far it got, and whether it ended properly."""
    body: list[bytes] = []
    while True:
        size_line, found, rest = raw.partition(b"\r\n")
        if not found:
            return b"".join(body), False
        size = int(size_line, 16)
        if size == 0:
            return b"".join(body), True
        body.append(rest[:size])
        if len(rest) < size + 2:
            return b"".join(body), False
        raw = rest[size + 2 :]


def events_in(raw: bytes) -> list[str]:
    """The `event:` names in a raw chunked event stream, in order."""
    return [name.decode() for name in re.findall(rb"event: (\w+)", raw)]


async def gauge(base_url: str, token: str, name: str) -> float:
    async with httpx.AsyncClient(base_url=base_url) as client:
        response = await client.get("/metrics", headers={"Authorization": f"Bearer {token}"})
    found = re.search(rf"^{name} (\S+)$", response.text, re.M)
    assert found is not None, response.text[:500]
    return float(found.group(1))
