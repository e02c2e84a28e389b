"""Closing a WebSocket ends it within the close deadline even where the connection under it
cannot be reached (a server other than uvicorn, or a `send` wrapped by middleware): the app
stops reading and returns, so the server closes the connection.

In process, with a peer that never takes anything: its `send` never returns. These also
cover sockets not yet acknowledged whose own read loop waits to send (a ping flood that
reads no pong): the send timeout closes them, as it closes acknowledged ones. Against a real
server the same needs megabytes of pings to fill the kernel's buffers.
"""

from __future__ import annotations

import asyncio
from typing import Any

from baton.access.grants import TokenCache
from baton.api.schema import schema
from baton.engine.limits import DEFAULT_LIMITS
from baton.engine.runner import Engine
from baton.web.graphql_ws import GraphQLWS, SocketLimits
from baton.web.ws_protocol import TRANSPORT_WS

LIMITS = SocketLimits(init_timeout=600, send_timeout=0.3, close_timeout=0.3, max_unauthenticated=1)
BOUND = 10.0  # generous: the app must return within about a second


async def returns(app: asyncio.Task[None]) -> None:
    """Wait for `app` to return (without cancelling it: a cancellation could end it)."""
    done, _ = await asyncio.wait({app}, timeout=BOUND)
    assert app in done, f"the app did not return within {BOUND:g} s"
    app.result()


async def never(*_: Any) -> Any:
    raise AssertionError("no token is looked up here")


def server() -> GraphQLWS:
    return GraphQLWS(
        Engine(schema, DEFAULT_LIMITS), TokenCache(never, never), lambda _: None, LIMITS
    )


class StuckPeer:
    """The ASGI side of a peer that sends what it is given and reads nothing once `stuck`."""

    def __init__(self, *messages: dict[str, Any], stuck_after: int = 0) -> None:
        self.inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        for message in ({"type": "websocket.connect"}, *messages):
            self.inbox.put_nowait(message)
        self.stuck_after = stuck_after
        self.sent: list[dict[str, Any]] = []

    async def receive(self) -> dict[str, Any]:
        return await self.inbox.get()

    async def send(self, message: dict[str, Any]) -> None:
        if message["type"] == "websocket.accept":
            return
        self.sent.append(message)
        if len(self.sent) > self.stuck_after:
            await asyncio.Event().wait()  # the peer takes nothing: this never returns

    def app(self, ws: GraphQLWS) -> asyncio.Task[None]:
        scope = {"type": "websocket", "subprotocols": [TRANSPORT_WS]}
        return asyncio.create_task(ws(scope, self.receive, self.send))  # type: ignore[arg-type]


async def test_a_socket_blocked_sending_before_it_logs_in_is_closed_and_its_app_returns() -> None:
    """Pings whose pongs the peer does not take: the read loop waits to send the second pong,
    where no init timeout reaches it; the send timeout closes the socket, and as the close
    frame cannot go out either, the app stops reading and returns."""
    ws = server()
    ping = {"type": "websocket.receive", "text": '{"type": "ping"}'}
    peer = StuckPeer(ping, ping, stuck_after=1)
    await returns(peer.app(ws))
    assert [m["type"] for m in peer.sent] == ["websocket.send", "websocket.send", "websocket.close"]
    assert peer.sent[-1]["code"] == 1008
    assert not ws.unacknowledged


async def test_an_idle_socket_evicted_while_its_peer_takes_nothing_still_returns() -> None:
    """Closed from outside its read loop (evicted for a newcomer): the close frame cannot go
    out, so after the close deadline the read loop is stopped, and its app returns."""
    ws = server()
    idle = StuckPeer()
    first = idle.app(ws)
    for _ in range(100):  # a few turns of the loop: accepted, then counted
        if ws.unacknowledged:
            break
        await asyncio.sleep(0)
    assert ws.unacknowledged
    newcomer = StuckPeer(stuck_after=10)
    second = newcomer.app(ws)
    await returns(first)
    assert [(m["type"], m.get("code")) for m in idle.sent] == [("websocket.close", 1013)]
    assert not second.done()  # the newcomer still waits for its connection_init
    newcomer.inbox.put_nowait({"type": "websocket.disconnect", "code": 1000})
    await returns(second)
