"""A door's HTTP answers counted against the ledger of bytes waiting for clients.

`Metered` wraps a door's ASGI app (MCP, the rest; GraphQL over HTTP and over SSE count their
answers and events themselves, with `admit_answer` as here, a layer less on their busiest
paths). It counts each
answer against the token of its request (`Authorization: Bearer …`, when the door's token cache
knows it: an unknown or absent token counts against the process only) from the moment the door
sends its head until the client has taken it:
- an answer with a Content-Length is admitted whole when its head is sent; one that does not fit
  (`Ledger.admit`) is replaced by a small refusal in the door's error envelope, 429 past the
  token's budget, 503 past the process's, both with Retry-After, and the door's own answer is
  dropped unsent. A door whose requests may change something (`effects`: MCP's tools) is
  asked instead before each request runs (`Ledger.room`), and its answers always go out;
- a stream (no Content-Length: an event stream) is counted chunk by chunk as it is sent; a chunk
  that takes its token or the process past a budget cuts the connection holding the most, and
  when that is this one nothing more of it is written (its client sees the connection reset).
While nothing waits on the connection a write is immediate and the connection itself counts
what its client leaves unsent; otherwise the answer or chunk counts as held until it is written.
"""

from __future__ import annotations

from collections.abc import Callable

import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from baton.access.grants import TokenCache, bearer
from baton.metrics import QUEUED_BYTES_LIMITED, count
from baton.web.outbound import (
    RETRY_AFTER_SECONDS,
    SCOPE_KEY,
    Account,
    Ledger,
    Refusal,
    account_of,
    admit_answer,
    carry,
)

# A door's error envelope for a refusal, as JSON.
Render = Callable[[Refusal], bytes]
INVALID_REQUEST = -32600  # JSON-RPC


def graphql_envelope(refusal: Refusal) -> bytes:
    """Baton's GraphQL error envelope."""
    error = {"message": refusal.message, "extensions": {"code": refusal.code}}
    return orjson.dumps({"errors": [error]})


def jsonrpc_envelope(refusal: Refusal) -> bytes:
    """A JSON-RPC error with no id (the request was not answered), carrying Baton's code: the
    MCP door's refusals."""
    error = {"code": INVALID_REQUEST, "message": refusal.message, "data": {"code": refusal.code}}
    return orjson.dumps({"jsonrpc": "2.0", "id": None, "error": error})


class Metered:
    def __init__(
        self,
        app: ASGIApp,
        ledger: Ledger,
        tokens: TokenCache,
        render: Render = graphql_envelope,
        *,
        effects: bool = False,
    ) -> None:
        self.app = app
        self.ledger = ledger
        self.tokens = tokens
        self.render = render
        # The door's requests may change something (MCP's tools): refused before they run
        # when their token lacks room (`Ledger.room`), never after.
        self.effects = effects

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        account = account_of(scope)
        if account is None:  # another server than `baton serve`'s: what the app holds only
            account = Account()
            scope = {**scope, SCOPE_KEY: account}
        ledger = self.ledger
        ledger.attach(account)
        if self.effects:
            refusal = ledger.room(self._token(scope))
            if refusal is not None:
                await send_refusal(send, refusal, self.render)
                return
        reserved = 0  # bytes of an admitted answer held, not sent yet
        refused = False

        async def metered(message: Message) -> None:
            nonlocal reserved, refused
            kind = message["type"]
            if kind == "http.response.body":
                if refused:
                    return
                size = len(message.get("body", b""))
                if reserved:
                    try:
                        await send(message)
                    finally:
                        sent = min(size, reserved)
                        reserved -= sent
                        account.sent(sent)
                        if not message.get("more_body", False) and reserved:
                            account.hold(-reserved)  # shorter than announced (HEAD)
                            reserved = 0
                    return
                if not account.buffered:
                    # Nothing waits on the connection: the write is at once, and the
                    # connection counts what its client does not take (`Account.measure`).
                    await send(message)
                    return
                if not account.hold(size):
                    return  # cut: its client is being reset
                try:
                    await send(message)  # waits until the client has taken what came before
                finally:
                    account.sent(size)
                return
            if kind == "http.response.start":
                token = self._token(scope)
                length = _content_length(message)
                if length is None:  # a stream: counted chunk by chunk
                    ledger.assign(account, token)
                elif self.effects:  # it ran: it goes out, counted
                    ledger.assign(account, token)
                    reserved = carry(account, length)
                else:
                    admitted = admit_answer(ledger, account, token, length)
                    if isinstance(admitted, Refusal):
                        refused = True
                        await send_refusal(send, admitted, self.render)
                        return
                    reserved = admitted
            await send(message)

        try:
            await self.app(scope, receive, metered)
        finally:
            if reserved:  # admitted, never sent whole (the app failed, or the client left)
                account.hold(-reserved)

    def _token(self, scope: Scope) -> str | None:
        for name, value in scope["headers"]:
            if name == b"authorization":
                token = bearer(value.decode("latin-1"))
                return token if self.tokens.known(token) else None
        return None


async def send_refusal(send: Send, refusal: Refusal, render: Render) -> None:
    """The small answer that replaces one that does not fit, in the door's envelope."""
    count(QUEUED_BYTES_LIMITED, "refused", refusal.budget)
    body = render(refusal)
    await send(
        {
            "type": "http.response.start",
            "status": refusal.status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"retry-after", str(RETRY_AFTER_SECONDS).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def _content_length(message: Message) -> int | None:
    for name, value in message.get("headers", ()):
        if name.lower() == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None
