"""One execution per subscription event, shared by every subscriber that would compute the
same answer.

Subscribers with the same document, variables and principal receive the same events; without
sharing, each would run the same completion and encode the same JSON for every event. The first
subscriber to reach an event starts its completion as a task of its own (so a subscriber that
leaves mid-way does not cancel it for the others); the rest await that task. Entries are kept
in an LRU bounded by count and by bytes: a subscriber that falls far behind computes its own
answer.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable
from typing import Any, Generic, TypeVar

T = TypeVar("T")


def share_key(item: Any) -> Hashable | None:
    """What identifies a stream item among all streams (`item.share_key()`), or None."""
    method = getattr(item, "share_key", None)
    return method() if callable(method) else None


class SharedOutcomes(Generic[T]):
    """The shared executions, in an LRU bounded by entries and by the bytes their outcomes
    hold (`size` of each, once it is done): big events make few entries."""

    def __init__(
        self,
        max_entries: int = 4096,
        max_bytes: int = 64 * 1024 * 1024,
        size: Callable[[T], int] = lambda _: 0,
    ) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.size = size
        self.bytes = 0
        self._entries: OrderedDict[Hashable, asyncio.Task[T]] = OrderedDict()
        self._sizes: dict[Hashable, int] = {}
        self._waiters: dict[asyncio.Task[T], list[asyncio.Future[None]]] = {}

    def _release(self, task: asyncio.Task[T]) -> None:
        if not task.cancelled():
            task.exception()  # retrieved, even when every waiter has gone
        for waiter in self._waiters.pop(task, ()):
            if not waiter.done():
                waiter.set_result(None)

    def __len__(self) -> int:
        return len(self._entries)

    async def get(self, key: Hashable, compute: Callable[[], Awaitable[T]]) -> T:
        task = self._entries.get(key)
        if task is None:
            task = asyncio.ensure_future(compute())
            task.add_done_callback(self._release)
            self._entries[key] = task
            self._evict()
        if not task.done():
            # Wait on a future of one's own, released with every other waiter by one callback
            # of the task: a subscriber that leaves cancels only its future, never the task.
            # (`asyncio.shield` per waiter cost two closures, two callbacks and an extra turn
            # of the loop for each of thousands of subscribers: a fifth of the fan-out's CPU
            # at 5,000, bench.live_delivery under py-spy.)
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.setdefault(task, []).append(waiter)
            await waiter
        result = task.result()
        if key not in self._sizes and self._entries.get(key) is task:
            self._sizes[key] = size = self.size(result)
            self.bytes += size
            self._evict()
        return result

    def _evict(self) -> None:
        while len(self._entries) > self.max_entries or (
            self.bytes > self.max_bytes and len(self._entries) > 1
        ):
            key, _ = self._entries.popitem(last=False)
            self.bytes -= self._sizes.pop(key, 0)
