"""Test helpers: unique principals per test, tasks driven to any state, GraphQL execution."""

from __future__ import annotations

import asyncio
import os
import secrets
import socket
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from typing import Any

import asyncpg  # type: ignore[import-untyped, unused-ignore]
import uvicorn

from baton.access.gate import GateDecision
from baton.access.principals import ADMIN, Principal, PrincipalKind
from baton.access.tokens import create_token
from baton.api.schema import schema
from baton.engine.limits import DEFAULT_LIMITS
from baton.engine.runner import Engine, Request
from baton.metrics import DB_STATEMENTS
from baton.protocol.handoff import MoveName, TaskState, Verification, WaitingOn
from baton.protocol.task_object import task_id_for
from baton.services.context import Context
from baton.services.runs import RunService
from baton.services.tasks import HandOff, MoveArgs, TaskService
from baton.store.db import Database, libpq_url
from baton.store.embedded import create_database
from baton.store.records import TaskRecord


async def drop_database(server_url: str, name: str) -> None:
    """Drop database `name` from `server_url`, whoever is still connected to it."""
    conn = await asyncpg.connect(libpq_url(server_url))
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await conn.close()


@asynccontextmanager
async def fresh_database(server_url: str, prefix: str) -> AsyncIterator[str]:
    """The URL of a new, empty database `<prefix>_<pid>_<random>` on `server_url`, dropped
    afterwards."""
    name = f"{prefix}_{os.getpid()}_{secrets.token_hex(3)}"
    url = await create_database(server_url, name)
    try:
        yield url
    finally:
        await drop_database(server_url, name)


def task_id_of(requester: str, client_id: str) -> str:
    """The id of the task that `requester` (`owner/agent`) hands off with client id `client_id`."""
    return task_id_for(requester.split("/", 1)[0], client_id)


def packet(**overrides: Any) -> dict[str, Any]:
    """A valid seed packet (snake_case), with overrides."""
    base: dict[str, Any] = {
        "task": "Write the release notes",
        "deliverable_type": "doc",
        "acceptance_criteria": ["covers every change"],
        "context": "",
        "files": [],
        "depends_on": [],
    }
    return {**base, **overrides}


def checkpoint(**overrides: Any) -> dict[str, Any]:
    """A valid checkpoint (snake_case, as the service takes it), with overrides."""
    base: dict[str, Any] = {
        "progress": "half way",
        "decisions": [],
        "files_touched": [],
        "next_steps": [],
        "open_questions": [],
    }
    return {**base, **overrides}


def result(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "summary": "Done",
        "evidence": [{"kind": "test_output", "summary": "all green"}],
        "provenance": "agent_generated",
    }
    return {**base, **overrides}


PACKET_INPUT = {
    "task": "Write the release notes",
    "deliverableType": "doc",
    "acceptanceCriteria": ["covers every change"],
}
RESULT_INPUT = {
    "summary": "Done",
    "evidence": [{"kind": "test_output", "summary": "all green"}],
    "provenance": "agent_generated",
}


def agent(handle: str) -> Principal:
    return Principal(PrincipalKind.AGENT, handle)


def owner(handle: str) -> Principal:
    return Principal(PrincipalKind.OWNER, handle)


@dataclass
class World:
    """Two owners unique to one test: `req` hands off, `asg` receives.

    Principals: requester agent `req/r`, its owner `req`, assignee agent `asg/a`, its owner
    `asg`, and outsiders who must see nothing.
    """

    service: TaskService
    # Worlds whose tags collide share owners, projects and gate rules (one's ALLOW rule decides
    # the other's hand-off): 48 bits keep that out of reach for the worlds one run makes.
    tag: str = field(default_factory=lambda: secrets.token_hex(6))

    def __post_init__(self) -> None:
        self.req_owner = f"r{self.tag}"
        self.asg_owner = f"a{self.tag}"
        self.requester = f"{self.req_owner}/r"
        self.assignee = f"{self.asg_owner}/a"
        self.project = f"p{self.tag}"
        self._rule_id: int | None = None

    @property
    def roles(self) -> dict[str, Principal]:
        return {
            "requester": agent(self.requester),
            "requester_owner": owner(self.req_owner),
            "assignee": agent(self.assignee),
            "assignee_owner": owner(self.asg_owner),
            "requester_sibling": agent(f"{self.req_owner}/other"),
            "assignee_sibling": agent(f"{self.asg_owner}/other"),
            "outsider_agent": agent(f"x{self.tag}/x"),
            "outsider_owner": owner(f"x{self.tag}"),
            "admin": ADMIN,
        }

    async def hand_off(
        self,
        *,
        verification: Verification = Verification.AUTO,
        decision: GateDecision | None = GateDecision.ALLOW,
        **packet_overrides: Any,
    ) -> TaskRecord:
        """A new task; `decision` is what the assignee owner's gate answers (None: default)."""
        await self.decide(decision)
        outcome = await self.service.hand_off(
            agent(self.requester),
            HandOff(
                project=self.project,
                requester=self.requester,
                assignee=self.assignee,
                packet=packet(**packet_overrides),
                verification=verification,
            ),
        )
        return outcome.task

    async def decide(self, decision: GateDecision | None) -> None:
        """Make the assignee owner's gate answer `decision` for this world (None: default)."""
        if decision is not None:
            rule = await self.service.rules.set(
                owner(self.asg_owner),
                owner=None,
                requester=self.requester,
                project=self.project,
                deliverable_types=[],
                decision=decision,
                priority=100,
                rule_id=self._rule_id,
            )
            self._rule_id = rule.id
        elif self._rule_id is not None:
            await self.service.rules.delete(owner(self.asg_owner), self._rule_id)
            self._rule_id = None

    async def move(self, task: TaskRecord, name: MoveName, **args: Any) -> TaskRecord:
        outcome = await self.service.move(ADMIN, name, task.id, args=MoveArgs(**args))
        return outcome.task

    async def task_in(self, state: TaskState, waiting_on: WaitingOn | None = None) -> TaskRecord:
        """A fresh task driven through the protocol into `state`."""
        S, M = TaskState, MoveName
        if state is S.requested:
            return await self.hand_off(decision=GateDecision.EXTERNAL)
        if state is S.rejected:
            return await self.hand_off(decision=GateDecision.DENY)
        if state is S.waiting and waiting_on in (None, WaitingOn.owner_approval):
            return await self.hand_off(decision=GateDecision.ASK)
        if state is S.cancelled:
            return await self.move(await self.hand_off(), M.CANCEL)
        verification = {
            S.verifying: Verification.REVIEW,
            S.approval: Verification.SIGN_OFF,
        }.get(state, Verification.AUTO)
        task = await self.hand_off(verification=verification)
        if state is S.routed:
            return task
        task = await self.move(task, M.ACCEPT)
        if state is S.accepted:
            return task
        task = await self.move(task, M.START)
        if state is S.working:
            return task
        if state is S.waiting:
            return await self.move(task, M.PAUSE, waiting_on=waiting_on)
        task = await self.move(task, M.SUBMIT_RESULT, result=result())
        assert task.state is state, (task.state, state)
        return task


ENGINE = Engine(schema, DEFAULT_LIMITS)


async def mint(database_url: str, principal: Principal) -> str:
    """A bearer token for `principal` in the database at `database_url`."""
    db = await Database.connect(database_url, min_size=1, max_size=1)
    try:
        return await create_token(db, principal)
    finally:
        await db.close()


async def execute(
    service: TaskService,
    principal: Principal,
    query: str,
    variables: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Run a GraphQL operation in process, as the server does; fail the test on any error."""
    response = await execute_raw(service, principal, query, variables)
    assert not response.errors, response.errors
    assert response.data is not None
    return response.data


def context(principal: Principal, service: TaskService) -> Context:
    """What a request of `principal` gets, on the test database (no live events)."""
    return Context(principal, service, RunService(service.db))


@dataclass(frozen=True)
class Response:
    """An in-process answer: `data` is None when absent (refused) or null."""

    data: dict[str, Any] | None
    errors: list[dict[str, Any]]


async def execute_raw(
    service: TaskService,
    principal: Principal,
    query: str,
    variables: dict[str, Any] | None = None,
) -> Response:
    outcome = await ENGINE.execute(Request(query, variables), context(principal, service))
    return Response(None if outcome.refused else outcome.data, outcome.errors)


@contextmanager
def counting_statements() -> Iterator[Callable[[], int]]:
    """How many SQL statements the block sent (read the count inside or after it)."""
    start = DB_STATEMENTS._value.get()
    yield lambda: int(DB_STATEMENTS._value.get() - start)


@asynccontextmanager
async def uvicorn_serving(app: Any, **config: Any) -> AsyncIterator[int]:
    """`app` served by an in-process uvicorn (`config` on top of quiet defaults) on a free
    port of 127.0.0.1, which is yielded; stopped, within 10 s, on leaving."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    options: dict[str, Any] = {"log_level": "warning", "lifespan": "off", **config}
    server = uvicorn.Server(uvicorn.Config(app, **options))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            if task.done():
                task.result()  # it failed to start: say why
            await asyncio.sleep(0.01)
        yield sock.getsockname()[1]
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 10)
        sock.close()
