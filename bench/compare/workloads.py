"""The six workloads: what each target is asked, as whom, and on which ids.

Every request of a measurement differs only in one value (a task id, a project, a run id); the
load generator puts it into a fixed body at the `@@V@@` mark. How values are handed out:
`cycle` goes round a list; `range` hands each load thread its own slice of numbered ids, never
reusing one (moves consume their task); `unique` makes a fresh id per request.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from baton.access.principals import Principal, PrincipalKind

from .seed import Seeded

MARK = "@@V@@"
# PostGraphile without authorization (no role, no row-level security, its move a plain
# function: `postgraphile_sql.free_install_sql`): the reference that does less than Baton.
FREE = "postgraphile-free"
TARGETS = ("baton", "postgraphile", FREE, "bare", "asyncpg")
# Baton with `--baton-workers N` processes (N > 1), measured beside the one-process `baton`
# target in the same sitting: the per-core comparison is `baton`'s, the scaled one this.
SCALED = "baton-scaled"
# The one-process Baton again with `--pooler`, its pool through PgBouncer in transaction mode.
POOLED = "baton-pooler"
BATON_TARGETS = ("baton", SCALED, POOLED)
WORKLOADS = ("W1", "W2", "W3", "W4", "W5", "W6")
# What the authorization-free reference answers: the reads by id and by filter, and the move.
FREE_WORKLOADS = ("W1", "W2", "W3")


def answers(target: str, workload: str) -> bool:
    """Whether `target` is measured on `workload`."""
    return target != FREE or workload in FREE_WORKLOADS


@dataclass(frozen=True)
class Values:
    kind: Literal["cycle", "range", "unique"]
    items: tuple[str, ...] = ()  # cycle
    prefix: str = ""  # range: prefix + 8-digit number; unique: prefix + thread + counter
    first: int = 1  # range: numbers first … first + count - 1
    count: int = 0

    def to_json(self) -> str:
        return json.dumps(self.__dict__ | {"items": list(self.items)})

    @classmethod
    def from_json(cls, raw: str) -> Values:
        data = json.loads(raw)
        return cls(**{**data, "items": tuple(data["items"])})


@dataclass(frozen=True)
class Workload:
    name: str
    title: str
    who: Literal["owner", "agent", "requester"]
    values: Values
    baton: str  # GraphQL document; the value is `$v`
    postgraphile: str
    extra: dict[str, Any]  # further variables, the same on every request
    expect: str  # a string every good answer contains (errors come back as 200 too)

    def body(self, target: str) -> str:
        """The request body for `target`, with MARK where the value goes."""
        if target == "bare":
            return json.dumps({"v": MARK})
        baton = target in BATON_TARGETS
        query = self.baton if baton else self.postgraphile
        extra = self.extra if baton else _snake_packet(self.extra)
        return json.dumps({"query": query, "variables": {"v": MARK, **extra}})


PACKET = {
    "task": "Review the release notes and check every linked issue is closed",
    "deliverableType": "doc",
    "acceptanceCriteria": ["every linked issue is closed", "the notes name each change"],
    "context": "The release goes out on Thursday; the notes are in docs/releases.",
    "files": ["docs/releases/next.md"],
    "dependsOn": [],
}


# The same packet as PostGraphile takes it: as stored, snake_case, defaults filled in.
STORED_PACKET = {
    "task": PACKET["task"],
    "deliverable_type": PACKET["deliverableType"],
    "acceptance_criteria": PACKET["acceptanceCriteria"],
    "context": PACKET["context"],
    "files": PACKET["files"],
    "depends_on": PACKET["dependsOn"],
}


def _snake_packet(extra: dict[str, Any]) -> dict[str, Any]:
    return {**extra, "packet": STORED_PACKET} if "packet" in extra else extra


TASK_FIELDS = "id state assignee packet { task } updatedAt"
PGL_TASK_FIELDS = "id: rowId state assignee packetTask updatedAt"


def workloads(world: Seeded, measurement: int, *, warm: bool = False) -> dict[str, Workload]:
    """The workloads on `world`; `measurement` numbers the run so W4's ids never repeat. The
    pools are split: a warm-up takes its ids from the first part, a measured run from the rest,
    so requests still in flight when a warm-up ends cannot take a measured run's ids."""
    visible = [world.task_id(n) for n in range(10, world.tasks + 1, 10)][:1000]
    projects = tuple(world.projects_of(0))
    first, count = (
        (1, world.warm_pool) if warm else (world.warm_pool + 1, world.pool - world.warm_pool)
    )
    pool = Values("range", prefix=f"q{world.tag}", first=first, count=count)
    runs = Values("range", prefix=f"r{world.tag}", first=first, count=count)
    hand_off = {
        "project": world.handoff_project,
        "requester": world.agent(1, 0),
        "assignee": world.agent(2, 1),
    }
    return {
        "W1": Workload(
            "W1",
            "one task by id",
            "owner",
            Values("cycle", items=tuple(visible)),
            f"query($v: ID!) {{ task(id: $v) {{ {TASK_FIELDS} }} }}",
            f"query($v: String!) {{ task(rowId: $v) {{ {PGL_TASK_FIELDS} }} }}",
            {},
            '"updatedAt"',
        ),
        "W2": Workload(
            "W2",
            "50 newest of a project in one state",
            "owner",
            Values("cycle", items=projects),
            "query($v: String!) { tasks(filter: {project: $v, states: [working]}, first: 50) "
            f"{{ edges {{ node {{ {TASK_FIELDS} }} }} }} }}",
            'query($v: String!) { tasks(condition: {project: $v, state: "working"}, '
            "orderBy: [UPDATED_AT_DESC, PRIMARY_KEY_DESC], first: 50) "
            f"{{ nodes {{ {PGL_TASK_FIELDS} }} }} }}",
            {},
            '"updatedAt"',
        ),
        "W3": Workload(
            "W3",
            "acceptTask on a routed task",
            "agent",
            pool,
            "mutation($v: ID!) { acceptTask(input: {id: $v}) { __typename "
            "... on MoveSuccess { task { id state version } } ... on Error { code message } } }",
            "mutation($v: String!) { acceptTask(input: {id: $v}) "
            "{ result { id: rowId state version } } }",
            {},
            '"accepted"',
        ),
        "W4": Workload(
            "W4",
            "cross-owner handOff through the gate",
            "requester",
            Values("unique", prefix=f"h{world.tag}m{measurement}"),
            "mutation($v: ID!, $packet: PacketInput!) { handOff(input: {id: $v, "
            + ", ".join(f'{k}: "{v}"' for k, v in hand_off.items())
            + ", packet: $packet}) { __typename ... on HandOffSuccess "
            "{ task { id state waitingOn version } } ... on Error { code message } } }",
            "mutation($v: String!, $packet: JSON!) { handOff(input: {id: $v, "
            + ", ".join(f'{k}: "{v}"' for k, v in hand_off.items())
            + ", packet: $packet}) { result { id: rowId state waitingOn version } } }",
            {"packet": PACKET},
            '"waiting"',
        ),
        "W5": Workload(
            "W5",
            "100 tasks with dependencies, dependents, first event",
            "owner",
            Values("cycle", items=projects),
            "query($v: String!) { tasks(filter: {project: $v}, first: 100) { edges { node { "
            "id state dependencies { id state } dependents { id } "
            "events(first: 1) { edges { node { id kind at } } } } } } }",
            "query($v: String!) { tasks(condition: {project: $v}, "
            "orderBy: [UPDATED_AT_DESC, PRIMARY_KEY_DESC], first: 100) { nodes { "
            "id: rowId state dependencies { nodes { id: rowId state } } "
            "dependents(first: 50) { nodes { id: rowId } } "
            "taskEvents(first: 1, orderBy: PRIMARY_KEY_ASC) { nodes { id: rowId kind at } } } } }",
            {},
            '"dependents"',
        ),
        "W6": Workload(
            "W6",
            "reachCheckpoint on a claimed run",
            "agent",
            runs,
            "mutation($v: ID!) { reachCheckpoint(input: {id: $v, checkpoint: plans_complete}) "
            "{ __typename ... on RunMoveSuccess { run { id status phase checkpoint version } } "
            "... on Error { code message } } }",
            "mutation($v: String!) { reachCheckpoint(input: {id: $v}) "
            "{ result { id: rowId status phase checkpoint version } } }",
            {},
            '"plans_complete"',
        ),
    }


def principals(world: Seeded) -> dict[str, Principal]:
    """Who makes each kind of request: owner 0; its agent a0 (the pools' assignee and runner);
    owner 1's agent a0, handing off across owners."""
    return {
        "owner": Principal(PrincipalKind.OWNER, world.owner(0)),
        "agent": Principal(PrincipalKind.AGENT, world.agent(0, 0)),
        "requester": Principal(PrincipalKind.AGENT, world.agent(1, 0)),
    }


def value_at(values: Values, thread: int, threads: int, counter: int) -> str:
    """The `counter`-th value (from 0) of load thread `thread` of `threads`; the Lua script of
    `wrk.py` computes the same."""
    if values.kind == "cycle":
        return values.items[(counter + thread * 7) % len(values.items)]
    if values.kind == "range":
        share = values.count // threads
        return f"{values.prefix}{values.first + thread * share + counter % share:08d}"
    return f"{values.prefix}t{thread}n{counter}"
