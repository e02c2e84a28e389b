"""How an endpoint's messages are written, by its payload format.

A standard endpoint's message is the subscription's data as a Standard Webhooks payload
(`render`). Another format (`baton.store.webhooks.PayloadFormat`) is written by a `Format`
the app hands the worker: the door that speaks it provides it (the A2A door writes A2A's
`StreamResponse`), so this door imports no other. A format writes one or more bodies per
event, each sent as its own request; the event counts as delivered once every one of them
was acknowledged, in order.

Every endpoint's requests carry the Standard Webhooks headers (`signing`). A task-scoped
endpoint's carry its authentication too, `Authorization: <scheme> <credentials>` when it
has credentials, and its token in the format's `token_header` when it has a token.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from baton.services.context import Context
from baton.store.records import EventRecord
from baton.store.webhooks import EndpointRecord

# The bodies of each of `events` (one task's, in order) for `endpoint`, for a reader with the
# endpoint owner's context: one list per event, in the events' order.
Render = Callable[[Context, EndpointRecord, Sequence[EventRecord]], Awaitable[list[list[bytes]]]]


@dataclass(frozen=True)
class Format:
    render: Render
    token_header: str | None = None


def headers(
    format: Format | None, token: str | None, scheme: str | None, credentials: str | None
) -> dict[str, str]:
    """A task-scoped endpoint's own headers (none for one without token or credentials)."""
    found: dict[str, str] = {}
    if scheme and credentials:
        found["authorization"] = f"{scheme} {credentials}"
    if token and format is not None and format.token_header:
        found[format.token_header.lower()] = token
    return found
