"""Time limits for many waits at once, on one timer: `asyncio.timeout` for the work the server
does for every request or message.

`asyncio.timeout` arms a timer of the loop's for every block and disarms it after: about 4 µs
each here (timeit), several percent of a read of one task over HTTP and of a webhook attempt.
The blocks of one holder (the engine's operations, a webhook client's attempts) register
with its `Deadlines`: each its task and when it is due, and one timer, armed while any is
registered, cancels those past due every `tick` seconds. A block may so run up to `tick`
longer than asked; the limits here are seconds, the tick a tenth of one. As with
`asyncio.timeout`, the cancellation it made becomes `TimeoutError` on the way out of the
block, and a cancellation from elsewhere goes through as it came.
"""

from __future__ import annotations

import asyncio
from types import TracebackType
from weakref import WeakKeyDictionary, ref

TICK = 0.1  # seconds between looks for blocks past due, while any is registered


class Deadlines:
    def __init__(self, tick: float = TICK) -> None:
        self.tick = tick
        # Each loop's blocks apart (a holder may serve a loop per thread, in tests); the last
        # loop's at hand, as there is one in `baton serve`. Nothing here holds a loop: its
        # pending timer is the loop's own, so a closed loop goes with its last reference.
        self._loops: WeakKeyDictionary[asyncio.AbstractEventLoop, _OnLoop] = WeakKeyDictionary()
        self._last: _OnLoop | None = None

    def within(self, seconds: float) -> Limit:
        """A context manager limiting its block to about `seconds` (`TimeoutError` after)."""
        return Limit(self, seconds)

    def _on(self, loop: asyncio.AbstractEventLoop) -> _OnLoop:
        last = self._last
        if last is not None and last.loop() is loop:
            return last
        found = self._loops.get(loop)
        if found is None:
            found = self._loops[loop] = _OnLoop(loop, self.tick)
        self._last = found
        return found


class _OnLoop:
    """The blocks registered on one loop, and whether its timer is armed."""

    __slots__ = ("armed", "due", "loop", "tick")

    def __init__(self, loop: asyncio.AbstractEventLoop, tick: float) -> None:
        self.loop = ref(loop)
        self.tick = tick
        self.due: dict[Limit, None] = {}  # in the order registered
        self.armed = False

    def add(self, limit: Limit, loop: asyncio.AbstractEventLoop) -> None:
        self.due[limit] = None
        if not self.armed:
            self.armed = True
            loop.call_later(self.tick, self._sweep)

    def _sweep(self) -> None:
        loop = asyncio.get_running_loop()
        now = loop.time()
        for limit in [limit for limit in self.due if limit.at <= now]:
            del self.due[limit]
            limit.expire()
        if self.due:
            loop.call_later(self.tick, self._sweep)
        else:
            self.armed = False


class Limit:
    """One block's time limit (`Deadlines.within`), used once."""

    __slots__ = ("_cancelling", "_deadlines", "_expired", "_on", "_seconds", "_task", "at")

    def __init__(self, deadlines: Deadlines, seconds: float) -> None:
        self._deadlines = deadlines
        self._seconds = seconds
        self._task: asyncio.Task[object] | None = None
        self._on: _OnLoop | None = None
        self._expired = False
        self._cancelling = 0
        self.at = 0.0

    def __enter__(self) -> Limit:
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("a time limit must be used inside a task")
        self._task = task
        self._cancelling = task.cancelling()
        loop = task.get_loop()
        self.at = loop.time() + self._seconds
        self._on = on = self._deadlines._on(loop)
        on.add(self, loop)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._on is not None:
            self._on.due.pop(self, None)
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
