"""A process's CPU time to the nanosecond, for figures taken in slices of a few dozen calls.

/proc's `utime + stime` (what `Server.cpu_seconds` reads) counts in 10 ms ticks: fine for
hundreds of calls, not for the short slices that benchmarks interleave so that every door
sees the same load of a shared machine. The scheduler's own account (`schedstat`: time on a
CPU, in ns) has no ticks; it is summed over the process's threads, so a thread that ended
since the last reading takes its time with it (the server's work runs on its main thread).
"""

from __future__ import annotations

from pathlib import Path


def on_cpu(pid: int) -> float:
    """Seconds `pid`'s live threads have spent on a CPU."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (FileNotFoundError, ProcessLookupError):  # the thread ended meanwhile
            continue
    return total / 1e9
