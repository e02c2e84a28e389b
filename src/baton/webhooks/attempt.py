"""One HTTP attempt at a webhook message, bounded in time and in what it reads back.

The request goes to the address `resolve` checked (`baton.services.webhook_addresses`), with
the Standard Webhooks headers; redirects are not followed (a 3xx is a failure); the whole
attempt (resolving, connecting, sending, the answer's head and up to `MAX_RESPONSE_BYTES` of
its body) gets `timeout` seconds. Only a 2xx acknowledges. Right before the request is made
(after the look-up), the caller may withdraw it (`go`): an endpoint changed since its turn
began gets nothing more from that turn.

A URL is a `Way`: the attempts to it share its look-up, its check and the pinned address
(`Route`) for up to `ROUTE_SECONDS`, and look up again after a failed attempt. Looking up for
every message sent a name to the resolver once a message (a thread of the loop's pool and a
round trip to the DNS server), and an address literal through the checks again, for the same
answer.
"""

from __future__ import annotations

import logging
import string
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from urllib.parse import SplitResult, quote

from baton.services.webhook_addresses import Policy, Refused, parse, pinned, resolve
from baton.telemetry.spans import span
from baton.webhooks import http1, wire

log = logging.getLogger("baton.webhooks")

MAX_RESPONSE_BYTES = 1024  # of a receiver's answer, kept for the delivery log
MAX_ERROR_CHARS = 500
USER_AGENT = "Baton-Webhooks/1"
# Shorter than the idle timeouts of common servers (5 s for uvicorn, Node and Apache): a kept
# connection is let go before its receiver closes it, so a message rarely meets a closing one.
KEEP_ALIVE_SECONDS = 4.0
# How long a look-up and its check serve a URL's messages: about as long as a connection is
# kept, and well under the time-to-live of most DNS answers.
ROUTE_SECONDS = 5.0

Headers = tuple[tuple[str, str], ...]
# Sent with every message, after the host and the endpoint's own.
_FIXED: Headers = (
    ("content-type", "application/json"),
    ("user-agent", USER_AGENT),
    ("accept-encoding", "identity"),
)


@dataclass(frozen=True)
class Answer:
    delivered: bool
    status: int | None
    body: str | None
    error: str | None
    duration_ms: int

    @property
    def gone(self) -> bool:
        """410: the receiver says the endpoint is gone for good."""
        return self.status == 410


@dataclass(frozen=True)
class Route:
    """Where a URL's requests go: the checked address (the `Host` header and TLS server name
    kept from the URL), the request target and when it was looked up (`time.monotonic()`)."""

    origin: http1.Origin
    target: str
    host_header: str
    at: float


class Way:
    """A URL for the attempts to it: parsed once (`Refused` when no endpoint may have it),
    looked up, checked and pinned at the first attempt and again once the route is
    `ROUTE_SECONDS` old or an attempt failed."""

    def __init__(self, url: str, policy: Policy) -> None:
        self.parts = parse(url, policy)
        self.policy = policy
        self._route: Route | None = None
        self._start: tuple[Route, bytes] | None = None  # see `start`

    async def route(self) -> Route:
        """The route to send on now (`Refused` when the look-up or its check refuses it)."""
        route = self._route
        if route is not None and time.monotonic() - route.at < ROUTE_SECONDS:
            return route
        self._route = None
        parts = self.parts
        address = await resolve(parts, self.policy)
        pin = pinned(parts, address)
        port = parts.port or _DEFAULT_PORT[parts.scheme]
        origin = http1.Origin(str(address), port, pin.server_name)
        route = Route(origin, _target(parts), pin.host_header, time.monotonic())
        self._route = route
        return route

    def start(self, route: Route, own: Headers) -> bytes:
        """The start of a request on `route` with an endpoint's `own` headers (`wire.head`;
        `wire.Unsendable` when it cannot be sent): with none, made and checked once for the
        messages that follow. Own headers carry a token, which the worker keeps for a turn
        only, not for as long as it keeps the URL's way."""
        kept = self._start
        if kept is not None and kept[0] is route and not own:
            return kept[1]
        made = wire.head(route.target, (("host", route.host_header), *own, *_FIXED))
        if not own:
            self._start = (route, made)
        return made

    def forget(self) -> None:
        """Look up again at the next attempt (this one failed: the address may have moved)."""
        self._route = None


def client(concurrency: int) -> http1.Client:
    """Connections kept for the next message: as many as endpoints are worked on at once.
    No proxy, no redirect: the checked address is the one connected to, and only it."""
    return http1.Client(max_idle=concurrency, keep_alive=KEEP_ALIVE_SECONDS)


async def send(
    http: http1.Client,
    way: Way,
    headers: dict[str, str],
    body: bytes,
    seconds: float,
    go: Callable[[], Awaitable[bool]] | None = None,
    own: Headers = (),
) -> Answer | None:
    """The answer to one POST of `body` with `headers` (this message's) and `own` (the
    endpoint's, alike for each of its messages); None when `go` said not to send it after
    all. While tracing, a span `webhook attempt` naming the receiver's host and port, never
    its path or query (which may carry the receiver's own secret)."""
    parts = way.parts
    with span("webhook attempt") as traced:
        answer = await _send(http, way, headers, own, body, seconds, go)
        if answer is not None and not answer.delivered:
            way.forget()
        if answer is not None and log.isEnabledFor(logging.DEBUG):  # its host is parsed anew
            log.debug(
                "webhook attempt to %s:%s: %s in %d ms",
                parts.hostname,
                parts.port or "",
                "delivered" if answer.delivered else f"failed ({_error_type(answer)})",
                answer.duration_ms,
            )
        if traced is not None:
            traced.set_attribute("http.request.method", "POST")
            traced.set_attribute("server.address", parts.hostname or "")
            traced.set_attribute(
                "server.port", parts.port or (443 if parts.scheme == "https" else 80)
            )
            if answer is not None and answer.status is not None:
                traced.set_attribute("http.response.status_code", answer.status)
            if answer is not None and not answer.delivered:
                traced.set_attribute("error.type", _error_type(answer))
        return answer


def _error_type(answer: Answer) -> str:
    return str(answer.status) if answer.status is not None else "no answer"


async def _send(
    http: http1.Client,
    way: Way,
    headers: dict[str, str],
    own: Headers,
    body: bytes,
    seconds: float,
    go: Callable[[], Awaitable[bool]] | None,
) -> Answer | None:
    started = time.monotonic()
    status: int | None = None
    excerpt: str | None = None
    error: str | None = None
    try:
        with http.deadlines.within(seconds):
            route = await way.route()
            if go is not None and not await go():
                return None
            try:
                start = way.start(route, own)
            except wire.Unsendable as exc:
                raise http1.LocalProtocolError(str(exc)) from None
            reply = await http.post(route.origin, start, headers.items(), body, MAX_RESPONSE_BYTES)
            status = reply.status
            excerpt = reply.body.decode("utf-8", "replace") if reply.body else None
    except TimeoutError:
        error = f"no answer within {seconds:g} s"
    except Refused as exc:
        error = f"refused: {exc}"
    except (
        http1.ConnectError,
        http1.ReadError,
        http1.RemoteProtocolError,
        http1.LocalProtocolError,
    ) as exc:
        error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    except OSError as exc:
        error = f"{type(exc).__name__}: {exc}"
    duration = int((time.monotonic() - started) * 1000)
    delivered = status is not None and 200 <= status < 300
    if status is not None and not delivered:
        error = f"HTTP {status}"
        if 300 <= status < 400:
            error += " (redirects are not followed)"
        elif status == 410:
            error += " (Gone: the endpoint is disabled)"
    return Answer(
        delivered,
        status,
        storable(excerpt) if excerpt else None,
        storable(error[:MAX_ERROR_CHARS]) if error else None,
        duration,
    )


def storable(text: str) -> str:
    """`text` as PostgreSQL's text can hold it: a NUL (which a receiver's answer may carry)
    becomes U+FFFD, as an undecodable byte does, and a lone surrogate (which no answer can
    carry, but an error's text might) `?`. Stored as it came, either made the record of the
    attempt fail, and the message went again, for ever."""
    if not text.isascii():
        text = text.encode("utf-8", "replace").decode("utf-8")
    return text.replace("\x00", "\ufffd") if "\x00" in text else text


_DEFAULT_PORT = {"https": 443, "http": 80}
# Characters a request target may carry as they are; others (non-ASCII) are percent-encoded.
_SAFE = string.ascii_letters + string.digits + string.punctuation


def _target(parts: SplitResult) -> str:
    """The request target: the URL's path and query (a URL with no path asks for `/`)."""
    target = parts.path or "/"
    if parts.query:
        target += f"?{parts.query}"
    return quote(target, safe=_SAFE)
