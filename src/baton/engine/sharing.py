"""One execution per subscription event, shared by every subscriber that would compute the
same answer.

Subscribers with the same document, variables and principal receive the same events; without
sharing, each would run the same completion and encode the same JSON for every event. The first
subscriber to reach an event runs its completion at once as far as it goes without waiting; one
that has to wait (for the database) goes on as a task of its own, so a subscriber that leaves
mid-way does not cancel it for the others, and the rest await that task. Entries are kept
in an LRU bounded by count and by bytes: a subscriber that falls far behind computes its own
answer.
"""

from __future__ import annotations

import asyncio
import contextvars
import sys
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Coroutine, Generator, Hashable
from functools import partial
from typing import Any, Generic, TypeVar

T = TypeVar("T")
A = TypeVar("A")

EXECUTION = "baton-shared-execution"  # the name of the tasks that run shared executions


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
        self._entries: OrderedDict[Hashable, asyncio.Future[T]] = OrderedDict()
        self._sizes: dict[asyncio.Future[T], int] = {}  # by entry: its identity hashes fast
        # The last answer `now_for` gave: thousands of subscribers of one group ask in a row.
        self._recent: tuple[Hashable, Any, T] | None = None
        self._waiters: dict[asyncio.Future[T], list[asyncio.Future[None]]] = {}

    def _release(self, task: asyncio.Future[T]) -> None:
        if not task.cancelled():
            task.exception()  # retrieved, even when every waiter has gone
        for waiter in self._waiters.pop(task, ()):
            if not waiter.done():
                waiter.set_result(None)

    def __len__(self) -> int:
        return len(self._entries)

    async def get(self, key: Hashable, compute: Callable[[], Awaitable[T]]) -> T:
        entry = self._entries.get(key)
        if entry is None:
            entry = self._start(compute)
            self._entries[key] = entry
            self._evict()
        if not entry.done():
            # Wait on a future of one's own, released with every other waiter by one callback
            # of the execution: a subscriber that leaves cancels only its future, never the
            # execution. (`asyncio.shield` per waiter cost two closures, two callbacks and an
            # extra turn of the loop for each of thousands of subscribers: a fifth of the
            # fan-out's CPU at 5,000, bench.live_delivery under py-spy.)
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.setdefault(entry, []).append(waiter)
            await waiter
        return self._result(key, entry)

    def now(self, key: Hashable, compute: Callable[[A], Awaitable[T]], arg: A) -> T | None:
        """The answer for `key` if it is there now, else None (then `get` waits for it). A
        missing one is started with `compute(arg)` and is there at once when it needs no I/O:
        the live fan-out asks for it in a loop over thousands of subscribers, where nothing
        may wait."""
        entry = self._entries.get(key)
        if entry is None:
            entry = self._start(partial(compute, arg))
            self._entries[key] = entry
            self._evict()
        if not entry.done() or entry.cancelled() or entry.exception() is not None:
            return None  # `get` raises what it raised, for the subscriber's own stream
        return self._result(key, entry)

    def now_for(
        self, group: Hashable, item: Any, compute: Callable[[Any], Awaitable[T]]
    ) -> T | None:
        """`now` for `item` (its `share_key`) in `group`, where the live fan-out asks: the
        same item of one event for each subscriber of the group in turn (an interned group,
        compared by identity, and the item the hub made once for all of them)."""
        recent = self._recent
        if recent is not None and recent[1] is item and recent[0] is group:
            return recent[2]
        key = share_key(item)
        if key is None:
            return None
        result = self.now((group, key), compute, item)
        if result is not None:
            self._recent = (group, item, result)
        return result

    def _result(self, key: Hashable, entry: asyncio.Future[T]) -> T:
        result = entry.result()
        if entry not in self._sizes and self._entries.get(key) is entry:
            self._sizes[entry] = size = self.size(result)
            self.bytes += size
            self._evict()
        return result

    def _start(self, compute: Callable[[], Awaitable[T]]) -> asyncio.Future[T]:
        """The execution as a task that runs at once as far as it goes without waiting (an
        eager task, Python 3.12's, emulated on 3.11). An execution that needs no I/O (an
        event's fields are all in the event) is done before any subscriber waits: none of them
        then takes a second turn of the loop for it, which was a tenth of the fan-out's CPU at
        10,000 subscribers. It runs as its own task from the start, in a context of its own,
        so what it binds to the current task (a timeout) stays with it, not with the
        subscriber that happened to start it."""
        loop = asyncio.get_running_loop()
        context = contextvars.copy_context()
        coro = _coroutine(compute())
        if sys.version_info >= (3, 12):
            task: asyncio.Task[T] = asyncio.Task(  # type: ignore[call-arg,unused-ignore]
                coro, loop=loop, name=EXECUTION, context=context, eager_start=True
            )
            task.add_done_callback(self._release)
            return task
        resumed = _Resumed(coro)
        task = loop.create_task(resumed, name=EXECUTION, context=context)
        current = asyncio.current_task(loop)
        if current is not None:
            asyncio.tasks._leave_task(loop, current)
        asyncio.tasks._enter_task(loop, task)
        try:
            context.run(resumed.first_step)
        finally:
            asyncio.tasks._leave_task(loop, task)
            if current is not None:
                asyncio.tasks._enter_task(loop, current)
        task.add_done_callback(self._release)
        if resumed.ended is None:
            return task  # waiting: the task goes on from where the first step stopped
        # Done already: the task only ends at its first turn, so the answer is shared now.
        future = loop.create_future()
        if isinstance(resumed.ended, StopIteration):
            future.set_result(resumed.ended.value)
        else:
            future.set_exception(resumed.ended)
        return future

    def _evict(self) -> None:
        while len(self._entries) > self.max_entries or (
            self.bytes > self.max_bytes and len(self._entries) > 1
        ):
            _, entry = self._entries.popitem(last=False)
            self.bytes -= self._sizes.pop(entry, 0)


def _coroutine(awaitable: Awaitable[T]) -> Coroutine[Any, Any, T]:
    if isinstance(awaitable, Coroutine):
        return awaitable

    async def wrapped() -> T:
        return await awaitable

    return wrapped()


class _Resumed(Coroutine[Any, Any, T]):
    """A coroutine for a task to drive whose first step was taken before the task's first
    turn (`first_step`, with the task current): that turn hands the task what the step
    yielded, or ends it as the step did; everything after (the task's cancellation too, even
    before that turn) goes to the coroutine itself."""

    __slots__ = ("_coro", "_started", "_step", "ended")

    def __init__(self, coro: Coroutine[Any, Any, T]) -> None:
        self._coro = coro
        self._step: Any = None
        self._started = False
        # How the first step ended the coroutine: its return, its exception; None: it waits.
        self.ended: StopIteration | BaseException | None = None

    def first_step(self) -> None:
        try:
            self._step = self._coro.send(None)
        except BaseException as exc:  # StopIteration: it returned
            self.ended = exc

    def send(self, value: Any) -> Any:
        if not self._started:
            self._started = True
            if self.ended is not None:
                raise self.ended
            step, self._step = self._step, None
            return step
        return self._coro.send(value)

    def throw(self, *args: Any) -> Any:
        self._started = True
        self._step = None
        return self._coro.throw(*args)

    def close(self) -> None:
        self._coro.close()

    def __await__(self) -> Generator[Any, None, T]:
        raise TypeError("only its task drives a resumed execution")
