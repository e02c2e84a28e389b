"""Helpers for tests that run `baton` as a process: run a command, stop a server, watch pids.

Bounds here are the documented ones with room for a loaded machine, never a measure of speed:
a stop signal ends `baton serve` within `STOP_DEADLINE_SECONDS` (after which it exits with
code 1 whatever still runs), so a graceful exit (code 0) is itself the proof that it kept it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from baton.cli import STOP_DEADLINE_SECONDS

# How long a test waits for what must happen within the documented stop deadline.
STOP_WAIT = STOP_DEADLINE_SECONDS + 10


def baton(*args: str, env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "baton.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def stop(process: subprocess.Popen[bytes], sig: signal.Signals) -> int:
    """Send `sig`; the exit code (a failure if the process outlives the stop deadline)."""
    process.send_signal(sig)
    try:
        return process.wait(timeout=STOP_WAIT)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        pytest.fail(f"baton serve outlived its {STOP_DEADLINE_SECONDS:g} s stop deadline")


def gone(pid: int, within: float = STOP_WAIT) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


def postgres_in(data_dir: Path) -> list[int]:
    """Pids of PostgreSQL processes whose command line names `data_dir` (the postmaster runs
    `postgres -D <data_dir>/pgdata`), found without its pid file."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:  # it has just ended
            continue
        if (
            command
            and command[0].endswith(b"postgres")
            and str(data_dir).encode() in b" ".join(command)
        ):
            found.append(int(entry.name))
    return found


def no_postgres_in(data_dir: Path, within: float = STOP_WAIT) -> bool:
    deadline = time.monotonic() + within
    while postgres_in(data_dir):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def wait_for_line(
    log: Path, text: str, process: subprocess.Popen[bytes], within: float = 60
) -> None:
    """Until `text` appears in the process's log (a failure if it exits or never says it)."""
    deadline = time.monotonic() + within
    while text not in log.read_text():
        if process.poll() is not None:
            pytest.fail(f"baton serve exited before saying {text!r}: {log.read_text()}")
        if time.monotonic() > deadline:
            pytest.fail(f"baton serve never said {text!r}: {log.read_text()}")
        time.sleep(0.02)
