"""The engine answers exactly what graphql-core's reference executor answers, on Baton's schema.

Every document runs twice over the same data and principal: on the engine (compiled plans,
batched levels) and on graphql-core's `execute` with the same Strawberry resolvers (see
`tests.engine.differential`). Data must be equal, and errors equal as lists (message,
locations, path, code). Hand-written documents cover fragments, aliases, directives, unions,
interfaces, nulls and errors, explicit nulls in variables, variables inside argument literals
and absent ones with defaults, mutations with effects (each executor on its own twin of the
same task) and subscriptions replayed from a cursor;
hypothesis-graphql adds thousands of generated ones over every query field and argument. The
edge cases Baton's resolvers never produce are in `test_differential_synthetic.py`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from broadcaster import Broadcast
from graphql import StringValueNode
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from hypothesis_graphql import from_schema

from baton.access.principals import ADMIN, Principal
from baton.api.schema import schema
from baton.live.hub import EventHub
from baton.live.logs import TASK_LOG
from baton.protocol.handoff import MoveName, TaskState, Verification, WaitingOn
from baton.services.context import Context
from baton.services.runs import RunService
from baton.services.tasks import HandOff, TaskService
from baton.store.records import EventRecord
from tests.engine.differential import assert_same as differential_same
from tests.engine.differential import (
    our_stream,
    ours,
    reference,
    reference_stream,
    refused_by_baton_only,
)
from tests.helpers import ENGINE, World, agent, context, packet, task_id_of


async def answered_alike(
    service: TaskService,
    principal: Principal,
    query: str,
    variables: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The engine's whole answer, once it is shown to be graphql-core's."""
    theirs = await reference(schema, query, variables, context(principal, service))
    mine = await ours(ENGINE, query, variables, context(principal, service))
    differential_same(mine, theirs, query)
    return mine


async def assert_same(
    service: TaskService,
    principal: Principal,
    query: str,
    variables: dict[str, Any] | None = None,
) -> dict[str, Any] | None:
    return (await answered_alike(service, principal, query, variables)).get("data")


@pytest.fixture(scope="module")
async def graph(service: TaskService) -> World:
    """Tasks in many states, with dependencies (a cycle among them), a result and a checkpoint."""
    world = World(service)
    ids = {name: task_id_of(world.requester, name) for name in ("a", "b", "c", "d", "e")}
    deps = {"a": ["b", "c"], "b": ["c"], "c": ["a", "missing"], "d": [], "e": ["d"]}
    for name in ("d", "e", "c", "b", "a"):
        await world.decide(None)
        await service.hand_off(
            agent(world.requester),
            HandOff(
                id=name,
                project=world.project,
                requester=world.requester,
                assignee=world.assignee,
                packet=packet(depends_on=[ids.get(d, d) for d in deps[name]], files=["src/x.py"]),
                verification=Verification.REVIEW,
            ),
        )
    await world.task_in(TaskState.completed)
    await world.task_in(TaskState.waiting, WaitingOn.human)
    working = await world.task_in(TaskState.working)
    await service.save_checkpoint(
        agent(world.assignee),
        working.id,
        {
            "progress": "half",
            "decisions": ["x"],
            "files_touched": [],
            "next_steps": ["y"],
            "open_questions": [],
        },
    )
    await world.move(await world.task_in(TaskState.routed), MoveName.CANCEL, reason="no")
    return world


TASK_FIELDS = """
  id project state waitingOn requester assignee version verification allowedMoves
  createdAt updatedAt protocolObject
  packet { task deliverableType acceptanceCriteria context files dependsOn }
  result { summary provenance returnedBy returnedAt evidence { kind summary url content } }
  latestCheckpoint { progress decisions filesTouched nextSteps openQuestions }
"""

DOCUMENTS = [
    f"{{ tasks(first: 100) {{ totalCount pageInfo {{ hasNextPage endCursor }}"
    f" edges {{ cursor node {{ {TASK_FIELDS} }} }} }} }}",
    """{ tasks(first: 20) { edges { node { id dependencies { id dependencies { id state }
         dependents(first: 5) { id } } dependents(first: 10) { id events(first: 2) {
         edges { cursor node {
         id kind move fromState toState actor version reason task { id version state } } }
         pageInfo { hasNextPage hasPreviousPage startCursor endCursor } } } } } } }""",
    """query Q($a: Boolean!, $b: Boolean!) { tasks(first: 5) { edges { node {
         id @include(if: $a) state @skip(if: $b) ...F ... on Task { assignee }
         x: packet { t: task } y: packet { deliverableType } } } } }
       fragment F on Task { requester version __typename packet { files } }""",
    """{ __typename viewer { __typename kind handle owner } protocol { __typename handoff {
         name states { name description terminal initial note movesTo reachedFrom }
         moves { name from to mutation actor } } } }""",
    """{ gateRules { id owner requester project deliverableTypes decision priority } }""",
    """{ tasks { edges { node { id events(after: "1") { edges { cursor } } } } } }""",
    """{ tasks(filter: {states: [waiting, working], deliverableTypes: [doc]}) {
         edges { node { id state waitingOn } } } }""",
    """{ task(id: "no-such-task") { id } }""",
    # A listing's cursors need `updatedAt`, which a page read for its nodes alone leaves out.
    """{ tasks(first: 3) { ... on TaskConnection { pageInfo { endCursor } }
         edges { node { id } } } }""",
    """{ tasks(first: 3) { edges { c: cursor node { state } } } }""",
    # A domain error raised as the field runs (an agent may not list webhook endpoints) beside
    # data: the error and its path as graphql-core reports them, with no traceback kept.
    """{ viewer { handle } webhookEndpoints { id } tasks(first: 2) { edges { node { id } } } }""",
    # (arguments out of bounds are refused before execution: tests/api/test_executor_hardening)
]


@pytest.mark.parametrize("role", ["requester_owner", "assignee", "outsider_owner", "admin"])
@pytest.mark.parametrize("document", DOCUMENTS, ids=range(len(DOCUMENTS)))
async def test_documents_answer_as_graphql_core_does(
    service: TaskService, graph: World, role: str, document: str
) -> None:
    variables = {"a": True, "b": False} if "$a" in document else None
    await assert_same(service, graph.roles[role], document, variables)
    if variables:
        await assert_same(service, graph.roles[role], document, {"a": False, "b": True})


# Each of a task's fields alone, read by every reader that may leave the JSON out when nothing
# selected needs it (`baton.api.types.task_reads`): a field wrongly held to need no JSON would
# answer an error here where graphql-core's executor (which reads everything) answers data.
ONE_TASK_FIELD = [
    *["id", "project", "state", "waitingOn", "requester", "assignee", "createdAt", "updatedAt"],
    *["version", "verification", "allowedMoves", "protocolObject", "__typename"],
    "packet { task dependsOn }",
    "packet { __typename }",
    "packet { deliverableType acceptanceCriteria context files } state",
    "packet { task } result { summary }",
    "result { summary }",
    "latestCheckpoint { progress }",
    "dependencies { id }",
    "dependents(first: 5) { id }",
    "events(first: 1) { edges { node { id } } }",
    "events(first: 1) { pageInfo { hasNextPage endCursor } }",
    "events(first: 1) { edges { cursor } p: pageInfo { hasNextPage } }",
    "runs(first: 5) { id }",
]


@pytest.mark.parametrize("field", ONE_TASK_FIELD)
async def test_each_task_field_answers_as_graphql_core_does_through_every_reader(
    service: TaskService, graph: World, field: str
) -> None:
    query = f"""{{ tasks(first: 20) {{ edges {{ node {{ {field}
        dependencies {{ {field} }} dependents(first: 5) {{ {field} }}
        log: events(first: 3) {{ edges {{ node {{ id task {{ {field} }} }} }} }} }} }} }} }}"""
    data = await assert_same(service, graph.roles["requester_owner"], query)
    assert data is not None and data["tasks"]["edges"]  # the document is valid: it ran


@pytest.mark.parametrize("field", ONE_TASK_FIELD)
async def test_each_task_field_answers_as_graphql_core_does_through_a_read_by_id(
    service: TaskService, graph: World, field: str
) -> None:
    # `task(id)` reads what its selection needs too: every task of the graph, by id.
    principal = graph.roles["requester_owner"]
    listing = await assert_same(
        service, principal, "{ tasks(first: 20) { edges { node { id } } } }"
    )
    assert listing is not None
    ids = [edge["node"]["id"] for edge in listing["tasks"]["edges"]]
    reads = " ".join(f"t{n}: task(id: {json.dumps(i)}) {{ {field} }}" for n, i in enumerate(ids))
    data = await assert_same(service, principal, f"{{ {reads} }}")
    assert data is not None and len(ids) >= 8
    assert all(data[f"t{n}"] is not None for n in range(len(ids)))


async def test_a_field_selected_through_fragments_is_read(
    service: TaskService, graph: World
) -> None:
    query = """{ tasks(first: 20) { ...Edges } }
        fragment Edges on TaskConnection { edges { node { id ... on Task { ...P } } } }
        fragment P on Task { packet { task } dependencies { ...R } }
        fragment R on Task { result { summary } latestCheckpoint { progress }
            events(first: 1) { ...Page } }
        fragment Page on TaskEventConnection { pageInfo { hasNextPage } }"""
    data = await assert_same(service, graph.roles["requester_owner"], query)
    assert data is not None and any(e["node"]["packet"]["task"] for e in data["tasks"]["edges"])


async def test_task_graph_answers_as_graphql_core_does(service: TaskService, graph: World) -> None:
    a, e = (task_id_of(graph.requester, name) for name in "ae")
    query = f"""{{ taskGraph(ids: ["{a}", "{e}", "unknown"], depth: 3) {{
        nodes {{ id state dependencies {{ id }} }} edges {{ from to }} cycles unresolved }} }}"""
    data = await assert_same(service, graph.roles["requester_owner"], query)
    assert data is not None and data["taskGraph"]["cycles"]


async def test_a_task_by_id_and_through_a_variable(service: TaskService, graph: World) -> None:
    query = f"""query($id: ID!) {{ a: task(id: $id) {{ {TASK_FIELDS} }}
        b: task(id: "{graph.req_owner}_b") {{ id }} }}"""
    data = await assert_same(
        service, graph.roles["assignee"], query, {"id": f"{graph.req_owner}_a"}
    )
    assert data is not None and data["a"]["id"] == f"{graph.req_owner}_a"


MUTATION = """
mutation($id: ID!, $v: Int) {
  acceptTask(input: {id: $id, expectedVersion: $v}) {
    __typename
    ... on MoveSuccess { task { id state version } events { id kind move } }
    ... on Error { code message }
    ... on InvalidStateError { state move allowedMoves }
    ... on VersionConflictError { expectedVersion actualVersion }
  }
}
"""


async def test_mutation_results_are_the_same_union_members(
    service: TaskService, graph: World
) -> None:
    """A refused move changes nothing, so both executors see the same task."""
    task = await graph.task_in(TaskState.working)
    for principal, version in ((graph.roles["assignee"], None), (graph.roles["admin"], 99)):
        await assert_same(service, principal, MUTATION, {"id": task.id, "v": version})
    await assert_same(service, graph.roles["outsider_agent"], MUTATION, {"id": task.id})


DATETIME = st.just(StringValueNode(value="2026-01-01T00:00:00+00:00"))
QUERIES = from_schema(
    schema._schema,
    fields=["task", "tasks", "taskGraph", "protocol", "viewer", "gateRules"],
    custom_scalars={"DateTime": DATETIME},
    allow_x00=False,
)


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(query=QUERIES, role=st.sampled_from(["requester_owner", "assignee", "admin"]))
async def test_generated_queries_answer_as_graphql_core_does(
    service: TaskService, graph: World, query: str, role: str
) -> None:
    assume(not ENGINE.documents.get(query).errors)  # within the limits, like every request
    mine = await ours(ENGINE, query, None, context(graph.roles[role], service))
    # Refused before execution by an argument check or the cost budget: the reference
    # executor has no such rules; test_bad_input and test_cost cover these.
    assume(not refused_by_baton_only(mine))
    await assert_same(service, graph.roles[role], query)


# --- explicit nulls where a non-null value is expected ---------------------------------------

NULLS = [
    ("query($first: Int) { tasks(first: $first) { totalCount } }", {"first": None}),
    ("query($first: Int) { tasks(first: $first) { totalCount } }", {}),
    (
        "query($first: Int) { tasks(first: 2) { edges { node { id dependents(first: $first) "
        "{ id } } } } }",
        {"first": None},
    ),
    (
        "query($first: Int) { tasks(first: 2) { edges { node { id events(first: $first) "
        "{ edges { cursor } } } } } }",
        {"first": None},
    ),
    (
        "query($s: Boolean = false) { tasks(first: 3) { totalCount edges { node { id "
        "state @skip(if: $s) } } } }",
        {"s": None},
    ),
    ("query($s: Boolean = true) { viewer { handle @include(if: $s) } }", {"s": None}),
    (
        "query($s: Boolean = true) { viewer @include(if: $s) { handle } protocol { "
        "handoff { name } } }",
        {"s": None},
    ),
    (
        "query($s: Boolean = false) { tasks(first: 3) { edges { node { ... @skip(if: $s) { "
        "id } packet { task } } } } }",
        {"s": None},
    ),
    (
        "query($d: Int, $id: ID!) { taskGraph(ids: [$id], depth: $d) { nodes { id } } }",
        {"d": None, "id": "x"},
    ),
    ("query($st: [TaskState!]) { tasks(filter: {states: $st}) { totalCount } }", {"st": None}),
    (
        "query($w: WaitingOn) { tasks(first: 1, filter: {waitingOn: $w}) { totalCount } "
        "a: viewer { kind } }",
        {"w": None},
    ),
]

# Documents that validation refuses before anything runs: both must refuse them alike.
NULLS_REFUSED = [
    # a nullable variable where a list wants non-null items
    ("query($st: TaskState) { tasks(filter: {states: [$st]}) { totalCount } }", {"st": None}),
    # a variable given null that the operation never uses
    (
        "query($v: VerificationMode) { tasks(first: 1) { totalCount } a: viewer { kind } }",
        {"v": None},
    ),
]


@pytest.mark.parametrize(("query", "variables"), NULLS, ids=range(len(NULLS)))
async def test_explicit_nulls_answer_as_graphql_core_does(
    service: TaskService, graph: World, query: str, variables: dict[str, Any]
) -> None:
    mine = await answered_alike(service, graph.roles["requester_owner"], query, variables)
    assert "data" in mine, f"refused before execution, so it tests no execution: {mine}"


@pytest.mark.parametrize(("query", "variables"), NULLS_REFUSED, ids=range(len(NULLS_REFUSED)))
async def test_explicit_nulls_refused_by_validation_as_graphql_core_refuses(
    service: TaskService, graph: World, query: str, variables: dict[str, Any]
) -> None:
    mine = await answered_alike(service, graph.roles["requester_owner"], query, variables)
    assert "data" not in mine and mine["errors"], mine


# --- variables inside argument literals, absent variables with defaults, null variables -------

W2 = """query($v: String) { tasks(filter: {project: $v, states: [working]}, first: 50) {
    totalCount edges { node { id state project } } } }"""


def _nodes(data: dict[str, Any]) -> list[dict[str, Any]]:
    return [edge["node"] for edge in data["tasks"]["edges"]]


def _all_working(data: dict[str, Any]) -> bool:
    return bool(_nodes(data)) and all(n["state"] == "working" for n in _nodes(data))


# (document, its variables for the graph, what its data must show)
ARGUMENT_VARIABLES: list[
    tuple[str, Callable[[World], dict[str, Any]], Callable[[dict[str, Any], World], bool]]
] = [
    # a variable inside an input object literal, beside a constant list (the W2 listing)
    (
        W2,
        lambda g: {"v": g.project},
        lambda d, g: (
            bool(_nodes(d))
            and all(n["state"] == "working" and n["project"] == g.project for n in _nodes(d))
        ),
    ),
    # another project, which has no tasks: the cost walked for the first serves it (only
    # `first` and the conditions decide a cost), its filter checked again
    (
        W2,
        lambda g: {"v": f"{g.project}-none"},
        lambda d, g: _nodes(d) == [] and d["tasks"]["totalCount"] == 0,
    ),
    # the same variable null, then absent: the filter's field is null (its default), so the
    # listing is every working task the reader sees
    (W2, lambda g: {"v": None}, lambda d, g: _all_working(d)),
    (W2, lambda g: {}, lambda d, g: _all_working(d)),
    # variables as items of a list literal, beside a constant item
    (
        """query($p: String, $s: TaskState!) { tasks(filter: {project: $p,
             states: [$s, completed]}) { edges { node { state } } } }""",
        lambda g: {"p": g.project, "s": "working"},
        lambda d, g: {n["state"] for n in _nodes(d)} == {"working", "completed"},
    ),
    # absent variables for arguments with defaults, and a variable with an operation default
    (
        """query($n: Int, $p: String, $k: Int = 2) { tasks(first: $k, filter: {project: $p}) {
             edges { node { id dependents(first: $n) { id } events(first: $n) {
             edges { cursor } } } } } }""",
        lambda g: {"p": g.project},
        lambda d, g: len(_nodes(d)) == 2 and all(n["events"]["edges"] for n in _nodes(d)),
    ),
    # a variable as an item of an ID list, and an absent depth (its default)
    (
        """query($a: ID!, $d: Int) { taskGraph(ids: [$a, "unknown"], depth: $d) {
             nodes { id } cycles unresolved } }""",
        lambda g: {"a": task_id_of(g.requester, "a")},
        lambda d, g: (
            len(d["taskGraph"]["nodes"]) >= 3
            and d["taskGraph"]["cycles"] != []
            and "unknown" in d["taskGraph"]["unresolved"]
        ),
    ),
    # a list variable and a null one inside one filter
    (
        """query($p: String, $states: [TaskState!], $kinds: [DeliverableType!]) {
             tasks(filter: {project: $p, states: $states, deliverableTypes: $kinds}) {
             edges { node { state } } } }""",
        lambda g: {"p": g.project, "states": ["working", "waiting"], "kinds": None},
        lambda d, g: {n["state"] for n in _nodes(d)} == {"working", "waiting"},
    ),
]


@pytest.mark.parametrize(
    ("query", "variables", "expected"), ARGUMENT_VARIABLES, ids=range(len(ARGUMENT_VARIABLES))
)
async def test_variables_in_arguments_answer_as_graphql_core_does(
    service: TaskService,
    graph: World,
    query: str,
    variables: Callable[[World], dict[str, Any]],
    expected: Callable[[dict[str, Any], World], bool],
) -> None:
    data = await assert_same(service, graph.roles["requester_owner"], query, variables(graph))
    assert data is not None and expected(data, graph), data


# --- mutations with effects: each executor moves its own twin of one task --------------------

MOVES = [
    (
        TaskState.routed,
        "assignee",
        """mutation($id: ID!) { acceptTask(input: {id: $id}) { __typename
             ... on MoveSuccess { task { id state version allowedMoves } events { kind move
             fromState toState actor } } ... on Error { code message } } }""",
        {},
    ),
    (
        TaskState.routed,
        "assignee",
        """mutation($id: ID!) { a: acceptTask(input: {id: $id}) { __typename }
             b: startTask(input: {id: $id}) { ... on MoveSuccess { task { state version } } }
             c: startTask(input: {id: $id}) { ... on InvalidStateError { code state move
             allowedMoves } } }""",
        {},
    ),
    (
        TaskState.working,
        "assignee",
        """mutation($id: ID!, $n: Int) { a: pauseTask(input: {id: $id, waitingOn: human}) {
             __typename }
             bad: resumeTask(input: {id: $id}) { ... on MoveSuccess { task { dependents(
             first: $n) { id } } } }
             c: submitResult(input: {id: $id, result: {summary: "s", provenance:
             agent_generated, evidence: [{kind: test_output, summary: "ok"}]}}) {
             __typename } }""",
        {"n": None},
    ),
    (
        TaskState.verifying,
        "requester",
        """mutation($id: ID!) { sendBackTask(input: {id: $id, reason: "again"}) {
             ... on MoveSuccess { task { state version result { summary } } events {
             move reason } } ... on Error { code } } }""",
        {},
    ),
    (
        TaskState.working,
        "outsider_owner",
        """mutation($id: ID!) { pauseTask(input: {id: $id, waitingOn: agent}) { __typename
             ... on Error { code message } } }""",
        {},
    ),
]


@pytest.mark.parametrize(("state", "role", "query", "extra"), MOVES, ids=range(len(MOVES)))
async def test_mutations_answer_and_act_as_graphql_core_does(
    service: TaskService, state: TaskState, role: str, query: str, extra: dict[str, Any]
) -> None:
    world = World(service)
    mine_task, their_task = await world.task_in(state), await world.task_in(state)
    principal = world.roles[role]
    mine = await ours(ENGINE, query, {"id": mine_task.id, **extra}, context(principal, service))
    theirs = await reference(
        schema, query, {"id": their_task.id, **extra}, context(principal, service)
    )
    as_theirs = json.loads(json.dumps(mine).replace(mine_task.id, their_task.id))
    differential_same(as_theirs, theirs, query)
    mine_after = await service.get(ADMIN, mine_task.id)
    their_after = await service.get(ADMIN, their_task.id)
    assert (mine_after.state, mine_after.version, mine_after.waiting_on) == (
        their_after.state,
        their_after.version,
        their_after.waiting_on,
    )


# --- subscriptions, replayed from a cursor ------------------------------------------------------


@pytest.fixture
async def hub(service: TaskService) -> AsyncIterator[EventHub[EventRecord]]:
    broadcast = Broadcast("memory://")
    await broadcast.connect()
    events: EventHub[EventRecord] = EventHub(service.db, broadcast, TASK_LOG, poll_interval=0.2)
    await events.start()
    yield events
    await events.stop()
    await broadcast.disconnect()


SUBSCRIPTIONS = [
    """subscription($ids: [ID!], $after: ID) { taskEvents(filter: {taskIds: $ids}, after:
         $after) { id kind move fromState toState actor taskId task { id state version
         allowedMoves packet { task } } } }""",
    """subscription($ids: [ID!], $after: ID) { taskEvents(filter: {taskIds: $ids, kinds:
         [moved]}, after: $after) { ... on TaskEvent { move task { dependencies { id } } } } }""",
]


@pytest.mark.parametrize("query", SUBSCRIPTIONS, ids=range(len(SUBSCRIPTIONS)))
async def test_replayed_subscriptions_answer_as_graphql_core_does(
    service: TaskService, hub: EventHub[EventRecord], query: str
) -> None:
    world = World(service)
    task = await world.task_in(TaskState.verifying)
    principal = world.roles["requester_owner"]
    ctx = Context(principal, service, RunService(service.db), hub)
    variables = {"ids": [task.id], "after": "0"}
    # one event per version: `created` and every move; with `kinds: [moved]`, the moves alone
    count = task.version - (1 if "kinds" in query else 0)
    mine = await our_stream(ENGINE, query, variables, ctx, limit=count)
    theirs = await reference_stream(schema, query, variables, ctx, limit=count)
    assert len(mine) == count
    assert mine == theirs
