"""The engine answers exactly what graphql-core's reference executor answers.

Every document runs twice over the same data and principal: on the engine (compiled plans,
batched levels) and on graphql-core's `execute` with the same Strawberry resolvers. Data must be
equal, and errors equal as sets of (message, path, code) (graphql-core running sibling fields
in document order, see `InDocumentOrder`). Hand-written documents cover fragments,
aliases, directives, unions, interfaces, nulls and errors; hypothesis-graphql adds thousands of
generated ones over every query field and argument.
"""

from __future__ import annotations

import inspect
from typing import Any

import pytest
from graphql import StringValueNode, execute, parse
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from hypothesis_graphql import from_schema

from baton.access.principals import Principal
from baton.api.schema import schema
from baton.engine.errors import formatted
from baton.protocol.handoff import MoveName, TaskState, Verification, WaitingOn
from baton.services.tasks import HandOff, TaskService
from tests.helpers import ENGINE, World, agent, context, execute_raw, packet, task_id_of

ErrorKey = tuple[str, tuple[str | int, ...], str]


class InDocumentOrder(schema.execution_context_class):  # type: ignore[name-defined, misc]
    """graphql-core's executor with sibling fields run one after another. When two failures
    null the same position, graphql-core reports the one that arrives first, which for
    concurrent fields is a matter of timing; the engine reports the first in document order,
    which is what this executor makes graphql-core do too."""

    def execute_fields(self, *args: Any) -> Any:
        return self.execute_fields_serially(*args)


async def reference(
    service: TaskService, principal: Principal, query: str, variables: dict[str, Any] | None
) -> tuple[Any, set[ErrorKey]]:
    result = execute(
        schema._schema,
        parse(query),
        context_value=context(principal, service),
        variable_values=variables,
        executor_class=InDocumentOrder,
    )
    if inspect.isawaitable(result):
        result = await result
    return result.data, _keys(formatted(result.errors or ()))


def _keys(errors: list[dict[str, Any]]) -> set[ErrorKey]:
    return {
        (e["message"], tuple(e.get("path") or ()), e.get("extensions", {}).get("code", ""))
        for e in errors
    }


async def assert_same(
    service: TaskService,
    principal: Principal,
    query: str,
    variables: dict[str, Any] | None = None,
) -> dict[str, Any] | None:
    expected_data, expected_errors = await reference(service, principal, query, variables)
    ours = await execute_raw(service, principal, query, variables)
    assert ours.data == expected_data, query
    assert _keys(ours.errors) == expected_errors, query
    return ours.data


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
    """{ tasks { edges { node { id events(after: "nope") { edges { cursor } } } } } }""",
    """{ tasks(filter: {states: [waiting, working], deliverableTypes: [doc]}) {
         edges { node { id state waitingOn } } } }""",
    """{ task(id: "no-such-task") { id } }""",
    """{ tasks(after: "AAAA") { totalCount } }""",
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
    refused = await execute_raw(service, graph.roles[role], query)
    # Refused before execution (a list argument out of bounds, over the cost budget): the
    # reference executor has no such check; test_bad_input and test_cost cover these.
    assume(not any({"budget", "field"} & e.get("extensions", {}).keys() for e in refused.errors))
    await assert_same(service, graph.roles[role], query)
