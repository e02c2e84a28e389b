"""What an idle WebSocket holds in `LeanWebSocketProtocol`, proved on a real uvicorn with real
clients: every attribute in a slot (no instance dictionary), websockets' parser let go between
messages yet every message parsed however its bytes are split, and the keep-alive pings and
their deadline on one timer per loop (a peer that answers stays, one that does not is closed)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import struct
from collections.abc import AsyncIterator
from functools import partial
from typing import Any

import pytest
from websockets.asyncio.client import connect

from baton.web.ws_connection import LeanWebSocketProtocol, _Wheel
from tests.helpers import uvicorn_serving

SEEN: list[dict[str, Any]] = []  # what the app saw of its connection after each message


async def echo_app(scope: Any, receive: Any, send: Any) -> None:
    """Echoes text messages; notes, after each, whether the connection kept a dictionary and
    a parser."""
    await receive()  # websocket.connect
    await send({"type": "websocket.accept"})
    connection = send.__self__
    while True:
        message = await receive()
        if message["type"] != "websocket.receive":
            return
        SEEN.append({"dict": dict(vars(connection)), "parser": connection.conn.parser})
        await send({"type": "websocket.send", "text": message["text"]})


@pytest.fixture
async def echo_port() -> AsyncIterator[int]:
    async with uvicorn_serving(echo_app, ws=LeanWebSocketProtocol) as port:
        yield port


def masked_text_frame(payload: bytes) -> bytes:
    """A client's text frame (clients mask theirs)."""
    mask = os.urandom(4)
    body = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    if len(payload) < 126:
        head = struct.pack("!BB", 0x81, 0x80 | len(payload))
    else:
        head = struct.pack("!BBH", 0x81, 0x80 | 126, len(payload))
    return head + mask + body


async def raw_socket(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    )
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 101")
    return reader, writer


async def read_text(reader: asyncio.StreamReader) -> bytes:
    first, second = await reader.readexactly(2)
    assert first == 0x81
    size = second & 0x7F
    if size == 126:
        (size,) = struct.unpack("!H", await reader.readexactly(2))
    return await reader.readexactly(size)


async def test_an_open_connection_keeps_every_attribute_in_a_slot(echo_port: int) -> None:
    SEEN.clear()
    async with connect(f"ws://127.0.0.1:{echo_port}/") as ws:
        await ws.send("hello")
        assert await ws.recv() == "hello"
    assert SEEN[0]["dict"] == {}  # uvicorn's attributes and Baton's all in slots


async def test_the_parser_waits_for_no_message_yet_every_split_of_one_is_read(
    echo_port: int,
) -> None:
    SEEN.clear()
    reader, writer = await raw_socket(echo_port)
    try:
        messages = [b"x" * 5, "é".encode() * 100, b'{"type":"ping"}' * 20]
        for message in messages:
            frame = masked_text_frame(message)
            # One byte at a time: the parser may be let go only where no frame has begun.
            for i in range(len(frame)):
                writer.write(frame[i : i + 1])
                await writer.drain()
                await asyncio.sleep(0)
            assert await read_text(reader) == message
        # Two messages in one write, and one cut in the middle of its length field.
        both = masked_text_frame(b"one") + masked_text_frame(b"two" * 60)
        writer.write(both[:-130])
        await writer.drain()
        await asyncio.sleep(0.05)
        writer.write(both[-130:])
        await writer.drain()
        assert await read_text(reader) == b"one"
        assert await read_text(reader) == b"two" * 60
    finally:
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()
    # Between messages nothing was parsed: the parser (and the last frame it held) was let go.
    assert len(SEEN) == 5
    assert all(seen["parser"] is None for seen in SEEN[:-2])


@pytest.fixture
async def pinging_port() -> AsyncIterator[int]:
    options = {"ws": LeanWebSocketProtocol, "ws_ping_interval": 0.5, "ws_ping_timeout": 1.0}
    async with uvicorn_serving(echo_app, **options) as port:
        yield port


async def test_a_peer_that_answers_pings_stays_and_one_that_does_not_is_closed(
    pinging_port: int,
) -> None:
    async with connect(f"ws://127.0.0.1:{pinging_port}/", ping_interval=None) as answering:
        # websockets answers pings by itself; the raw peer below never does.
        reader, writer = await raw_socket(pinging_port)
        try:
            pings = 0
            with pytest.raises(asyncio.IncompleteReadError):
                async with asyncio.timeout(6):
                    while True:
                        first, second = await reader.readexactly(2)
                        payload = await reader.readexactly(second & 0x7F)
                        if first == 0x89:  # a ping
                            pings += 1
                        else:
                            assert first == 0x88  # the close: keep-alive ping timeout
                            assert struct.unpack("!H", payload[:2])[0] == 1011
            assert pings >= 1
        finally:
            writer.close()
        # The answering client is still served, well past the ping interval and deadline.
        await answering.send("still here")
        assert await answering.recv() == "still here"


async def test_keep_alive_timers_of_every_socket_share_one_timer_of_the_loop() -> None:
    loop = asyncio.get_running_loop()
    fired: list[int] = []
    wheel = _Wheel(loop)  # of its own: the loop's holds other tests' sockets' timers
    timers = [wheel.call_later(0.05, partial(fired.append, n)) for n in range(100)]
    timers[7].cancel()
    assert len(wheel.slots) == 1 and wheel.handle is not None  # one timer of the loop
    await asyncio.sleep(1.2)
    assert sorted(fired) == [n for n in range(100) if n != 7]
    assert wheel.slots == {} and wheel.handle is None  # and nothing left behind


def test_no_attribute_of_uvicorns_connection_falls_outside_the_slots() -> None:
    # uvicorn's attributes as its own class sets them; a newer uvicorn with another one would
    # give every connection a dictionary again.
    import inspect

    from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol

    source = inspect.getsource(WebSocketsSansIOProtocol)
    named = {
        part.split("=")[0].split(":")[0].strip().removeprefix("self.")
        for part in source.split("\n")
        if part.strip().startswith("self.") and ("=" in part.split("(")[0])
    }
    named = {n for n in named if n.isidentifier()}
    assert named <= set(LeanWebSocketProtocol.__slots__)
