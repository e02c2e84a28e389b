"""Time limits for many waits at once, on one timer: `asyncio.timeout` for webhook attempts.

`asyncio.timeout` arms a timer of the loop's for every wait and disarms it after: about 4 µs
an attempt here (timeit), a twentieth of what the worker spends on a message. The attempts
of one client share a `Deadlines`: each registers its task and when it is due, and one timer,
armed while any is registered, cancels those past due every `tick` seconds. A wait may so
run up to `tick` longer than asked; an attempt's limit is seconds, its tick a tenth of one.
As with `asyncio.timeout`, the cancellation it made becomes `TimeoutError` on the way out of
the block, and a cancellation from elsewhere goes through as it came.
"""

from __future__ import annotations

import asyncio
from types import TracebackType

TICK = 0.1  # seconds between looks for waits past due, while any is registered


class Deadlines:
    def __init__(self, tick: float = TICK) -> None:
        self.tick = tick
        self._due: dict[Limit, None] = {}  # in the order registered
        self._timer: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None  # the timer's

    def within(self, seconds: float) -> Limit:
        """A context manager limiting its block to about `seconds` (`TimeoutError` after)."""
        return Limit(self, seconds)

    def _add(self, limit: Limit, loop: asyncio.AbstractEventLoop) -> None:
        if self._loop is not loop:  # what was registered on a closed loop is gone with it
            self._due.clear()
            self._loop, self._timer = loop, None
        self._due[limit] = None
        if self._timer is None:
            self._timer = loop.call_later(self.tick, self._sweep)

    def _remove(self, limit: Limit) -> None:
        self._due.pop(limit, None)

    def _sweep(self) -> None:
        self._timer = None
        loop = asyncio.get_running_loop()
        now = loop.time()
        for limit in [limit for limit in self._due if limit.at <= now]:
            del self._due[limit]
            limit.expire()
        if self._due:
            self._timer = loop.call_later(self.tick, self._sweep)


class Limit:
    __slots__ = ("_cancelling", "_deadlines", "_expired", "_seconds", "_task", "at")

    def __init__(self, deadlines: Deadlines, seconds: float) -> None:
        self._deadlines = deadlines
        self._seconds = seconds
        self._task: asyncio.Task[object] | None = None
        self._expired = False
        self._cancelling = 0
        self.at = 0.0

    def __enter__(self) -> Limit:
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("a time limit must be used inside a task")
        self._task = task
        self._cancelling = task.cancelling()
        loop = asyncio.get_running_loop()
        self.at = loop.time() + self._seconds
        self._deadlines._add(self, loop)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._deadlines._remove(self)
        # As `asyncio.timeout`: the cancellation it asked for is taken back; it is a timeout
        # unless another was asked for meanwhile.
        task = self._task
        if (
            self._expired
            and task is not None
            and task.uncancel() <= self._cancelling
            and exc_type is asyncio.CancelledError
        ):
            raise TimeoutError from exc

    def expire(self) -> None:
        """Past due: cancel the block's task (once)."""
        if not self._expired and self._task is not None:
            self._expired = True
            self._task.cancel()
