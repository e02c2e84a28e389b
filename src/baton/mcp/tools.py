"""The tools: one per move of either lifecycle, generated from its table, and the reads.

A move's tool has the move's mutation name (`acceptTask`, `claimRun`), its input is the
mutation's input as a JSON Schema (`baton.mcp.schemas`), its description the mutation's, with the
seed's words for the states it leaves and reaches; it calls the same service method as the
GraphQL resolver, in process. A lifecycle's tools come from a `Door`: its table, its subject and
how a move of it is made. A third lifecycle gets its tools by declaring one.

Which tools a principal is shown follows from the tables too: a move whose role an agent can
never fill (a gate's or an owner's decision) is not listed for agents. Calls are checked by the
service whatever the list says.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, is_dataclass
from datetime import datetime
from enum import Enum
from typing import Any, TypeVar

from jsonschema import Draft202012Validator

from baton.access.principals import ADMIN, Principal, PrincipalKind
from baton.errors import BatonError, InvalidInput, NotFound
from baton.mcp import schemas, shapes
from baton.mcp.accept import Accept, compile_shape
from baton.mcp.schemas import JSONSchema, object_schema, seed_object
from baton.metrics import MOVES, count
from baton.protocol.description import describe
from baton.protocol.handoff import HANDOFF, MoveName, TaskState, Verification, WaitingOn
from baton.protocol.machine import Machine
from baton.protocol.params import camel
from baton.protocol.pipeline import PIPELINE, RunEvent, RunPhase, RunStatus
from baton.protocol.task_object import DeliverableType
from baton.services.context import Context
from baton.services.graphs import Direction, traverse
from baton.services.runs import MAX_TITLE, RunOutcome
from baton.services.tasks import HandOff, MoveArgs, Outcome
from baton.services.words import LEASE_ID, describe_event, describe_move
from baton.store.records import RunRecord, TaskRecord
from baton.store.runs import FENCED, RunQuery
from baton.store.tasks import TaskQuery, encode_cursor, storable_time

T = TypeVar("T")
JSONObject = shapes.JSONObject
Args = Mapping[str, Any]
Call = Callable[[Context, Args], Awaitable[JSONObject]]

EVERYONE = frozenset(PrincipalKind)
MAX_PAGE = 100
MAX_GRAPH_DEPTH = 50
MAX_GRAPH_ROOTS = 100
MAX_GRAPH_NODES = 2000
# "Waiting on me" reads at most this many open tasks (and as many runs), newest first.
WAITING_SCAN = 500


class Refused(Exception):
    """A call Baton refused: the tool answers its error, never an exception trace."""

    def __init__(self, error: BatonError) -> None:
        super().__init__(error.message)
        self.error = error


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    input_schema: JSONSchema
    call: Call
    read_only: bool = False
    # Kinds of principal that are shown the tool (admin sees every tool).
    shown_to: frozenset[PrincipalKind] = EVERYONE
    # The lifecycle and move it makes, when it is a move's tool.
    lifecycle: str | None = None
    move: Enum | None = None
    shape: JSONSchema = field(init=False, repr=False, compare=False)
    # Checks arguments against `shape`; built once, not per call.
    checker: Draft202012Validator = field(init=False, repr=False, compare=False)
    # Whether arguments fit `shape`, compiled (`baton.mcp.accept`): `checker` is asked only for
    # arguments that do not, for the error it names. None: `checker` is asked every time.
    accepts: Accept | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", schemas.shape(self.input_schema))
        object.__setattr__(self, "checker", Draft202012Validator(self.shape))
        object.__setattr__(self, "accepts", compile_shape(self.shape))


async def attempt(mutation: str, call: Awaitable[T]) -> T:
    """Run a service call, counting its outcome as the GraphQL mutation's is; a refusal
    becomes `Refused`."""
    try:
        outcome = await call
    except BatonError as exc:
        count(MOVES, mutation, exc.code)
        raise Refused(exc) from None
    count(MOVES, mutation, "ok")
    return outcome


# --- what an outcome answers -----------------------------------------------------------------


def task_outcome(outcome: Outcome, principal: Principal) -> JSONObject:
    """Like `MoveSuccess { task events }`."""
    return {
        "task": shapes.task(outcome.task, principal),
        "events": [shapes.task_event(e) for e in outcome.events],
    }


async def run_with_lease(context: Context, record: RunRecord) -> JSONObject:
    """The run with its lease, which only a claimed run (`in_progress`) has."""
    leases = (
        await context.runs.leases([record.id]) if record.status is RunStatus.in_progress else {}
    )
    return shapes.run(record, context.principal, leases.get(record.id))


async def run_outcome(context: Context, outcome: RunOutcome) -> JSONObject:
    """Like `RunMoveSuccess { run events lease }`."""
    if outcome.lease is not None:
        run = shapes.run(outcome.run, context.principal, outcome.lease)
    else:
        run = await run_with_lease(context, outcome.run)
    return {
        "run": run,
        "events": [shapes.run_event(e) for e in outcome.events],
        "lease": shapes.lease(outcome.lease),
    }


# --- a lifecycle's doors: its moves as tools ------------------------------------------------


MakeMove = Callable[[Context, Any, Args, dict[str, Any]], Awaitable[JSONObject]]


@dataclass(frozen=True)
class Door:
    """What a lifecycle needs to get its tools: its table, its subject, who may ever make each
    role's moves, what each move says and takes beside its parameters, and how one is made
    (`make(context, name, input, args by parameter name)`)."""

    machine: Machine[Any, Any, Any]
    subject: str
    subject_id: JSONSchema
    shown_to: Callable[[Any], frozenset[PrincipalKind]]
    describe: Callable[[Any], str]
    make: MakeMove
    extras: Mapping[Any, Mapping[str, tuple[JSONSchema, bool]]] = field(default_factory=dict)

    def tools(self) -> list[Tool]:
        out = []
        for name in self.machine.names():
            move = self.machine.named(name)[0]
            out.append(
                Tool(
                    name=move.mutation,
                    description=self._description(name),
                    input_schema=schemas.move_input(
                        self.subject_id, move.params, self.extras.get(name)
                    ),
                    call=self._call(name),
                    shown_to=self.shown_to(move.actor) | {PrincipalKind.ADMIN},
                    lifecycle=self.machine.name,
                    move=name,
                )
            )
        return out

    def _description(self, name: Any) -> str:
        rows = self.machine.named(name)
        target = self.machine.info(rows[0].target)
        reached = f" In {target.state.value}: {target.description}"
        return self.describe(name) + reached

    def _call(self, name: Any) -> Call:
        move = self.machine.named(name)[0]

        async def call(context: Context, values: Args) -> JSONObject:
            args: dict[str, Any] = {}
            for param in move.params:
                value = values.get(param.field)
                if value is not None and param.choices:
                    value = param.enum(value)
                args[param.name] = value
            return await self.make(context, name, values, args)

        return call


def _kinds(allowed: Callable[[Principal], bool]) -> frozenset[PrincipalKind]:
    samples = {
        PrincipalKind.AGENT: Principal(PrincipalKind.AGENT, "o/a"),
        PrincipalKind.OWNER: Principal(PrincipalKind.OWNER, "o"),
        PrincipalKind.ADMIN: ADMIN,
    }
    return frozenset(kind for kind, p in samples.items() if allowed(p))


def _task_roles(actor: Any) -> frozenset[PrincipalKind]:
    # Whether some task lets a principal of each kind fill the role, on either side.
    sides = [("o/a", "p/b"), ("p/b", "o/a"), ("o/a", "o/b"), ("o/b", "o/a")]
    return _kinds(lambda p: any(p.may_act_as(actor, requester=r, assignee=a) for r, a in sides))


def _run_roles(actor: Any) -> frozenset[PrincipalKind]:
    return _kinds(lambda p: p.may_drive(actor, owner="o"))


def _version(values: Args) -> int | None:
    version = values.get("expectedVersion")
    return int(version) if version is not None else None


async def _task_move(context: Context, name: Any, values: Args, args: dict[str, Any]) -> JSONObject:
    result = args.get("result")
    outcome = await attempt(
        HANDOFF.named(name)[0].mutation,
        context.service.move(
            context.principal,
            name,
            str(values["id"]),
            expected_version=_version(values),
            args=MoveArgs(
                waiting_on=args.get("waiting_on"),
                result=seed_object(result, schemas.SEED["result"]) if result else None,
                reason=args.get("reason"),
            ),
        ),
    )
    return task_outcome(outcome, context.principal)


async def _run_event(context: Context, name: Any, values: Args, args: dict[str, Any]) -> JSONObject:
    runs, principal = context.runs, context.principal
    if name is RunEvent.CLAIM:
        run_id = values.get("id")
        call = runs.claim(
            principal,
            run_id=str(run_id) if run_id is not None else None,
            project=values.get("project"),
            expected_version=_version(values),
        )
    else:
        lease_id = values.get("leaseId")
        call = runs.event(
            principal,
            name,
            str(values["id"]),
            expected_version=_version(values),
            args=args,
            lease_id=str(lease_id) if lease_id is not None else None,
        )
    return await run_outcome(context, await attempt(PIPELINE.named(name)[0].mutation, call))


LEASE: JSONSchema = {"type": "string", "description": LEASE_ID}

TASKS = Door(
    HANDOFF,
    subject="task",
    subject_id=schemas.TASK_ID,
    shown_to=_task_roles,
    describe=describe_move,
    make=_task_move,
)
RUNS = Door(
    PIPELINE,
    subject="run",
    subject_id=schemas.RUN_ID,
    shown_to=_run_roles,
    describe=describe_event,
    make=_run_event,
    extras={
        **{name: {"leaseId": (LEASE, False)} for name in FENCED},
        RunEvent.CLAIM: {
            "id": (
                {
                    "type": "string",
                    "description": "The run; without it, the oldest claimable run of the "
                    "caller's owner.",
                },
                False,
            ),
            "project": (
                {
                    "type": "string",
                    "description": "Without `id`: claim only a run of this project.",
                },
                False,
            ),
        },
    },
)
DOORS: tuple[Door, ...] = (TASKS, RUNS)


# --- the rest of the writes --------------------------------------------------------------


async def _hand_off(context: Context, values: Args) -> JSONObject:
    client_id = values.get("id")
    h = HandOff(
        id=str(client_id) if client_id is not None else None,
        project=values["project"],
        requester=values["requester"],
        assignee=values["assignee"],
        packet=seed_object(values["packet"], schemas.SEED["packet"]),
        verification=Verification(values.get("verification", Verification.AUTO.value)),
    )
    outcome = await attempt("handOff", context.service.hand_off(context.principal, h))
    return task_outcome(outcome, context.principal)


async def _save_checkpoint(context: Context, values: Args) -> JSONObject:
    checkpoint = seed_object(values["checkpoint"], schemas.SEED["checkpoint"])
    outcome = await attempt(
        "saveCheckpoint",
        context.service.save_checkpoint(
            context.principal,
            str(values["id"]),
            checkpoint,
            expected_version=_version(values),
        ),
    )
    return task_outcome(outcome, context.principal)


async def _create_run(context: Context, values: Args) -> JSONObject:
    task_id = values.get("taskId")
    outcome = await attempt(
        "createRun",
        context.runs.create(
            context.principal,
            project=values["project"],
            title=values["title"],
            task_id=str(task_id) if task_id is not None else None,
            owner=values.get("owner"),
        ),
    )
    return await run_outcome(context, outcome)


async def _heartbeat(context: Context, values: Args) -> JSONObject:
    lease_id = values.get("leaseId")
    record, current = await attempt(
        "runHeartbeat",
        context.runs.heartbeat(
            context.principal, str(values["id"]), str(lease_id) if lease_id is not None else None
        ),
    )
    return {"run": shapes.run(record, context.principal, current), "lease": shapes.lease(current)}


_STRING = {"type": "string"}

HAND_OFF = Tool(
    "handOff",
    "Create a task in `requested` and run the assignee owner's permission gate in the same "
    "call. With no matching rule: same owner ALLOW (→ routed), different owner ASK (→ waiting "
    "on owner_approval). Caller: the requester agent itself or its owner. In requested: "
    + HANDOFF.info(TaskState.requested).description,
    object_schema(
        {
            "project": schemas.PROJECT,
            "requester": {**schemas.HANDLE, "description": "The handing-off agent, owner/agent."},
            "assignee": {**schemas.HANDLE, "description": "The receiving agent, owner/agent."},
            "packet": schemas.OBJECTS["packet"],
            "verification": {
                "type": "string",
                "enum": [v.value for v in Verification],
                "default": Verification.AUTO.value,
                "description": "AUTO: evidence of the required shape completes the task at "
                "once. REVIEW: the task rests in verifying for the requester. SIGN_OFF: like "
                "AUTO, but the passing result waits in approval for the requester's owner.",
            },
            "id": {
                "type": "string",
                "description": "Optional client id, scoped to the requester's owner: the task's "
                "id is `<owner>_<id>`; the same id and input return the existing task.",
            },
        },
        ["project", "requester", "assignee", "packet"],
    ),
    _hand_off,
    lifecycle="handoff",
)
SAVE_CHECKPOINT = Tool(
    "saveCheckpoint",
    "Replace `latestCheckpoint` while the task is accepted, working or waiting (assignee "
    "side). Appends a `checkpoint_saved` event and bumps the version.",
    object_schema(
        {
            "id": schemas.TASK_ID,
            "checkpoint": schemas.OBJECTS["checkpoint"],
            "expectedVersion": schemas.EXPECTED_VERSION,
        },
        ["id", "checkpoint"],
    ),
    _save_checkpoint,
    lifecycle="handoff",
)
CREATE_RUN = Tool(
    "createRun",
    "Create a run in backlog / idle / none. It belongs to the caller's owner: that owner, its "
    "agents and admin may read and drive it.",
    object_schema(
        {
            "project": _STRING,
            "title": {"type": "string", "maxLength": MAX_TITLE},
            "taskId": {"type": "string", "description": "A handoff task the run works on."},
            "owner": {"type": "string", "description": "Whose run it is: required for admin."},
        },
        ["project", "title"],
    ),
    _create_run,
    lifecycle="pipeline",
)
RUN_HEARTBEAT = Tool(
    "runHeartbeat",
    "Extend the live lease on a claimed run in progress (its holder, the run's owner or "
    "admin), by BATON_RUN_LEASE_SECONDS from now. Not an event: the run's version stays. A lease "
    "that ran out is lost and never extended: lease_lost.",
    object_schema({"id": schemas.RUN_ID, "leaseId": LEASE}, ["id"]),
    _heartbeat,
    lifecycle="pipeline",
)


# --- reads ---------------------------------------------------------------------------------


def _first(values: Args, default: int = 50, most: int = MAX_PAGE) -> int:
    first = int(values.get("first", default))
    if not 0 <= first <= most:
        raise Refused(InvalidInput("first", f"must be between 0 and {most}"))
    return first


def _time_arg(values: Args, name: str) -> datetime | None:
    raw = values.get(name)
    if raw is None:
        return None
    try:
        return storable_time(datetime.fromisoformat(raw), name)
    except ValueError:
        raise Refused(InvalidInput(name, "is not an ISO 8601 date and time")) from None
    except InvalidInput as exc:
        raise Refused(exc) from None


def _list_of(values: Args, name: str) -> list[Any]:
    items = values.get(name) or []
    if len(items) > MAX_PAGE:
        raise Refused(InvalidInput(name, f"at most {MAX_PAGE} values"))
    return list(items)


async def _read(call: Awaitable[T]) -> T:
    try:
        return await call
    except BatonError as exc:
        raise Refused(exc) from None


async def _get_task(context: Context, values: Args) -> JSONObject:
    record = await _read(context.service.get(context.principal, str(values["id"])))
    return {"task": shapes.task(record, context.principal)}


def _page(rows: Sequence[TaskRecord | RunRecord], more: bool) -> JSONObject:
    return {"hasNextPage": more, "endCursor": encode_cursor(rows[-1]) if rows else None}


async def _list_tasks(context: Context, values: Args) -> JSONObject:
    first = _first(values)
    query = TaskQuery(
        projects=[values["project"]] if values.get("project") is not None else [],
        states=[TaskState(s) for s in _list_of(values, "states")],
        requester=values.get("requester"),
        assignee=values.get("assignee"),
        waiting_on=[WaitingOn(values["waitingOn"])] if values.get("waitingOn") else [],
        deliverable_types=_list_of(values, "deliverableTypes"),
        updated_after=_time_arg(values, "updatedAfter"),
    )
    rows, more = await _read(
        context.service.page(context.principal, query, first, values.get("after"))
    )
    return {
        "tasks": [shapes.task(t, context.principal) for t in rows],
        "pageInfo": _page(rows, more),
    }


async def _task_graph(context: Context, values: Args) -> JSONObject:
    ids = _list_of(values, "ids")
    depth = int(values.get("depth", 10))
    if not 0 <= depth <= MAX_GRAPH_DEPTH:
        raise Refused(InvalidInput("depth", f"must be between 0 and {MAX_GRAPH_DEPTH}"))
    first = _first(values, 200, MAX_GRAPH_NODES)
    service, principal = context.service, context.principal
    graph = await _read(
        traverse(
            [str(i) for i in ids],
            Direction(values.get("direction", Direction.BOTH.value)),
            depth,
            max_nodes=first,
            by_ids=lambda keys: service.visible_by_ids(principal, keys),
            dependents_of=lambda keys, limit: service.dependents_of(principal, keys, limit),
        )
    )
    return {
        "nodes": [shapes.task(t, principal) for t in graph.nodes],
        "edges": [{"from": a, "to": b} for a, b in graph.edges],
        "truncated": graph.truncated,
        "cycles": graph.cycles,
        "unresolved": graph.unresolved,
    }


# Moves that are always open to one side and so wait on no one: withdrawing a task, stopping a
# run. "Waiting on me" leaves them out.
WITHDRAWALS: frozenset[Enum] = frozenset({MoveName.CANCEL, RunEvent.USER_INTERRUPTED})
_OPEN_TASKS = [info.state for info in HANDOFF.states if not info.terminal]
_OPEN_RUNS = [info.state for info in PIPELINE.states if not info.terminal]


async def _waiting_on_me(context: Context, values: Args) -> JSONObject:
    first = _first(values)
    principal = context.principal
    tasks: list[JSONObject] = []
    after: str | None = None
    scanned = 0
    while len(tasks) < first and scanned < WAITING_SCAN:
        rows, more = await _read(
            context.service.page(principal, TaskQuery(states=_OPEN_TASKS), MAX_PAGE, after)
        )
        scanned += len(rows)
        for row in rows:
            shaped = shapes.task(row, principal)
            if set(shaped["allowedMoves"]) - {m.value for m in WITHDRAWALS}:
                tasks.append(shaped)
        if not more or not rows:
            break
        after = encode_cursor(rows[-1])
    runs: list[JSONObject] = []
    after, scanned = None, 0
    while len(runs) < first and scanned < WAITING_SCAN:
        found, more = await _read(
            context.runs.page(principal, RunQuery(statuses=_OPEN_RUNS), MAX_PAGE, after)
        )
        scanned += len(found)
        claimed = [r.id for r in found if r.status is RunStatus.in_progress]
        leases = await _read(context.runs.leases(claimed)) if claimed else {}
        for record in found:
            shaped = shapes.run(record, principal, leases.get(record.id))
            if set(shaped["allowedEvents"]) - {m.value for m in WITHDRAWALS}:
                runs.append(shaped)
        if not more or not found:
            break
        after = encode_cursor(found[-1])
    return {"tasks": tasks[:first], "runs": runs[:first]}


def _plain(value: Any) -> Any:
    """A protocol description (`baton.protocol.description`) as JSON, camelCase keys."""
    if is_dataclass(value) and not isinstance(value, type):
        return {camel(f.name.rstrip("_")): _plain(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


async def _protocol(context: Context, values: Args) -> JSONObject:
    return {"handoff": _plain(describe(HANDOFF)), "pipeline": _plain(describe(PIPELINE))}


async def _get_run(context: Context, values: Args) -> JSONObject:
    record = await _read(context.runs.get(context.principal, str(values["id"])))
    return {"run": await run_with_lease(context, record)}


async def _list_runs(context: Context, values: Args) -> JSONObject:
    first = _first(values)
    query = RunQuery(
        projects=[values["project"]] if values.get("project") is not None else [],
        statuses=[RunStatus(s) for s in _list_of(values, "statuses")],
        phases=[RunPhase(p) for p in _list_of(values, "phases")],
        task_ids=[str(values["taskId"])] if values.get("taskId") is not None else [],
        updated_after=_time_arg(values, "updatedAfter"),
    )
    principal = context.principal
    rows, more = await _read(context.runs.page(principal, query, first, values.get("after")))
    claimed = [r.id for r in rows if r.status is RunStatus.in_progress]
    leases = await _read(context.runs.leases(claimed)) if claimed else {}
    return {
        "runs": [shapes.run(r, principal, leases.get(r.id)) for r in rows],
        "pageInfo": _page(rows, more),
    }


def _enum_list(enum: type[Enum]) -> JSONSchema:
    return {"type": "array", "items": {"type": "string", "enum": [e.value for e in enum]}}


_FIRST: JSONSchema = schemas.integer(0, MAX_PAGE, default=50, description=f"At most {MAX_PAGE}.")
_AFTER: JSONSchema = {"type": "string", "description": "`pageInfo.endCursor` of the page before."}
_UPDATED_AFTER: JSONSchema = {"type": "string", "format": "date-time"}

READS: tuple[Tool, ...] = (
    Tool(
        "task",
        "A task the caller can see, with the moves the caller may make on it now "
        "(`allowedMoves`); not_found otherwise.",
        object_schema({"id": schemas.TASK_ID}, ["id"]),
        _get_task,
        read_only=True,
    ),
    Tool(
        "tasks",
        "Tasks the caller can see that match every given condition (a list matches any of its "
        "items), newest `updatedAt` first; `first` at most 100, then `after` the page's "
        "`endCursor`.",
        object_schema(
            {
                "project": _STRING,
                "states": _enum_list(TaskState),
                "requester": _STRING,
                "assignee": _STRING,
                "waitingOn": {"type": "string", "enum": [w.value for w in WaitingOn]},
                "deliverableTypes": _enum_list(DeliverableType),
                "updatedAfter": _UPDATED_AFTER,
                "first": _FIRST,
                "after": _AFTER,
            }
        ),
        _list_tasks,
        read_only=True,
    ),
    Tool(
        "taskGraph",
        "The dependency graph around `ids`, `depth` hops out (1 is one hop), of at most "
        f"`first` tasks (at most {MAX_GRAPH_NODES}). Edges go from the dependent task to the "
        "task it depends on; UPSTREAM follows dependencies, DOWNSTREAM dependents.",
        object_schema(
            {
                "ids": {"type": "array", "items": _STRING, "maxItems": MAX_GRAPH_ROOTS},
                "direction": {
                    "type": "string",
                    "enum": [d.value for d in Direction],
                    "default": "BOTH",
                },
                "depth": schemas.integer(0, MAX_GRAPH_DEPTH, default=10),
                "first": schemas.integer(0, MAX_GRAPH_NODES, default=200),
            },
            ["ids"],
        ),
        _task_graph,
        read_only=True,
    ),
    Tool(
        "waitingOnMe",
        "What is waiting on the caller: open tasks and runs it can move now, newest first, "
        "with what it may do to each (`allowedMoves`, `allowedEvents`). Withdrawing a task "
        "(CANCEL) or stopping a run (USER_INTERRUPTED) is always open to one side and waits "
        f"on no one, so alone it does not count. Looks at the newest {WAITING_SCAN} open "
        "tasks and runs.",
        object_schema({"first": _FIRST}),
        _waiting_on_me,
        read_only=True,
    ),
    Tool(
        "protocol",
        "The state machines as data, from the same tables the server enforces: the handoff "
        "protocol (10 states, 22 moves) and the pipeline-run lifecycle. Each move names its "
        "tool (`mutation`) and who may make it (`actor`).",
        object_schema({}),
        _protocol,
        read_only=True,
    ),
    Tool(
        "run",
        "A run the caller can see, with the events the caller may make on it now "
        "(`allowedEvents`) and its lease while claimed; not_found otherwise.",
        object_schema({"id": schemas.RUN_ID}, ["id"]),
        _get_run,
        read_only=True,
    ),
    Tool(
        "runs",
        "Runs the caller can see (its owner's) that match every given condition, newest "
        "`updatedAt` first; `first` at most 100, then `after` the page's `endCursor`.",
        object_schema(
            {
                "project": _STRING,
                "statuses": _enum_list(RunStatus),
                "phases": _enum_list(RunPhase),
                "taskId": _STRING,
                "updatedAfter": _UPDATED_AFTER,
                "first": _FIRST,
                "after": _AFTER,
            }
        ),
        _list_runs,
        read_only=True,
    ),
)

# Every tool, by name: the writes in table order, then the reads.
TOOLS: dict[str, Tool] = {
    t.name: t
    for t in (
        HAND_OFF,
        *TASKS.tools(),
        SAVE_CHECKPOINT,
        CREATE_RUN,
        *RUNS.tools(),
        RUN_HEARTBEAT,
        *READS,
    )
}


def shown(principal: Principal) -> list[Tool]:
    """The tools `principal` is shown."""
    return [t for t in TOOLS.values() if principal.kind in t.shown_to]


def not_found(name: str) -> Refused:
    return Refused(NotFound("tool", name))


__all__ = ["TOOLS", "Door", "Refused", "Tool", "attempt", "shown"]
