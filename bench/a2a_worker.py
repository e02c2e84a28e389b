"""A small agent that does every task handed to it, so that an A2A client of Baton sees its
tasks worked on and finished: the worker behind the conformance kit, the npm client test and
`bench.a2a`.

    .venv/bin/python -m bench.a2a_worker --url http://127.0.0.1:8000 --token $AGENT_TOKEN \\
        [--owner-token $OWNER_TOKEN --allow 'kit/*']

It acts as the agent principal its token names, through Baton's GraphQL only. It follows its
own routed tasks live, over GraphQL over Server-Sent Events (`taskEvents(filter: {assignee:
<itself>, states: [routed]}, after: <cursor>)`), after catching up on the tasks already routed to
it; a stream that is cut is opened again after the last event id it received, so no hand-off is
missed and none is waited for by polling. Each task is accepted, started, given a checkpoint and
a result (a summary and one `note` evidence): a task handed off with `AUTO` verification is then
completed by Baton, a `REVIEW` one waits in `verifying` for its requester. A move refused because
the task moved on meanwhile (a cancel) ends the work on that task quietly.

With `--owner-token` (a token of the worker's owner) and `--allow GLOB`, it first sets its
owner's gate rule `requester: GLOB, decision: ALLOW`, so that hand-offs from another owner's
agents are routed to it instead of held for approval.

It prints `a2a-worker: listening as <handle>` on stdout once its stream is open, and one line
per task on stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import json
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from typing import Any

import httpx
from httpx_sse import aconnect_sse

ROUTED_EVENTS = """subscription($f: TaskEventFilter, $after: ID) {
  taskEvents(filter: $f, after: $after) { id taskId } }"""
ROUTED_TASKS = """query($f: TaskFilter, $after: String) {
  tasks(filter: $f, first: 100, after: $after) {
    edges { node { id } } pageInfo { hasNextPage endCursor } } }"""
START = "{ viewer { handle } streamCursors { taskEvents } }"
MOVE = """mutation($in: %(input)s!) { %(name)s(input: $in) { __typename
  ... on MoveSuccess { task { state } } ... on Error { code message } } }"""
ALLOW = """mutation($in: SetGateRuleInput!) { setGateRule(input: $in) { __typename
  ... on GateRuleSuccess { rule { id } } ... on Error { code message } } }"""

RESUME_AFTER_SECONDS = 1.0


@dataclass(frozen=True)
class Step:
    """One move: its mutation, its input type, what the input holds beside the task's id, and
    how long the worker waits before making it (work that takes time)."""

    mutation: str
    input_type: str
    fields: dict[str, Any] = field(default_factory=dict)
    delay: float = 0.0


# What the worker does with a task, given its id: the steps, or a coroutine answering them.
Plan = Callable[[str], Sequence[Step] | Awaitable[Sequence[Step]]]


CHECKPOINT = {"progress": "Working on it", "nextSteps": ["return the result"]}


def result_for(task_id: str) -> dict[str, Any]:
    return {
        "summary": f"Done: {task_id}",
        "evidence": [{"kind": "note", "summary": "what was done", "content": "all of it"}],
    }


def plan(task_id: str) -> list[Step]:
    """What the worker does with a task: accept, start, a checkpoint, the result."""
    return [
        Step("acceptTask", "AcceptTaskInput"),
        Step("startTask", "StartTaskInput"),
        Step("saveCheckpoint", "SaveCheckpointInput", {"checkpoint": CHECKPOINT}),
        Step("submitResult", "SubmitResultInput", {"result": result_for(task_id)}),
    ]


class GraphQLError(Exception):
    pass


class Worker:
    """One agent doing its tasks; `run()` until cancelled."""

    def __init__(
        self,
        url: str,
        token: str,
        *,
        plan: Plan = plan,
        concurrency: int = 8,
        log: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True),
    ) -> None:
        self.url = url.rstrip("/")
        self.token = token
        self.plan = plan
        self.log = log
        self.handle = ""
        self.listening = asyncio.Event()
        self.done: dict[str, str] = {}  # task id -> the state the worker left it in
        self._finished = asyncio.Event()
        self._slots = asyncio.Semaphore(concurrency)
        self._busy: set[str] = set()
        self._running: set[asyncio.Task[None]] = set()

    @asynccontextmanager
    async def _http(self, read_timeout: float | None = 30) -> AsyncIterator[httpx.AsyncClient]:
        headers = {"Authorization": f"Bearer {self.token}"}
        async with httpx.AsyncClient(
            base_url=self.url, headers=headers, timeout=read_timeout
        ) as http:
            yield http

    async def run(self) -> None:
        async with self._http() as http:
            start = await graphql(http, START)
            self.handle = start["viewer"]["handle"]
            cursor: str = start["streamCursors"]["taskEvents"]
            # The cursor is taken before the page, so a task routed in between is in one or both.
            for task_id in await self._routed(http):
                self._take(http, task_id)
            variables = {"f": {"assignee": self.handle, "states": ["routed"]}, "after": cursor}
            try:
                while True:
                    try:
                        async for event in self._follow(variables):
                            variables["after"] = event["id"]
                            self._take(http, event["taskId"])
                        return  # completed by the server
                    except (httpx.HTTPError, GraphQLError) as exc:
                        self.log(
                            f"a2a-worker: stream cut ({exc!r}); resuming after {variables['after']}"
                        )
                        await asyncio.sleep(RESUME_AFTER_SECONDS)
            finally:
                for running in list(self._running):
                    running.cancel()
                with suppress(asyncio.CancelledError):
                    await asyncio.gather(*self._running, return_exceptions=True)

    async def _routed(self, http: httpx.AsyncClient) -> list[str]:
        ids: list[str] = []
        after: str | None = None
        while True:
            variables = {"f": {"assignee": self.handle, "states": ["routed"]}, "after": after}
            page = (await graphql(http, ROUTED_TASKS, variables))["tasks"]
            ids += [edge["node"]["id"] for edge in page["edges"]]
            if not page["pageInfo"]["hasNextPage"]:
                return ids
            after = page["pageInfo"]["endCursor"]

    async def _follow(self, variables: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        async with (
            self._http(read_timeout=None) as http,
            aconnect_sse(
                http,
                "POST",
                "/graphql/stream",
                json={"query": ROUTED_EVENTS, "variables": variables},
            ) as source,
        ):
            source.response.raise_for_status()
            if not self.listening.is_set():
                self.listening.set()
                print(f"a2a-worker: listening as {self.handle}", flush=True)
            async for sse in source.aiter_sse():
                if sse.event == "complete":
                    return
                result = sse.json()
                if result.get("errors"):
                    raise GraphQLError(result["errors"])
                yield result["data"]["taskEvents"]

    def _take(self, http: httpx.AsyncClient, task_id: str) -> None:
        if task_id in self._busy or task_id in self.done:
            return
        self._busy.add(task_id)
        running = asyncio.create_task(self._work(http, task_id))
        self._running.add(running)
        running.add_done_callback(self._running.discard)

    async def _work(self, http: httpx.AsyncClient, task_id: str) -> None:
        state = "routed"
        try:
            async with self._slots:
                steps = self.plan(task_id)
                if inspect.isawaitable(steps):
                    steps = await steps
                for step in steps:
                    if step.delay:
                        await asyncio.sleep(step.delay)
                    query = MOVE % {"input": step.input_type, "name": step.mutation}
                    variables = {"in": {"id": task_id, **step.fields}}
                    answer = (await graphql(http, query, variables))[step.mutation]
                    if "task" not in answer:  # refused: the task moved on (cancelled), or a bug
                        state = (
                            f"{step.mutation} refused: {answer.get('code')} {answer.get('message')}"
                        )
                        break
                    state = answer["task"]["state"]
        except (httpx.HTTPError, GraphQLError) as exc:
            state = f"failed: {exc!r}"
        finally:
            self._busy.discard(task_id)
        self.done[task_id] = state
        self._finished.set()
        self.log(f"a2a-worker: {task_id}: {state}")

    async def finished(self, *task_ids: str) -> None:
        """Until the worker has done what it does with each of `task_ids`."""
        while not all(t in self.done for t in task_ids):
            self._finished.clear()
            await self._finished.wait()


async def graphql(
    http: httpx.AsyncClient, query: str, variables: dict[str, Any] | None = None
) -> dict[str, Any]:
    answer = await http.post("/graphql", json={"query": query, "variables": variables or {}})
    body = answer.json()
    if answer.status_code != 200 or body.get("errors"):
        raise GraphQLError(f"HTTP {answer.status_code}: {json.dumps(body)[:500]}")
    data: dict[str, Any] = body["data"]
    return data


async def allow_requesters(url: str, owner_token: str, requester: str) -> str:
    """Sets the owner's gate rule letting `requester` (a glob) through; answers the rule's id."""
    headers = {"Authorization": f"Bearer {owner_token}"}
    async with httpx.AsyncClient(base_url=url.rstrip("/"), headers=headers, timeout=30) as http:
        variables = {"in": {"requester": requester, "decision": "ALLOW", "priority": 100}}
        answer = (await graphql(http, ALLOW, variables))["setGateRule"]
    if "rule" not in answer:
        raise GraphQLError(f"setGateRule refused: {answer}")
    rule_id: str = answer["rule"]["id"]
    return rule_id


async def main_async(args: argparse.Namespace) -> int:
    if args.allow:
        if not args.owner_token:
            print("a2a-worker: --allow needs --owner-token", file=sys.stderr)
            return 2
        await allow_requesters(args.url, args.owner_token, args.allow)
    await Worker(args.url, args.token, concurrency=args.concurrency).run()
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m bench.a2a_worker", description=__doc__.split("\n")[0]
    )
    p.add_argument("--url", default="http://127.0.0.1:8000", help="Baton's base URL")
    p.add_argument("--token", required=True, help="the worker agent's token")
    p.add_argument("--owner-token", default=None, help="its owner's token, for --allow")
    p.add_argument("--allow", default=None, help="a requester glob the owner's gate routes")
    p.add_argument("--concurrency", type=int, default=8, help="tasks worked on at once")
    try:
        return asyncio.run(main_async(p.parse_args(argv)))
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
