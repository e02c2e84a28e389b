"""Items pushed past a stream's task, for the live fan-out.

A subscription's consumer is a task waiting for the stream's next item, through every layer
between the hub and the socket (the hub's stream, the resolver, the engine, the door). Waking
it for each event costs a turn of the event loop and a resumption of each of those layers: at
10,000 subscribers, about a third of the server's CPU per delivery (bench.live_delivery under
py-spy). A `Pushable` stream takes a `Sink` from the layer above: while the stream's task waits
with nothing queued, the hub hands an event straight to it, each layer doing at once what its
generator would have done, down to the door writing the frame. A layer that cannot (the answer
needs the database, the socket is behind) returns False, and the item goes the ordinary way,
through the task, in order: nothing is pushed past an item that waits.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Coroutine
from typing import Any, Protocol, TypeVar, runtime_checkable

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)

Sink = Callable[[T], bool]
"""Takes one item now: True when it is done with it (sent, or nothing to send), False when the
stream must carry it to its consumer the ordinary way (its next `__anext__`)."""


@runtime_checkable
class Pushable(Protocol[T_co]):
    def push_to(self, sink: Callable[[T_co], bool]) -> None:
        """Hand items to `sink` while the consumer waits with nothing queued."""


class Passing(AsyncGenerator[T, None]):
    """An async generator's items, pushed past its consumer's task by `pushes` when asked."""

    __slots__ = ("_items", "_pushes")

    def __init__(self, items: AsyncGenerator[T, None], pushes: Pushable[T]) -> None:
        self._items = items
        self._pushes = pushes

    def __anext__(self) -> Coroutine[Any, Any, T]:
        return self._items.__anext__()

    def asend(self, value: None, /) -> Coroutine[Any, Any, T]:
        return self._items.asend(value)

    def athrow(self, *args: Any) -> Coroutine[Any, Any, T]:
        return self._items.athrow(*args)

    def aclose(self) -> Coroutine[Any, Any, None]:
        return self._items.aclose()

    def push_to(self, sink: Sink[T]) -> None:
        self._pushes.push_to(sink)
