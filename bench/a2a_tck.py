"""The public A2A conformance kit (`a2aproject/a2a-tck`) against one of Baton's agents, with a
worker attached that does the tasks handed to it.

    scripts/a2a-tck [--tck DIR] [--from GIT] [--level must] [--transport jsonrpc,http_json]
                    [--database-url URL] [--agent tck/worker] [-- PYTEST_ARGS...]

What it does, in order:

1. The kit: a checkout in `--tck` (default /tmp/a2a-tck; when the folder has none, cloned at
   `TCK_COMMIT` from `--from`: GitHub by default, or any git directory or URL holding that
   commit, such as a local mirror where GitHub is out of reach) and its own venv in
   `<tck>/.venv` (`pip install -e <tck>`, from PyPI), made when missing. Nothing of the kit is
   part of Baton's tree or venv, and the suite does not run it: it needs the kit's source,
   which CI does not fetch.
2. A fresh database (`baton_a2a_tck_<random>` on `--database-url` / BATON_BENCH_DATABASE_URL,
   else on an embedded PostgreSQL), migrated, and one `baton serve` on it, with webhooks allowed
   to plain http on loopback (`BATON_WEBHOOK_ALLOW_PRIVATE`, `BATON_WEBHOOK_ALLOW_HTTP`): the
   kit's push-notification receiver listens on http://localhost.
3. Tokens: the kit acts as `kit/client` (the requester); the agent under test is `--agent`
   (`tck/worker`), and its owner (`tck`) lets `kit/*` through its gate (an ALLOW rule), so the
   kit's hand-offs are routed to the worker, not held for approval.
4. The worker (`bench.a2a_worker`, in this process) follows its routed tasks and accepts,
   starts, checkpoints and finishes each one.
5. The kit: `run_tck.py --sut-host <server>/a2a/agents/<agent> --level <level>`, from its own
   folder. The kit has no option for credentials, so a pytest plugin given to it with `-p`
   adds `Authorization: Bearer <kit/client's token>` to every request its HTTP client sends
   to Baton's origin (cards are public; every other call needs the token).

The kit's own output streams through; its reports stay in `<tck>/reports/`
(compatibility.json and .html, junitreport.xml). At the end a table lists each requirement the
kit recorded, with its result per transport. The exit status is the kit's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from baton.access.principals import Principal, PrincipalKind
from baton.store import migrate

from .a2a_worker import Worker, allow_requesters
from .runs import table, token
from .server import bench_database, start_server, stop_server

TCK_REPO = "https://github.com/a2aproject/a2a-tck"
# Branch 1.0-dev, 2026-05-05: the kit for A2A 1.0 (`main` still holds the 0.3 kit).
TCK_COMMIT = "357c4a87afa2818731590647cccbea31c31733a2"
REQUESTER = "kit/client"
LISTEN_TIMEOUT = 30.0

# Given to the kit's pytest with `-p baton_bearer`: the kit has no setting for credentials.
BEARER_PLUGIN = '''"""Adds Baton's bearer token to every request the kit sends to Baton's origin."""
import os

import httpx

_TOKEN = os.environ["BATON_TCK_BEARER"]
_ORIGIN = os.environ["BATON_TCK_ORIGIN"].rstrip("/") + "/"
_send = httpx.Client.send


def _with_token(self, request, **kwargs):
    if str(request.url).startswith(_ORIGIN) and "authorization" not in request.headers:
        request.headers["Authorization"] = f"Bearer {_TOKEN}"
    return _send(self, request, **kwargs)


httpx.Client.send = _with_token
'''


def say(line: str) -> None:
    print(f"a2a-tck: {line}", file=sys.stderr, flush=True)


def ensure_kit(folder: Path, source: str) -> Path:
    """The kit's checkout and venv in `folder`, made when missing (cloned from `source`);
    answers its Python."""
    if not (folder / "run_tck.py").exists():
        say(f"cloning {source} at {TCK_COMMIT[:12]} into {folder}")
        subprocess.run(["git", "clone", "-q", source, str(folder)], check=True)
        subprocess.run(["git", "-C", str(folder), "checkout", "-q", TCK_COMMIT], check=True)
    head = subprocess.run(
        ["git", "-C", str(folder), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    if head and head != TCK_COMMIT:
        say(f"note: {folder} is at {head[:12]}, not the tested {TCK_COMMIT[:12]}")
    python = folder / ".venv" / "bin" / "python"
    if not python.exists():
        say(f"installing the kit into {folder / '.venv'} (pip, from PyPI)")
        subprocess.run([sys.executable, "-m", "venv", str(folder / ".venv")], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "-e", str(folder)], check=True)
    return python


async def run_kit(
    python: Path, folder: Path, sut: str, origin: str, bearer: str, args: argparse.Namespace
) -> int:
    plugin_dir = Path(tempfile.mkdtemp(prefix="baton-tck-plugin-"))
    (plugin_dir / "baton_bearer.py").write_text(BEARER_PLUGIN)
    command = [str(python), "run_tck.py", "--sut-host", sut, "--level", args.level]
    if args.transport:
        command += ["--transport", args.transport]
    command += ["--", "-p", "baton_bearer", *args.pytest_args]
    env = {
        **os.environ,
        "PYTHONPATH": str(plugin_dir),
        "BATON_TCK_BEARER": bearer,
        "BATON_TCK_ORIGIN": origin,
    }
    say(" ".join(command[1:]))
    try:
        process = await asyncio.create_subprocess_exec(*command, cwd=folder, env=env)
        return await process.wait()
    finally:
        shutil.rmtree(plugin_dir, ignore_errors=True)


def summary(report: Path) -> list[dict[str, Any]]:
    """One row per requirement the kit recorded: its level, status and result per transport."""
    data = json.loads(report.read_text())
    rows = []
    for req_id, req in sorted(data["per_requirement"].items()):
        if req["status"] in ("NOT TESTED", "NOT_TESTED"):
            continue
        row: dict[str, Any] = {"requirement": req_id, "level": req["level"]}
        row["status"] = req["status"]
        for transport in ("jsonrpc", "http_json", "grpc"):
            row[transport] = req["transports"].get(transport, "-")
        rows.append(row)
    return rows


async def main_async(args: argparse.Namespace, folder: Path) -> int:
    python = ensure_kit(folder, args.source)
    database = args.database_url or os.environ.get("BATON_BENCH_DATABASE_URL")
    owner = args.agent.split("/")[0]
    async with bench_database(database, prefix="baton_a2a_tck") as (url, where):
        say(f"database {where}")
        await migrate.upgrade_url(url)
        logs = Path(tempfile.mkdtemp(prefix="baton-a2a-tck-"))
        env = {"BATON_WEBHOOK_ALLOW_PRIVATE": "true", "BATON_WEBHOOK_ALLOW_HTTP": "true"}
        server = start_server(url, logs / "serve.log", env=env)
        say(f"baton serve at {server.url} (log {logs / 'serve.log'})")
        try:
            owner_token = await token(url, Principal(PrincipalKind.OWNER, owner))
            worker_token = await token(url, Principal(PrincipalKind.AGENT, args.agent))
            requester_token = await token(url, Principal(PrincipalKind.AGENT, REQUESTER))
            await allow_requesters(server.url, owner_token, REQUESTER.split("/")[0] + "/*")
            worker = Worker(server.url, worker_token)
            working = asyncio.create_task(worker.run())
            await asyncio.wait_for(worker.listening.wait(), LISTEN_TIMEOUT)
            sut = f"{server.url}/a2a/agents/{args.agent}"
            try:
                status = await run_kit(python, folder, sut, server.url, requester_token, args)
            finally:
                working.cancel()
                await asyncio.gather(working, return_exceptions=True)
        finally:
            stop_server(server)
    report = folder / "reports" / "compatibility.json"
    rows = summary(report) if report.exists() else []
    if rows:
        print(table(rows))
    say(f"the kit's reports: {report.parent}; tasks the worker did: {len(worker.done)}")
    return status


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="scripts/a2a-tck", description=__doc__.split("\n")[0])
    p.add_argument("--tck", default="/tmp/a2a-tck", help="the kit's checkout (made if missing)")
    p.add_argument(
        "--from",
        dest="source",
        default=os.environ.get("BATON_TCK_SOURCE", TCK_REPO),
        help="where to clone the kit from when --tck has none (BATON_TCK_SOURCE)",
    )
    p.add_argument("--level", default="must", choices=["must", "should", "may"])
    p.add_argument("--transport", default=None, help="the kit's filter, e.g. jsonrpc,http_json")
    p.add_argument("--database-url", default=None)
    p.add_argument("--agent", default="tck/worker", help="the agent under test, owner/agent")
    p.add_argument("pytest_args", nargs="*", help="after --: passed to the kit's pytest")
    args = p.parse_args(argv)
    return asyncio.run(main_async(args, Path(args.tck).resolve()))


if __name__ == "__main__":
    raise SystemExit(main())
