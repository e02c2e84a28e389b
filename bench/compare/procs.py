"""Server processes of the comparison: start, wait until they answer, stop."""

from __future__ import annotations

import signal
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from bench.server import _free_port as free_port
from bench.server import raise_open_files_limit

READY_TIMEOUT = 90.0

__all__ = ["Process", "free_port", "start_process", "stop", "tail", "wait_http"]


@dataclass
class Process:
    url: str
    process: subprocess.Popen[bytes]
    log: Path
    name: str

    @property
    def pid(self) -> int:
        return self.process.pid


def start_process(
    command: list[str], env: dict[str, str], log: Path, *, cwd: Path | None = None
) -> Process:
    with log.open("wb") as out:  # the child keeps its own copy of the descriptor
        process = subprocess.Popen(
            command,
            env=env,
            cwd=cwd,
            stdout=out,
            stderr=subprocess.STDOUT,
            preexec_fn=raise_open_files_limit,
            start_new_session=True,  # Ctrl-C reaches the bench only; it stops the servers
        )
    return Process("", process, log, command[0])


def wait_http(process: Process, url: str, name: str, *, method: str = "GET") -> None:
    """Until `url` answers at all (any HTTP status); raises with the log if the process dies."""
    deadline = time.monotonic() + READY_TIMEOUT
    while time.monotonic() < deadline:
        if process.process.poll() is not None:
            raise RuntimeError(f"{name} exited:\n{tail(process.log)}")
        request = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
        try:
            with urllib.request.urlopen(request, timeout=1):
                return
        except urllib.error.HTTPError:
            return
        except OSError:
            time.sleep(0.2)
    stop(process)
    raise RuntimeError(f"{name} did not answer at {url}:\n{tail(process.log)}")


def stop(process: Process) -> None:
    if process.process.poll() is None:
        process.process.send_signal(signal.SIGINT)
        try:
            process.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.process.kill()
            process.process.wait()


def tail(log: Path, lines: int = 30) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"
