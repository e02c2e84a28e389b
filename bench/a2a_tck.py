"""The public A2A conformance kit (`a2aproject/a2a-tck`) against one of Baton's agents, with a
worker attached that does the tasks handed to it.

    scripts/a2a-tck [--tck DIR] [--from GIT] [--level must] [--transport jsonrpc,http_json]
                    [--review] [--kit-message-ids] [--database-url URL] [--agent tck/worker]
                    [-- PYTEST_ARGS...]

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
4. The worker (`bench.a2a_worker`, in this process) follows its routed tasks and acts out the
   kit's scenarios, keyed on the message id that handed each task off (`KitScenarios`): most
   it accepts, starts, checkpoints and finishes.
5. The kit: `run_tck.py --sut-host <server>/a2a/agents/<agent> --level <level>`, from its own
   folder. The kit has no option for credentials, so a pytest plugin given to it with `-p`
   adds `Authorization: Bearer <kit/client's token>` to every request its HTTP client sends
   to Baton's origin. The same plugin makes each message id the kit sends unique (unless
   `--kit-message-ids`), and with `--review` says the kit's input-required scenario in
   Baton's words (see `BEARER_PLUGIN`).

The kit's own output streams through; its reports stay in `<tck>/reports/`
(compatibility.json and .html, junitreport.xml). At the end a table lists each requirement the
kit recorded, with its status and a failure's first error. The exit status is the kit's.
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
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from baton.access.principals import Principal, PrincipalKind
from baton.store import migrate

from .a2a_worker import Step, Worker, allow_requesters, plan
from .runs import table, token
from .server import bench_database, start_server, stop_server

TCK_REPO = "https://github.com/a2aproject/a2a-tck"
# Branch 1.0-dev, 2026-05-05: the kit for A2A 1.0 (`main` still holds the 0.3 kit).
TCK_COMMIT = "357c4a87afa2818731590647cccbea31c31733a2"
REQUESTER = "kit/client"
LISTEN_TIMEOUT = 30.0

# Given to the kit's pytest with `-p baton_bearer`: the kit has no setting for credentials.
# It also changes, each when asked, the messages the kit sends to Baton (and only those):
# - BATON_TCK_UNIQUE_IDS: a counter after each message id. The kit gives every message of one
#   scenario the same id (`tck-complete-task-<run>`), and A2A lets an agent take a repeated id
#   for the same message (a retry), as Baton does: the same id to the same agent is the same
#   task. The counter keeps the kit's prefix, which is all the scenarios read; no test of the
#   kit compares message ids.
# - BATON_TCK_REVIEW: the kit's input-required scenario in Baton's words, where the requester
#   says what it wants: a new `tck-input-required` message hands off with REVIEW verification
#   (the returned result waits for the requester's verdict: INPUT_REQUIRED), and a
#   `tck-complete-task` message to an existing task names its verdict, `completeTask`.
BEARER_PLUGIN = '''"""Adds Baton's bearer token to every request the kit sends to Baton's
origin; with BATON_TCK_UNIQUE_IDS or BATON_TCK_REVIEW, changes its messages (bench/a2a_tck.py)."""
import itertools
import json
import os

import httpx

_TOKEN = os.environ["BATON_TCK_BEARER"]
_ORIGIN = os.environ["BATON_TCK_ORIGIN"].rstrip("/") + "/"
_UNIQUE = bool(os.environ.get("BATON_TCK_UNIQUE_IDS"))
_REVIEW = bool(os.environ.get("BATON_TCK_REVIEW"))
_COUNTER = itertools.count(1)
_send = httpx.Client.send


def _data(message, value):
    message.setdefault("parts", []).append({"data": value, "mediaType": "application/json"})


def _changed(request):
    if request.method != "POST" or not request.content:
        return request
    try:
        body = json.loads(request.content)
    except ValueError:
        return request
    params = body.get("params") if isinstance(body, dict) and "jsonrpc" in body else body
    message = params.get("message") if isinstance(params, dict) else None
    given = message.get("messageId") if isinstance(message, dict) else None
    if not isinstance(given, str) or not given.startswith(("tck-", "test-")):
        return request
    if _REVIEW and given.startswith("tck-input-required") and not message.get("taskId"):
        _data(message, {"verification": "REVIEW"})
    elif _REVIEW and given.startswith("tck-complete-task") and message.get("taskId"):
        _data(message, {"move": "completeTask"})
    if _UNIQUE:
        message["messageId"] = f"{given}-{next(_COUNTER)}"
    headers = [(k, v) for k, v in request.headers.raw if k.lower() != b"content-length"]
    return httpx.Request(
        request.method, request.url, headers=headers, json=body, extensions=request.extensions
    )


def _with_token(self, request, **kwargs):
    if str(request.url).startswith(_ORIGIN):
        if "authorization" not in request.headers:
            request.headers["Authorization"] = f"Bearer {_TOKEN}"
        if _UNIQUE or _REVIEW:
            request = _changed(request)
    return _send(self, request, **kwargs)


httpx.Client.send = _with_token
'''

# The kit's streaming timeout (TCK_STREAMING_TIMEOUT, its default 2 s): its resubscription test
# needs the task to stay working for twice that.
KIT_STREAMING_TIMEOUT = float(os.environ.get("TCK_STREAMING_TIMEOUT") or 2.0)
GET_TASK = {"jsonrpc": "2.0", "id": 1, "method": "GetTask"}
# The text a scenario's agent answers with (the kit checks it): the result's summary, which is
# the text of Baton's `result` artifact.
SUMMARIES = {
    "tck-artifact-text": "Generated text content",
    "tck-stream-001": "Stream hello from TCK",
    "tck-stream-003": "Stream task lifecycle",
    "tck-stream-ordering-001": "Ordered output",
    "tck-stream-artifact-text": "Streamed text content",
}


class KitScenarios:
    """The worker's plan for the kit's scenarios (its `scenarios/*.feature`), keyed, as the
    kit's own agents are, on the id of the message that handed the task off. The worker reads
    it from the task's history through A2A GetTask (GraphQL does not show A2A's ids), then:

    - `test-resubscribe-message-id…`: accepts and starts the task, and returns its result only
      after twice the kit's streaming timeout (the kit resubscribes meanwhile);
    - `tck-input-required…` without `review`: accepts and starts it, then pauses it waiting on
      a person, so that it stays open (WORKING): Baton's INPUT_REQUIRED is the requester's
      move (a REVIEW result to verify), which a plain-text message does not ask for. With
      `review` (the runner hands it off with REVIEW), the usual plan: the result then waits
      for the kit's verdict;
    - anything else: the worker's usual plan (accept, start, a checkpoint, the result: with
      AUTO verification, COMPLETED), the result's summary the text the scenario names, if any.

    `tck-message-response` (an agent answering with a Message, not a Task), `tck-reject-task`
    (the agent refusing the work itself) and artifacts of the agent's own making (a file, a
    data part of its choosing) have no counterpart: a broker always answers a task, only the
    receiving owner's gate refuses one, and a task's artifact is its result, one shape for all.
    """

    def __init__(self, url: str, token: str, agent: str, *, review: bool = False) -> None:
        self.base = f"{url.rstrip('/')}/a2a/agents/{agent}"
        self.headers = {"Authorization": f"Bearer {token}", "A2A-Version": "1.0"}
        self.review = review
        self.seen: dict[str, str] = {}  # task id -> the message id that handed it off

    async def message_id(self, task_id: str) -> str:
        async with httpx.AsyncClient(headers=self.headers, timeout=30) as http:
            call = {**GET_TASK, "params": {"id": task_id}}
            answer = (await http.post(self.base, json=call)).json()
        history = answer.get("result", {}).get("history") or []
        first: dict[str, Any] = next((m for m in history if m.get("role") == "ROLE_USER"), {})
        message_id = str(first.get("messageId", ""))
        self.seen[task_id] = message_id
        return message_id

    async def __call__(self, task_id: str) -> Sequence[Step]:
        message_id = await self.message_id(task_id)
        steps = list(plan(task_id))
        last = steps[-1]
        summary = next((t for p, t in SUMMARIES.items() if message_id.startswith(p)), None)
        if summary is not None:
            result = {**last.fields["result"], "summary": summary}
            steps[-1] = last = Step(last.mutation, last.input_type, {"result": result})
        if message_id.startswith("test-resubscribe-message-id"):
            steps[-1] = Step(last.mutation, last.input_type, last.fields, 2 * KIT_STREAMING_TIMEOUT)
        elif message_id.startswith("tck-input-required") and not self.review:
            pause = Step("pauseTask", "PauseTaskInput", {"waitingOn": "human"})
            steps = [*steps[:2], pause]
        return steps


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
        "BATON_TCK_UNIQUE_IDS": "" if args.kit_message_ids else "1",
        "BATON_TCK_REVIEW": "1" if args.review else "",
    }
    say(" ".join(command[1:]))
    try:
        process = await asyncio.create_subprocess_exec(*command, cwd=folder, env=env)
        return await process.wait()
    finally:
        shutil.rmtree(plugin_dir, ignore_errors=True)


def summary(report: Path) -> list[dict[str, Any]]:
    """One row per requirement the kit recorded: its level, its status, and the first error
    of a failed one. (The kit's per-transport results keep only each transport's last test of
    a requirement, so they are left to its own summary, which names a failure's transports.)"""
    data = json.loads(report.read_text())
    rows = []
    for req_id, req in sorted(data["per_requirement"].items()):
        if req["status"] in ("NOT TESTED", "NOT_TESTED"):
            continue
        errors = req.get("errors") or [""]
        first = " ".join(str(errors[0]).split())
        rows.append(
            {
                "requirement": req_id,
                "level": req["level"],
                "status": req["status"],
                "first error": first if len(first) <= 100 else first[:99] + "…",
            }
        )
    return rows


async def main_async(args: argparse.Namespace, folder: Path) -> int:
    python = ensure_kit(folder, args.source)
    report = folder / "reports" / "compatibility.json"
    report.unlink(missing_ok=True)  # an earlier run's, which a failed run would show
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
            scenarios = KitScenarios(server.url, worker_token, args.agent, review=args.review)
            worker = Worker(server.url, worker_token, plan=scenarios)
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
    p.add_argument(
        "--kit-message-ids",
        action="store_true",
        help="send the kit's message ids as they are (repeated ids are one task)",
    )
    p.add_argument(
        "--review",
        action="store_true",
        help="hand off the kit's input-required tasks with REVIEW verification, and its "
        "'complete' replies as completeTask",
    )
    p.add_argument("pytest_args", nargs="*", help="after --: passed to the kit's pytest")
    args = p.parse_args(argv)
    return asyncio.run(main_async(args, Path(args.tck).resolve()))


if __name__ == "__main__":
    raise SystemExit(main())
