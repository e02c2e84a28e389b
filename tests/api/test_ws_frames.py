"""Frames written past ASGI (`LeanWebSocketProtocol.write_text`), read by a real client
(websockets) from a real uvicorn: every length encoding, and nothing written once the
connection is closing or compresses."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from baton.web.ws_connection import LeanWebSocketProtocol
from tests.helpers import uvicorn_serving

# One past and one short of each boundary of the frame's length field (7 bits, 16, 64).
SIZES = [0, 1, 125, 126, 127, 65535, 65536, 200_000]


def text_of(size: int) -> bytes:
    """`size` bytes of UTF-8 text, multi-byte characters among them."""
    unit = "é-x".encode()  # 4 bytes
    whole, rest = divmod(size, len(unit))
    return unit * whole + b"x" * rest


LATE: list[bool] = []  # what `write_text` answered once the close frame had gone


async def frames_app(scope: Any, receive: Any, send: Any) -> None:
    await receive()  # websocket.connect
    await send({"type": "websocket.accept"})
    write = send.__self__.write_text
    written = []
    for size in SIZES:
        written.append(write(text_of(size)))
        if not written[-1]:  # as graphql_ws does: ASGI's send then
            await send({"type": "websocket.send", "text": text_of(size).decode()})
    await send({"type": "websocket.send", "text": repr(written)})
    await send({"type": "websocket.close", "code": 1000})
    # Closing: only ASGI may say what happens to a message now (uvicorn drops it).
    LATE.append(write(b"late"))


@pytest.fixture(params=[False, True], ids=["plain", "deflate"])
async def frames_url(request: pytest.FixtureRequest) -> AsyncIterator[str]:
    options = {"ws": LeanWebSocketProtocol, "ws_per_message_deflate": request.param}
    async with uvicorn_serving(frames_app, **options) as port:
        yield f"ws://127.0.0.1:{port}/"


async def test_frames_written_past_asgi_arrive_whole_at_every_length(frames_url: str) -> None:
    async with connect(frames_url, max_size=None) as ws:
        for size in SIZES:
            message = await ws.recv()
            assert isinstance(message, str)
            assert message.encode() == text_of(size)
        # Past ASGI unless an extension (permessage-deflate) has to see every frame.
        compressed = bool(ws.protocol.extensions)
        assert await ws.recv() == repr([not compressed] * len(SIZES))
        with pytest.raises(ConnectionClosed):
            await ws.recv()
        assert ws.close_code == 1000
    assert LATE[-1] is False
