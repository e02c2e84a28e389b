"""`baton serve --workers N`: N forked processes accepting on the sockets the parent bound.

Every worker is a whole server: its own pool, event-log readers and sweepers. The live
guarantees hold across them because each worker's hub reads the same log from PostgreSQL, so an
event committed through one worker reaches subscribers on every other.

The parent only supervises. A worker that dies is replaced, after a pause that grows while
workers keep dying young (a replacement cannot start while the database is away, for one).
Only when no worker has ever lived past its start, five times running, does the command end:
that is a broken installation, not bad luck. SIGTERM or SIGINT to the parent stops every
worker with SIGTERM, and the parent returns once they are gone. Workers run in their own
process group, so a terminal's Ctrl-C reaches them once (through the parent), and on Linux
each is told to stop if the parent dies, so `kill -9` of the parent leaves no orphans.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import logging
import os
import signal
import sys
import time
from collections.abc import Callable
from types import FrameType

log = logging.getLogger("baton")

# A worker that ends sooner than this after its start died young (a startup failure, most
# likely); this many young deaths in a row, before any worker got older, end the command.
YOUNG_SECONDS = 10.0
YOUNG_DEATHS_TO_GIVE_UP = 5
MAX_PAUSE_SECONDS = 30.0
_PR_SET_PDEATHSIG = 1


def supervise(
    count: int,
    serve: Callable[[], None],
    on_stop: Callable[[], None],
    *,
    max_pause: float = MAX_PAUSE_SECONDS,
) -> int:
    """Run `serve` in `count` forked workers until SIGTERM/SIGINT; the exit code to return.

    `serve` runs in the child and must return when the worker's server has stopped;
    `on_stop` runs in the parent when a stop signal arrives (it starts the stop deadline).
    """
    children: dict[int, float] = {}  # pid -> when it started
    stopping = False

    def stop(sig: int, frame: FrameType | None) -> None:
        nonlocal stopping
        if not stopping:
            stopping = True
            on_stop()
        for pid in list(children):
            _signal(pid, signal.SIGTERM)

    def spawn() -> None:
        pid = os.fork()
        if pid == 0:
            _run_child(serve)
        children[pid] = time.monotonic()

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    young_deaths = 0
    ever_up = False  # some worker lived past YOUNG_SECONDS
    try:
        for _ in range(count):
            spawn()
        log.info("%d workers started (pids %s)", count, " ".join(map(str, children)))
        while children:
            pid, status = os.wait()
            started = children.pop(pid, None)
            if started is None or stopping:
                continue
            code = os.waitstatus_to_exitcode(status)
            now = time.monotonic()
            young = now - started < YOUNG_SECONDS
            ever_up = (
                ever_up or not young or any(now - t >= YOUNG_SECONDS for t in children.values())
            )
            young_deaths = young_deaths + 1 if young else 0
            if young_deaths >= YOUNG_DEATHS_TO_GIVE_UP and not ever_up:
                print(
                    f"baton: workers keep ending at start (last: pid {pid}, {_ended(code)});"
                    " see the log above",
                    file=sys.stderr,
                    flush=True,
                )
                stop(signal.SIGTERM, None)
                _reap(children)
                return 1
            pause = min(2.0**young_deaths - 1, max_pause)
            log.error("worker %d %s; starting another in %gs", pid, _ended(code), pause)
            time.sleep(pause)
            if not stopping:
                spawn()
        return 0
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _run_child(serve: Callable[[], None]) -> None:
    """The forked worker: never returns into the parent's code."""
    code = 1
    try:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, signal.SIG_DFL)
        os.setpgid(0, 0)
        parent = os.getppid()
        _die_with_parent()
        if os.getppid() != parent:  # the parent died before the request above took effect
            return
        serve()
        code = 0
    except SystemExit as exc:  # uvicorn ends a failed startup with sys.exit(3)
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        log.exception("worker %d failed", os.getpid())
    finally:
        logging.shutdown()
        os._exit(code)


def _die_with_parent() -> None:
    """Linux: SIGTERM to this process when its parent dies. Elsewhere, nothing."""
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def _signal(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # it has just ended
        os.kill(pid, sig)


def _reap(children: dict[int, float]) -> None:
    while children:
        pid, _ = os.wait()
        children.pop(pid, None)


def _ended(code: int) -> str:
    return f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
