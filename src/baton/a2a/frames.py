"""A stream's updates with the ids a client resumes after, rendered once for every stream.

Every update of a stream is a `Frame`: a `StreamResponse` as A2A's JSON and its id, which is
the Baton event id it comes from. One event may make several updates (a returned result: its
artifacts, then the status): the last has the event's id `N`, the others `N.k` (k from 0), so
that a client cut between two of them resumes with the rest. The Task a stream starts with has
the id of its newest event. A client resumes by sending the id of the last update it got as
`Last-Event-ID` (what a browser's EventSource does by itself): the server sends every update
after it, from the event log, with no gap and no repeat, from any process and after a restart.

An event's updates are made and written as JSON once per event and context (`of`), however many
streams follow the task: a bounded cache keeps the newest.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Final

import orjson
from a2a.server.events.event_queue import Event
from a2a.types.a2a_pb2 import StreamResponse

# protobuf ships no types for json_format: MessageToDict answers a JSON object.
from google.protobuf.json_format import (  # type: ignore[import-untyped]
    MessageToDict,
    ParseDict,
)

from baton.a2a.updates import updates_json
from baton.errors import InvalidInput
from baton.store.records import EventRecord

# What the cache of rendered events holds at most: events, and bytes of their JSON.
CACHED_EVENTS: Final = 1024
CACHED_BYTES: Final = 8 * 1024 * 1024


@dataclass(frozen=True)
class Frame:
    """One update of a stream and the id a client resumes after: the update as A2A's JSON
    (a `StreamResponse` as `MessageToDict` writes it)."""

    id: str
    content: dict[str, Any]

    @classmethod
    def of(cls, id: str, response: StreamResponse) -> Frame:
        return cls(id, to_json(response))

    @cached_property
    def json(self) -> bytes:
        """The update as A2A's JSON (camelCase, as the SDK writes it), without line breaks."""
        return orjson.dumps(self.content)

    @property
    def payload(self) -> Event:
        """What the update carries, as the SDK's dispatchers take it."""
        response = ParseDict(self.content, StreamResponse())
        kind = response.WhichOneof("payload")
        assert kind is not None
        event: Event = getattr(response, kind)
        return event


def to_json(message: Any) -> dict[str, Any]:
    found: dict[str, Any] = MessageToDict(message)
    return found


def frame_id(event_id: int, index: int, count: int) -> str:
    return str(event_id) if index == count - 1 else f"{event_id}.{index}"


def parse_id(value: str) -> tuple[int, int | None]:
    """A resumption point: (event id, the index of the last update seen of it; None: all)."""
    head, dot, tail = value.strip().partition(".")
    try:
        event_id, index = int(head), int(tail) if dot else None
    except ValueError:
        raise InvalidInput("Last-Event-ID", "is not an event id this server sent") from None
    if event_id < 0 or (index is not None and index < 0):
        raise InvalidInput("Last-Event-ID", "is not an event id this server sent")
    return event_id, index


_RENDERED: OrderedDict[tuple[int, str], tuple[Frame, ...]] = OrderedDict()
_rendered_bytes = 0


def of(event: EventRecord, context_id: str) -> tuple[Frame, ...]:
    """The frames `event` makes for a task in context `context_id`, their JSON made."""
    global _rendered_bytes
    key = (event.id, context_id)
    found = _RENDERED.get(key)
    if found is not None:
        _RENDERED.move_to_end(key)
        return found
    updates = updates_json(event, context_id)
    made = tuple(
        Frame(frame_id(event.id, index, len(updates)), update)
        for index, update in enumerate(updates)
    )
    _RENDERED[key] = made
    _rendered_bytes += sum(len(frame.json) for frame in made)
    while len(_RENDERED) > CACHED_EVENTS or _rendered_bytes > CACHED_BYTES:
        _, dropped = _RENDERED.popitem(last=False)
        _rendered_bytes -= sum(len(frame.json) for frame in dropped)
    return made
