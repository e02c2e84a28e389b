"""HTTP edges around the GraphQL app: authentication and the request size limit."""

from __future__ import annotations

import json
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from baton.access.principals import Principal
from baton.metrics import HTTP_REQUESTS

TOKEN_CACHE_SECONDS = 30.0
TOKEN_CACHE_SIZE = 10_000

Resolve = Callable[[str], Awaitable[Principal | None]]


def bearer(value: str | None) -> str | None:
    if not value:
        return None
    scheme, _, token = value.strip().partition(" ")
    if scheme.lower() != "bearer":
        return None
    return token.strip() or None


class TokenCache:
    """Principal look-ups by token, cached briefly: a token check on every request is one
    indexed query otherwise. Unknown tokens are not cached."""

    def __init__(self, resolve: Resolve) -> None:
        self._resolve = resolve
        self._entries: OrderedDict[str, tuple[float, Principal]] = OrderedDict()

    async def principal(self, token: str | None) -> Principal | None:
        if token is None:
            return None
        now = time.monotonic()
        hit = self._entries.get(token)
        if hit is not None and hit[0] > now:
            return hit[1]
        principal = await self._resolve(token)
        if principal is not None:
            self._entries[token] = (now + TOKEN_CACHE_SECONDS, principal)
            self._entries.move_to_end(token)
            while len(self._entries) > TOKEN_CACHE_SIZE:
                self._entries.popitem(last=False)
        return principal


async def _send_json(
    send: Send, status: int, body: object, headers: list[tuple[bytes, bytes]]
) -> None:
    payload = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": payload})


def _error(message: str, code: str) -> dict[str, object]:
    return {"errors": [{"message": message, "extensions": {"code": code}}]}


class BodyLimit:
    """Refuse request bodies over `limit` bytes with 413, before the app reads any of it."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.limit):
            await self._refuse(send)
            return
        # Read the body here (it is small by now) so a body without a length is bounded too.
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.limit:
                await self._refuse(send)
                return
            chunks.append(chunk)
            more = message.get("more_body", False)
        body = b"".join(chunks)
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, send: Send) -> None:
        message = f"request body over {self.limit} bytes"
        await _send_json(send, 413, _error(message, "payload_too_large"), [])


class RequireToken:
    """HTTP GraphQL requests need `Authorization: Bearer <token>`; without one: 401, nothing
    executed. The GraphiQL page (a GET with no query) is served to anyone."""

    def __init__(self, app: ASGIApp, tokens: TokenCache) -> None:
        self.app = app
        self.tokens = tokens

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        is_ide = scope["method"] == "GET" and b"query=" not in scope.get("query_string", b"")
        headers = dict(scope["headers"])
        token = bearer(headers.get(b"authorization", b"").decode("latin-1"))
        principal = await self.tokens.principal(token)
        if principal is None and not is_ide:
            await _send_json(
                send,
                401,
                _error("a valid bearer token is required", "unauthenticated"),
                [(b"www-authenticate", b'Bearer realm="baton"')],
            )
            return
        scope.setdefault("state", {})["principal"] = principal
        await self.app(scope, receive, send)


class CountRequests:
    """Count answered HTTP requests by route and status for /metrics."""

    def __init__(self, app: ASGIApp, paths: frozenset[str]) -> None:
        self.app = app
        self.paths = paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"] if scope["path"] in self.paths else "other"

        async def counted(message: Message) -> None:
            if message["type"] == "http.response.start":
                HTTP_REQUESTS.labels(path=path, status=str(message["status"])).inc()
            await send(message)

        await self.app(scope, receive, counted)
