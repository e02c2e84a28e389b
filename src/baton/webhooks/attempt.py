"""One HTTP attempt at a webhook message, bounded in time and in what it reads back.

The request goes to the address `resolve` checked (`baton.services.webhook_addresses`), with
the Standard Webhooks headers; redirects are not followed (a 3xx is a failure); the whole
attempt (resolving, connecting, sending, the answer's head and up to `MAX_RESPONSE_BYTES` of
its body) gets `timeout` seconds. Only a 2xx acknowledges. Right before the request is made
(after the look-up), the caller may withdraw it (`go`): an endpoint changed since its turn
began gets nothing more from that turn.
"""

from __future__ import annotations

import asyncio
import logging
import string
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from urllib.parse import SplitResult, quote

from baton.services.webhook_addresses import Policy, Refused, pinned, resolve
from baton.telemetry.spans import span
from baton.webhooks import http1

log = logging.getLogger("baton.webhooks")

MAX_RESPONSE_BYTES = 1024  # of a receiver's answer, kept for the delivery log
MAX_ERROR_CHARS = 500
USER_AGENT = "Baton-Webhooks/1"
# Shorter than the idle timeouts of common servers (5 s for uvicorn, Node and Apache): a kept
# connection is let go before its receiver closes it, so a message rarely meets a closing one.
KEEP_ALIVE_SECONDS = 4.0


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


def client(concurrency: int) -> http1.Client:
    """Connections kept for the next message: as many as endpoints are worked on at once.
    No proxy, no redirect: the checked address is the one connected to, and only it."""
    return http1.Client(max_idle=concurrency, keep_alive=KEEP_ALIVE_SECONDS)


async def send(
    http: http1.Client,
    parts: SplitResult,
    policy: Policy,
    headers: dict[str, str],
    body: bytes,
    seconds: float,
    go: Callable[[], Awaitable[bool]] | None = None,
) -> Answer | None:
    """The answer to one POST of `body`; None when `go` said not to send it after all. While
    tracing, a span `webhook attempt` naming the receiver's host and port, never its path or
    query (which may carry the receiver's own secret)."""
    with span("webhook attempt") as traced:
        answer = await _send(http, parts, policy, headers, body, seconds, go)
        if answer is not None:
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
    parts: SplitResult,
    policy: Policy,
    headers: dict[str, str],
    body: bytes,
    seconds: float,
    go: Callable[[], Awaitable[bool]] | None,
) -> Answer | None:
    started = time.monotonic()
    status: int | None = None
    excerpt: str | None = None
    error: str | None = None
    try:
        async with asyncio.timeout(seconds):
            address = await resolve(parts, policy)
            if go is not None and not await go():
                return None
            pin = pinned(parts, address)
            reply = await http.post(
                http1.Origin(
                    str(address), parts.port or _DEFAULT_PORT[parts.scheme], pin.server_name
                ),
                _target(parts),
                [
                    ("host", pin.host_header),
                    *headers.items(),
                    ("content-type", "application/json"),
                    ("user-agent", USER_AGENT),
                    ("accept-encoding", "identity"),
                ],
                body,
                MAX_RESPONSE_BYTES,
            )
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
        excerpt,
        error[:MAX_ERROR_CHARS] if error else None,
        duration,
    )


_DEFAULT_PORT = {"https": 443, "http": 80}
# Characters a request target may carry as they are; others (non-ASCII) are percent-encoded.
_SAFE = string.ascii_letters + string.digits + string.punctuation


def _target(parts: SplitResult) -> str:
    """The request target: the URL's path and query (a URL with no path asks for `/`)."""
    target = parts.path or "/"
    if parts.query:
        target += f"?{parts.query}"
    return quote(target, safe=_SAFE)
