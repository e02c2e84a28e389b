"""The four targets behind one interface: where to send a workload's requests, or (for the
direct asyncpg client, which has no server) how to run a measurement in-process elsewhere."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from baton.access.principals import Principal
from bench.server import start_server

from . import postgraphile
from .procs import Process, free_port, start_process, stop, wait_http
from .workloads import Values

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Tokens:
    """Bearer tokens minted by Baton, and the principal each one acts as."""

    by_role: dict[str, str]  # owner | agent | requester -> token
    principals: dict[str, Principal]  # token -> principal

    def json(self) -> str:
        return json.dumps(
            {t: {"kind": p.kind.value, "handle": p.handle} for t, p in self.principals.items()}
        )


@dataclass
class Servers:
    processes: dict[str, Process] = field(default_factory=dict)

    def stop(self) -> None:
        for process in self.processes.values():
            stop(process)
        self.processes.clear()


def start_baton(
    database_url: str, log: Path, workers: int, *, direct_url: str | None = None
) -> Process:
    """`baton serve --workers N` on `database_url`; with `direct_url`, that is a pooler's and
    this is the database's own (BATON_DATABASE_DIRECT_URL)."""
    env = {"BATON_DATABASE_DIRECT_URL": direct_url} if direct_url else None
    server = start_server(database_url, log, ("--workers", str(workers)), env)
    return Process(server.url, server.process, log, "baton")


def start_bare(database_url: str, log: Path, tokens: Tokens, extra: dict[str, Any]) -> Process:
    port = free_port()
    env = {
        **os.environ,
        "PYTHONPATH": _pythonpath(),
        "BENCH_DATABASE_URL": database_url,
        "BENCH_PRINCIPALS": tokens.json(),
        "BENCH_EXTRA": json.dumps(extra),
    }
    command = [sys.executable, "-m", "bench.compare.ceiling", "serve", str(port)]
    process = start_process(command, env, log, cwd=ROOT)
    url = f"http://127.0.0.1:{port}"
    wait_http(process, f"{url}/w1", "the bare endpoint", method="POST")
    return Process(url, process.process, log, "bare")


def start_postgraphile(
    installed: postgraphile.Installed,
    database_url: str,
    role: str,
    tokens: Tokens,
    log: Path,
    pool_size: int,
    *,
    free: bool = False,
) -> Process:
    return postgraphile.start(
        installed, database_url, role, tokens.principals, log, pool_size=pool_size, free=free
    )


def _pythonpath() -> str:
    here = [str(ROOT / "src"), str(ROOT)]
    return os.pathsep.join([*here, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)


def start_client(
    database_url: str,
    workload: str,
    principal: Principal,
    values: Values,
    extra: dict[str, Any],
    *,
    concurrency: int,
    seconds: float,
    warmup: float,
) -> subprocess.Popen[str]:
    """The direct asyncpg client for one measurement, in a process of its own (as a server
    would be); it speaks the line protocol of `ceiling.drive` on its stdin and stdout."""
    env = {
        **os.environ,
        "PYTHONPATH": _pythonpath(),
        "BENCH_DATABASE_URL": database_url,
        "BENCH_PRINCIPALS": json.dumps(
            {"-": {"kind": principal.kind.value, "handle": principal.handle}}
        ),
        "BENCH_EXTRA": json.dumps(extra),
        "BENCH_VALUES": values.to_json(),
    }
    command = [sys.executable, "-m", "bench.compare.ceiling", "drive", workload]
    command += [str(concurrency), str(seconds), str(warmup)]
    return subprocess.Popen(
        command, env=env, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
