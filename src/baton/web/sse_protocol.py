"""The vocabulary of GraphQL over Server-Sent Events, with no I/O.

The `graphql-sse` protocol (enisdenjo/graphql-sse, PROTOCOL.md), distinct connections mode: one
HTTP request per operation, answered with `text/event-stream` holding a `next` event per
execution result and a final `complete`. Lines starting with a colon are comments, which
clients ignore: Baton sends one when a stream opens and another whenever it has been quiet for
the keep-alive period, so proxies and load balancers see traffic.
"""

from __future__ import annotations

EVENT_STREAM = "text/event-stream"
HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    # nginx buffers proxied responses unless told not to; an event must not wait there.
    (b"x-accel-buffering", b"no"),
]
KEEP_ALIVE = b":\n\n"
# The empty `data:` line lets the browser's EventSource dispatch the event (PROTOCOL.md).
COMPLETE = b"event: complete\ndata:\n\n"


def next_event(payload: str | bytes) -> bytes:
    """A `next` event carrying one execution result, already JSON (as text, or as UTF-8, which
    spares a copy of an event as large as the response budget for every stream). JSON from
    orjson holds no raw line break (inside strings they are escaped), so it is one `data:`
    line."""
    data = payload.encode() if isinstance(payload, str) else payload
    return b"event: next\ndata: " + data + b"\n\n"


def accepts(accept: str, media_types: tuple[str, ...]) -> bool:
    """Whether an Accept header names one of `media_types` with a quality above zero."""
    for part in accept.split(","):
        media, *params = (p.strip() for p in part.split(";"))
        if media.lower() not in media_types:
            continue
        if not any(_zero_quality(param) for param in params):
            return True
    return False


def wants_event_stream(accept: str) -> bool:
    return accepts(accept, (EVENT_STREAM,))


def _zero_quality(param: str) -> bool:
    name, _, value = param.partition("=")
    if name.strip().lower() != "q":
        return False
    try:
        return float(value) <= 0
    except ValueError:
        return True  # an unreadable quality is not an acceptance
