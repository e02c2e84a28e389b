"""bench.subscribers' own frame reading, against a real uvicorn: after the handshake and
`connection_ack` the client reads the server's frames itself, at every length encoding, and
answers the server's keep-alive pings (a client that did not would be closed)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from bench.subscribers import Subscriber, WorkerSpec

from baton.web.ws_connection import LeanWebSocketProtocol
from tests.helpers import uvicorn_serving

IDS = [1, 2, 3, 4]
PADDING = [0, 200, 70_000, 10]  # frames of 7-bit, 16-bit, 64-bit and 7-bit lengths


async def graphql_ws_app(scope: Any, receive: Any, send: Any) -> None:
    """Just enough of graphql-transport-ws: ack, then four events, then silence."""
    await receive()  # websocket.connect
    await send({"type": "websocket.accept", "subprotocol": "graphql-transport-ws"})
    assert json.loads((await receive())["text"])["type"] == "connection_init"
    await send({"type": "websocket.send", "text": json.dumps({"type": "connection_ack"})})
    assert json.loads((await receive())["text"])["type"] == "subscribe"
    for event_id, padding in zip(IDS, PADDING, strict=True):
        data = {"taskEvents": {"id": str(event_id), "pad": "x" * padding}}
        text = json.dumps({"id": "1", "type": "next", "payload": {"data": data}})
        await send({"type": "websocket.send", "text": text.replace(": ", ":")})
        await asyncio.sleep(0.05)
    while (await receive())["type"] != "websocket.disconnect":
        pass


async def test_the_client_reads_every_frame_itself_and_answers_pings() -> None:
    options = {"ws": LeanWebSocketProtocol, "ws_ping_interval": 0.2, "ws_ping_timeout": 0.5}
    async with uvicorn_serving(graphql_ws_app, **options) as port:
        spec = WorkerSpec(f"http://127.0.0.1:{port}", "token", "subscription { x }", {}, count=1)
        loop = asyncio.get_running_loop()
        subscriber = Subscriber(spec, loop.create_future())
        await loop.create_connection(lambda: subscriber, "127.0.0.1", port)
        await asyncio.wait_for(subscriber.subscribed, 5)
        await asyncio.sleep(2.5)  # pings every 0.2 s, each answered within 0.5 s or closed
        try:
            assert subscriber.raw is not None  # past websockets' parser
            assert list(subscriber.ids) == IDS
            assert subscriber.error is None
        finally:
            subscriber.close()
