"""The vocabulary of GraphQL over WebSocket, both subprotocols, with no I/O.

`graphql-transport-ws` is the current protocol (enisdenjo/graphql-ws, PROTOCOL.md); the legacy
`graphql-ws` is subscriptions-transport-ws's. Baton speaks both with one behaviour where the
legacy protocol leaves a case open: the same close codes, the same init timeout, and queries
and mutations allowed on either.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from functools import cached_property

TRANSPORT_WS = "graphql-transport-ws"
LEGACY_WS = "graphql-ws"
SUBPROTOCOLS = (TRANSPORT_WS, LEGACY_WS)


class Close(IntEnum):
    NORMAL = 1000
    POLICY_VIOLATION = 1008  # too many sockets for one token; a peer too slow to read
    TOO_BIG = 1009  # sent by the WebSocket layer itself for an oversized message
    TRY_AGAIN_LATER = 1013
    INVALID_MESSAGE = 4400
    UNAUTHORIZED = 4401  # an operation before the connection was acknowledged
    FORBIDDEN = 4403
    SUBPROTOCOL_NOT_ACCEPTABLE = 4406
    INIT_TIMEOUT = 4408
    DUPLICATE_OPERATION = 4409
    TOO_MANY_INIT_REQUESTS = 4429
    INTERNAL = 4500


@dataclass(frozen=True)
class Dialect:
    """What each message is called in one subprotocol."""

    name: str
    subscribe: str
    next: str
    stop: str  # client -> server: end an operation
    complete: str  # server -> client: an operation ended
    keep_alive: str | None  # sent periodically by the server
    refuse_with_message: bool  # send `connection_error` before closing a refused connection

    @cached_property
    def next_middle(self) -> bytes:
        """What a `next` message holds between its id and its payload."""
        return f',"type":"{self.next}","payload":'.encode()


TRANSPORT = Dialect(
    name=TRANSPORT_WS,
    subscribe="subscribe",
    next="next",
    stop="complete",
    complete="complete",
    keep_alive=None,
    refuse_with_message=False,
)
LEGACY = Dialect(
    name=LEGACY_WS,
    subscribe="start",
    next="data",
    stop="stop",
    complete="complete",
    keep_alive="ka",
    refuse_with_message=True,
)
DIALECTS = {TRANSPORT_WS: TRANSPORT, LEGACY_WS: LEGACY}


def choose(offered: list[str]) -> Dialect | None:
    """The first subprotocol the client offers that Baton speaks."""
    for name in offered:
        if name in DIALECTS:
            return DIALECTS[name]
    return None
