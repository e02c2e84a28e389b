"""CPU time of a process tree, from /proc (utime + stime of the process and its descendants).

A server's tree is its own process and its children (`baton serve --workers N` forks workers);
PostgreSQL's is the postmaster and its backends. CPU spent in a window by a process that
exited before its end is lost, so pooled connections (which live through it) are what this
measures well.
"""

from __future__ import annotations

import os

import asyncpg  # type: ignore[import-untyped, unused-ignore]
import psutil  # type: ignore[import-untyped, unused-ignore]

from baton.store.db import libpq_url

TICKS = os.sysconf("SC_CLK_TCK")


def tree_cpu(pid: int) -> dict[int, float]:
    """utime + stime in seconds of `pid` and every descendant alive now, by PID."""
    try:
        root = psutil.Process(pid)
        processes = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return {}
    return {p.pid: _stat_seconds(p.pid) for p in processes}


def cpu_between(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU spent between two snapshots by the processes alive at the second (a process that
    exited in between loses only what it spent in the window, not its whole life)."""
    return sum(seconds - before.get(pid, 0.0) for pid, seconds in after.items())


def _stat_seconds(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    # After the command: state is field 3; utime and stime are fields 14 and 15.
    return (int(fields[11]) + int(fields[12])) / TICKS


async def postmaster_pid(database_url: str) -> int | None:
    """The PID of the postmaster serving `database_url`, if it runs on this machine."""
    conn = await asyncpg.connect(libpq_url(database_url))
    try:  # while the backend lives: it exits when the connection closes
        backend = int(await conn.fetchval("SELECT pg_backend_pid()"))
        try:
            parent = psutil.Process(backend).parent()
        except psutil.NoSuchProcess:
            return None  # another machine (or container): PostgreSQL CPU is not measured
    finally:
        await conn.close()
    return int(parent.pid) if parent is not None else None
