"""GraphQL over HTTP: POST with a JSON body, GET for queries, and the GraphiQL page.

A plain ASGI app in front of the engine: it checks the bearer token (no valid token: 401,
nothing executed), reads the body with its size bounded (413 past it, before reading more),
decodes it with orjson, runs the operation and writes the answer, with no per-request work that
does not depend on the request. Media types follow the GraphQL-over-HTTP spec: a client that
asks for `application/graphql-response+json` gets it, with 400 for a request refused before
execution; everyone else gets `application/json` and 200 for any well-formed request. A
database that is down or saturated (`baton.errors.Unavailable`, while checking the token or
while running the operation) answers 503 with `Retry-After` and the error envelope, code
`unavailable`, whatever the media type. Requests and answers are held to their token's and
the process's bytes waiting for clients (`baton.web.outbound`): a request whose token lacks
room for the largest answer is refused before it runs, 429 (`too_much_unread`) with
`Retry-After`; a query's answer that does not fit is refused, 429 or 503 with `Retry-After`; a
mutation's answer always goes out.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl

import orjson
from graphql import OperationType
from starlette.types import Message, Receive, Scope, Send

from baton.access.grants import TokenCache, bearer
from baton.access.principals import Principal
from baton.engine.runner import Engine, Outcome, Request
from baton.errors import Unavailable
from baton.numbers import ascii_int
from baton.web.graphiql import PAGE_HEADERS, graphiql_page
from baton.web.metered import graphql_envelope, send_refusal
from baton.web.outbound import SCOPE_KEY, Account, Ledger, Refusal, admit_answer, carry

log = logging.getLogger("baton.http")

JSON = "application/json"
GRAPHQL_RESPONSE = "application/graphql-response+json"
RETRY_AFTER_SECONDS = 2
UNAVAILABLE_HEADERS = [(b"retry-after", str(RETRY_AFTER_SECONDS).encode())]

ContextFactory = Callable[[Principal], Any]


class BadRequest(Exception):
    def __init__(self, status: int, message: str, headers: list[tuple[bytes, bytes]] = []) -> None:  # noqa: B006
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers


def error_body(message: str, code: str) -> bytes:
    return orjson.dumps({"errors": [{"message": message, "extensions": {"code": code}}]})


async def send_body(
    send: Send,
    status: int,
    body: bytes,
    media_type: str,
    headers: list[tuple[bytes, bytes]] = [],  # noqa: B006
) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", f"{media_type}; charset=utf-8".encode()),
                (b"content-length", str(len(body)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class GraphQLHTTP:
    def __init__(
        self,
        engine: Engine,
        tokens: TokenCache,
        context: ContextFactory,
        max_body_bytes: int,
        ledger: Ledger | None = None,
    ) -> None:
        self.engine = engine
        self.tokens = tokens
        self.context = context
        self.max_body_bytes = max_body_bytes
        self.ledger = ledger  # bytes waiting for clients, shared with the other doors

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        account = scope.get(SCOPE_KEY)
        if self.ledger is None or not isinstance(account, Account):
            account = None  # another server than `baton serve`'s: nothing is counted
        else:
            self.ledger.attach(account)  # every answer counts, unauthenticated ones too
        headers = dict(scope["headers"])
        method = scope["method"]
        is_page = method == "GET" and not scope.get("query_string")
        if is_page and b"text/html" in headers.get(b"accept", b""):
            await send_body(send, 200, graphiql_page(), "text/html", PAGE_HEADERS)  # no token
            return
        token = bearer(headers.get(b"authorization", b"").decode("latin-1"))
        try:
            principal = await self.tokens.principal(token)
        except Unavailable as exc:
            await _unavailable(send, exc)
            return
        if principal is None:
            body = error_body("a valid bearer token is required", "unauthenticated")
            await send_body(send, 401, body, JSON, [(b"www-authenticate", b'Bearer realm="baton"')])
            return
        media_type = _negotiate(headers.get(b"accept", b"").decode("latin-1"))
        try:
            if method == "GET":
                request = _from_query_string(scope.get("query_string", b""))
                if await self.engine.operation_type(request) is OperationType.MUTATION:
                    raise BadRequest(405, "mutations need POST", [(b"allow", b"POST")])
            elif method == "POST":
                request = await _from_body(headers, receive, self.max_body_bytes)
            else:
                raise BadRequest(405, "use GET or POST", [(b"allow", b"GET, POST")])
        except BadRequest as bad:
            code = "payload_too_large" if bad.status == 413 else "invalid_input"
            await send_body(send, bad.status, error_body(bad.message, code), JSON, bad.headers)
            return
        if self.ledger is not None:
            room = self.ledger.room(token)  # refused now, it runs nothing
            if room is not None:
                await send_refusal(send, room, graphql_envelope)
                return
        try:
            outcome = await self.engine.execute(request, self.context(principal))
        except Unavailable as exc:
            await _unavailable(send, exc)
            return
        except Exception:
            log.exception("unexpected error answering a GraphQL request")
            await send_body(send, 500, error_body("Internal server error.", "internal"), JSON)
            return
        if _unavailable_in(outcome):
            await send_body(send, 503, _encode(outcome), media_type, UNAVAILABLE_HEADERS)
            return
        body = _encode(outcome)
        admitted = self._admit(account, token, len(body))
        if isinstance(admitted, Refusal):
            if await self.engine.operation_type(request) is not OperationType.MUTATION:
                await send_refusal(send, admitted, graphql_envelope)
                return
            # It changed something: its answer goes out, counted like an event.
            admitted = carry(account, len(body)) if account is not None else 0
        try:
            await send_body(send, _status(outcome, media_type), body, media_type)
        finally:
            if admitted and account is not None:
                account.sent(admitted)

    def _admit(self, account: Account | None, token: str | None, size: int) -> Refusal | int:
        """Whether an answer fits in what `token` and the process may leave unread, and how
        many of its bytes are held until it is written (`outbound.admit_answer`). Small error
        answers and the GraphiQL page (under 1 KB) are not asked: they go out at once, and their
        connection counts what its client does not take."""
        if account is None or self.ledger is None:
            return 0
        return admit_answer(self.ledger, account, token, size)


async def _unavailable(send: Send, exc: Unavailable) -> None:
    log.warning("answering 503: %s", exc.message)
    message = "the database is unavailable; try again later"
    await send_body(send, 503, error_body(message, "unavailable"), JSON, UNAVAILABLE_HEADERS)


def _unavailable_in(outcome: Outcome) -> bool:
    return any(
        (error.get("extensions") or {}).get("code") == Unavailable.code for error in outcome.errors
    )


def _negotiate(accept: str) -> str:
    """`application/graphql-response+json` when the client prefers it, else JSON."""
    best, best_q = JSON, -1.0
    for position, part in enumerate(accept.split(",")):
        media, *params = (p.strip() for p in part.split(";"))
        q = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        if media == GRAPHQL_RESPONSE and q > 0 and q - position * 1e-6 > best_q:
            best, best_q = GRAPHQL_RESPONSE, q - position * 1e-6
        elif media in (JSON, "application/*", "*/*") and q > 0 and q - position * 1e-6 > best_q:
            best, best_q = JSON, q - position * 1e-6
    return best


def _status(outcome: Outcome, media_type: str) -> int:
    if media_type == GRAPHQL_RESPONSE and outcome.refused:
        return 400
    return 200


def _encode(outcome: Outcome) -> bytes:
    return outcome.encoded()


async def _read(headers: dict[bytes, bytes], receive: Receive, limit: int) -> bytes:
    """The body, refused (413) as soon as it is known to be over `limit` bytes: by its
    Content-Length before reading any of it, else while it streams in."""
    declared = headers.get(b"content-length")
    if declared is not None and ascii_int(declared.decode("latin-1"), limit) is None:
        raise BadRequest(413, f"request body over {limit} bytes")
    chunks: list[bytes] = []
    size = 0
    while True:
        message: Message = await receive()
        if message["type"] == "http.disconnect":
            raise BadRequest(400, "the client went away")
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise BadRequest(413, f"request body over {limit} bytes")
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


async def _from_body(headers: dict[bytes, bytes], receive: Receive, limit: int) -> Request:
    raw = await _read(headers, receive, limit)
    content_type = headers.get(b"content-type", b"").split(b";")[0].strip().lower()
    if content_type != b"application/json":
        raise BadRequest(415, "send the request as application/json")
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise BadRequest(400, "the request body is not valid JSON") from exc
    if isinstance(body, list):
        raise BadRequest(400, "batched requests are not supported; send one operation")
    if not isinstance(body, dict):
        raise BadRequest(400, "the request body must be a JSON object")
    if body.get("extensions") is not None and not isinstance(body["extensions"], dict):
        raise BadRequest(400, "extensions must be a JSON object")
    return _request(body.get("query"), body.get("variables"), body.get("operationName"))


def _from_query_string(raw: bytes) -> Request:
    try:
        params = dict(parse_qsl(raw.decode("utf-8", errors="strict"), strict_parsing=False))
    except (UnicodeDecodeError, ValueError) as exc:
        raise BadRequest(400, "the query string is not valid") from exc
    variables: Any = params.get("variables")
    if variables:
        try:
            variables = orjson.loads(variables)
        except orjson.JSONDecodeError as exc:
            raise BadRequest(400, "variables must be a JSON object") from exc
    extensions = params.get("extensions")
    if extensions:
        try:
            if not isinstance(orjson.loads(extensions), dict):
                raise BadRequest(400, "extensions must be a JSON object")
        except orjson.JSONDecodeError as exc:
            raise BadRequest(400, "extensions must be a JSON object") from exc
    return _request(params.get("query"), variables or None, params.get("operationName") or None)


def _request(query: Any, variables: Any, operation_name: Any) -> Request:
    if not isinstance(query, str) or not query:
        raise BadRequest(400, "a request needs a query (a string)")
    if variables is not None and not isinstance(variables, dict):
        raise BadRequest(400, "variables must be a JSON object")
    if operation_name is not None and not isinstance(operation_name, str):
        raise BadRequest(400, "operationName must be a string")
    return Request(query, variables, operation_name)
