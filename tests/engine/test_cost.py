"""Bounded work: the worst case of an operation is known before it runs, and refused past the
budget; a list argument out of its bounds is refused too; nothing runs when refused."""

from __future__ import annotations

from typing import Any

import pytest
from graphql import (
    GraphQLList,
    GraphQLNonNull,
    GraphQLObjectType,
    get_named_type,
    is_composite_type,
)

from baton.api.schema import schema
from baton.engine.cost import LIST_SIZE, ListSize
from baton.engine.documents import MAX_MEMOS
from baton.engine.limits import DEFAULT_LIMITS
from baton.engine.plans import DEFINITION
from baton.services.tasks import HandOff, TaskService
from tests.helpers import (
    ENGINE,
    World,
    agent,
    counting_statements,
    execute,
    execute_raw,
    packet,
    task_id_of,
)

BUDGET = DEFAULT_LIMITS.max_cost


async def clique(service: TaskService, world: World, size: int) -> list[str]:
    """`size` tasks that each depend on all the others."""
    names = [f"c{i}" for i in range(size)]
    ids = [task_id_of(world.requester, name) for name in names]
    for name, task_id in zip(names, ids, strict=True):
        await service.hand_off(
            agent(world.requester),
            HandOff(
                world.project,
                world.requester,
                world.assignee,
                packet(depends_on=[i for i in ids if i != task_id]),
                id=name,
            ),
        )
    return ids


def refused_for_cost(response: Any) -> dict[str, Any]:
    assert response.data is None, response
    [error] = response.errors
    assert error["extensions"]["code"] == "invalid_input"
    assert error["extensions"]["budget"] == BUDGET
    assert error["extensions"]["estimate"] > BUDGET
    return error  # type: ignore[no-any-return]


@pytest.mark.parametrize("aliases", [1, 2])
async def test_nested_lists_past_the_budget_are_refused_before_any_sql_runs(
    service: TaskService, world: World, aliases: int
) -> None:
    """The hostile query of the issue: 21 tasks each depending on the other 20; four levels of
    `dependencies` would return 160,000 nodes."""
    ids = await clique(service, world, 21)
    nested = "dependencies { " * 4 + "id" + " }" * 4
    fields = " ".join(f'a{i}: task(id: "{ids[0]}") {{ {nested} }}' for i in range(aliases))
    with counting_statements() as statements:
        response = await execute_raw(service, world.roles["requester"], f"{{ {fields} }}")
    error = refused_for_cost(response)
    assert str(BUDGET) in error["message"]
    assert statements() == 0


async def test_events_three_levels_deep_are_refused(service: TaskService, world: World) -> None:
    query = """{ tasks(first: 100) { edges { node {
        events(first: 100) { edges { node { task {
          events(first: 100) { edges { node { task { id } } } } } } } } } } } }"""
    with counting_statements() as statements:
        response = await execute_raw(service, world.roles["requester"], query)
    refused_for_cost(response)
    assert statements() == 0


async def test_three_levels_of_dependencies_are_within_the_budget(
    service: TaskService, world: World
) -> None:
    """20 x 20 x 20 at worst (`dependsOn` holds at most 20 entries)."""
    ids = await clique(service, world, 5)
    nested = "dependencies { " * 3 + "id" + " }" * 3
    data = await execute(
        service, world.roles["requester"], f'{{ task(id: "{ids[0]}") {{ {nested} }} }}'
    )
    assert len(data["task"]["dependencies"]) == 4


DEEP_EVENTS = """query($n: Int!, $deep: Boolean!) { tasks(first: $n) { edges { node {
    events(first: 100) { edges { node { task {
      events(first: 100) @include(if: $deep) { edges { node { id } } } } } } } } } } }"""


async def test_a_cost_checked_once_holds_only_for_the_same_page_sizes_and_directives(
    service: TaskService, world: World
) -> None:
    """Costs are remembered per document, keyed by the variables that decide them."""
    requester = world.roles["requester"]
    small = await execute_raw(service, requester, DEEP_EVENTS, {"n": 1, "deep": True})
    assert small.errors == [] and small.data is not None
    for variables in ({"n": 100, "deep": True}, {"n": 5, "deep": True}):
        with counting_statements() as statements:
            response = await execute_raw(service, requester, DEEP_EVENTS, variables)
        refused_for_cost(response)
        assert statements() == 0
    assert (await execute_raw(service, requester, DEEP_EVENTS, {"n": 5, "deep": False})).data


PAGES = """query($n: Int!, $after: String, $f: TaskFilter) {
  tasks(first: $n, after: $after, filter: $f) { edges { cursor node { id } } } }"""


async def test_a_cost_walked_once_serves_other_cursors_and_filters_whose_checks_run_again(
    service: TaskService, world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The walk depends on the page size and the conditions only: a page after another
    cursor, or for another filter, is not walked again, and its own arguments are checked
    all the same, as the walk would check them."""
    requester = world.roles["requester"]
    for name in ("a", "b", "c"):
        hand_off = HandOff(world.project, world.requester, world.assignee, packet(), id=name)
        await service.hand_off(requester, hand_off)
    walks = 0
    walk = ENGINE.costs.check

    def counted(*args: Any) -> Any:
        nonlocal walks
        walks += 1
        return walk(*args)

    monkeypatch.setattr(ENGINE.costs, "check", counted)
    first = await execute_raw(service, requester, PAGES, {"n": 1})
    assert first.errors == [] and first.data is not None
    cursor = first.data["tasks"]["edges"][0]["cursor"]
    mine = {"project": world.project}
    for variables in (
        {"n": 1, "after": cursor},
        {"n": 1, "after": cursor, "f": mine},
        {"n": 1, "f": {"states": ["requested", "working"]}},
    ):
        response = await execute_raw(service, requester, PAGES, variables)
        assert response.errors == [], response.errors
    assert walks == 1
    many = {"states": ["working"] * 101}
    for variables, field in (
        ({"n": 1, "after": "not a cursor"}, "after"),
        ({"n": 1, "f": many}, "filter"),
        ({"n": 1, "after": "not a cursor", "f": many}, "after"),  # the walk's order
    ):
        with counting_statements() as statements:
            response = await execute_raw(service, requester, PAGES, variables)
        assert response.data is None
        [error] = response.errors
        assert error["extensions"] == {"code": "invalid_input", "field": field}
        assert statements() == 0
    # The same refusals from a walk of their own, for a document not walked before.
    fresh = PAGES.replace("node { id }", "node { id state }")
    response = await execute_raw(service, requester, fresh, {"n": 1, "f": many})
    assert response.errors[0]["extensions"] == {"code": "invalid_input", "field": "filter"}
    assert walks == 2
    # A new page size walks again.
    assert (await execute_raw(service, requester, PAGES, {"n": 2})).errors == []
    assert walks == 3


async def test_a_variable_inside_a_filter_literal_is_checked_on_every_request(
    service: TaskService, world: World
) -> None:
    """A cost kept for a document once held its checks for every later request when the
    variable sat inside the argument's literal, not given to the argument whole: a list past
    the bound then ran."""
    requester = world.roles["requester"]
    query = "query($s: [TaskState!]) { tasks(filter: {states: $s}) { totalCount } }"
    for states in (["working"], ["working"] * 101, ["working"]):  # refused, then not
        with counting_statements() as statements:
            response = await execute_raw(service, requester, query, {"s": states})
        if len(states) == 1:
            assert response.errors == [] and response.data is not None
            continue
        assert response.data is None
        [error] = response.errors
        assert error["extensions"] == {"code": "invalid_input", "field": "filter"}
        assert statements() == 0
    # A refusal is not kept for the next request either, whatever came first.
    fresh = query.replace("totalCount", "totalCount edges { cursor }")
    for states in (["working"] * 101, ["working"]):
        response = await execute_raw(service, requester, fresh, {"s": states})
        assert (response.data is None) == (len(states) > 1), response


async def test_what_a_document_remembers_is_bounded_and_past_the_bound_still_checked(
    service: TaskService, world: World
) -> None:
    requester = world.roles["requester"]
    query = "query($n: Int!, $d: Boolean!) { tasks(first: $n) @include(if: $d) { totalCount } }"
    for n in range(101):
        for d in (True, False):
            response = await execute_raw(service, requester, query, {"n": n, "d": d})
            assert response.errors == [], response.errors
    prepared = ENGINE.documents.get(query)
    assert len(prepared.cache) <= MAX_MEMOS
    response = await execute_raw(service, requester, query, {"n": 101, "d": True})
    assert response.data is None
    assert response.errors[0]["extensions"] == {"code": "invalid_input", "field": "first"}


@pytest.mark.parametrize(
    "query",
    [
        "{ tasks(first: 101) { totalCount } }",
        "{ tasks(first: -1) { totalCount } }",
        '{ task(id: "x") { events(first: 1000) { edges { cursor } } } }',
        '{ task(id: "x") { dependents(first: 101) { id } } }',
        '{ taskGraph(ids: ["x"], first: 2001) { truncated } }',
        "{ runs(first: 500) { totalCount } }",
        "{ runs(first: 1) { edges { node { events(first: 101) { edges { cursor } } } } } }",
    ],
)
async def test_a_list_argument_out_of_bounds_is_refused_before_anything_runs(
    service: TaskService, world: World, query: str
) -> None:
    with counting_statements() as statements:
        response = await execute_raw(service, world.roles["requester"], query)
    assert response.data is None
    [error] = response.errors
    assert error["extensions"] == {"code": "invalid_input", "field": "first"}
    assert statements() == 0


async def test_a_board_worth_of_work_is_within_the_budget(
    service: TaskService, world: World
) -> None:
    """The W5 workload: 100 tasks with their dependencies, dependents and last event."""
    query = """{ tasks(first: 100) { edges { node { id dependencies { id state }
        dependents { id } events(first: 1) { edges { node { id kind } } } } } } }"""
    await execute(service, world.roles["requester"], query)


async def test_full_introspection_is_within_the_budget(service: TaskService, world: World) -> None:
    from graphql import get_introspection_query

    data = await execute(service, world.roles["requester"], get_introspection_query())
    assert data["__schema"]["queryType"]["name"] == "Query"


async def test_introspection_is_counted_as_it_runs_and_refused_past_the_budget() -> None:
    """graphql-core's own rule bounds how deep introspection may nest; what is left is
    counted while it runs (on an engine with a small budget, the full query is too much)."""
    from graphql import get_introspection_query

    from baton.engine.limits import Limits
    from baton.engine.runner import Engine, Request

    small = Engine(schema, Limits(max_cost=1000))
    outcome = await small.execute(Request(get_introspection_query()), None)
    assert outcome.refused
    [error] = outcome.errors
    assert error["extensions"]["budget"] == 1000
    assert error["extensions"]["estimate"] > 1000
    deep = "fields { type { " * 3 + "name" + " } }" * 3
    refused = await small.execute(Request(f"{{ __schema {{ types {{ {deep} }} }} }}"), None)
    assert refused.refused and "introspection depth" in refused.errors[0]["message"]


def _composite_lists() -> list[tuple[str, str]]:
    found = []
    for type_ in schema._schema.type_map.values():
        if not isinstance(type_, GraphQLObjectType) or type_.name.startswith("__"):
            continue
        for name, field in type_.fields.items():
            inner = field.type.of_type if isinstance(field.type, GraphQLNonNull) else field.type
            if isinstance(inner, GraphQLList) and is_composite_type(get_named_type(inner)):
                found.append((type_.name, name))
    return found


def _paged(type_name: str, field_name: str) -> bool:
    """A connection's edges and a graph's nodes: as long as the page of the field that
    returned their parent (see `test_every_paged_list_takes_a_bounded_page_size`)."""
    return (field_name == "edges" and type_name.endswith("Connection")) or (
        (type_name, field_name) == ("TaskGraph", "nodes")
    )


def _bound_of(type_name: str, field_name: str) -> object:
    type_ = schema._schema.type_map[type_name]
    assert isinstance(type_, GraphQLObjectType)
    sf = (type_.fields[field_name].extensions or {}).get(DEFINITION)
    return (getattr(sf, "metadata", None) or {}).get(LIST_SIZE)


DECLARED = [(t, f) for t, f in _composite_lists() if not _paged(t, f)]
PAGED = sorted({t for t, f in _composite_lists() if _paged(t, f)})


@pytest.mark.parametrize(("type_name", "field_name"), DECLARED)
def test_every_list_of_objects_declares_how_long_it_can_be(type_name: str, field_name: str) -> None:
    bound = _bound_of(type_name, field_name)
    assert isinstance(bound, ListSize), f"{type_name}.{field_name} declares no list size"


@pytest.mark.parametrize("type_name", PAGED)
def test_every_paged_list_takes_a_bounded_page_size(type_name: str) -> None:
    """Every field that returns a connection (or a graph) declares its page size: `first`,
    with a default and a maximum, which the lists inside it take as their length."""
    returning = [
        (parent.name, name)
        for parent in schema._schema.type_map.values()
        if isinstance(parent, GraphQLObjectType) and not parent.name.startswith("__")
        for name, field in parent.fields.items()
        if get_named_type(field.type).name == type_name
    ]
    assert returning, f"nothing returns {type_name}"
    for parent, name in returning:
        bound = _bound_of(parent, name)
        assert isinstance(bound, ListSize), f"{parent}.{name} declares no page size"
        assert bound.argument == "first" and bound.default is not None, (parent, name)
        assert 0 < bound.default <= bound.maximum <= 2000, (parent, name, bound)


def test_the_paged_and_declared_lists_are_all_the_lists() -> None:
    assert len(DECLARED) + sum(1 for t, f in _composite_lists() if _paged(t, f)) == len(
        _composite_lists()
    )
    assert set(PAGED) == {
        "TaskConnection",
        "TaskEventConnection",
        "RunConnection",
        "RunEventConnection",
        "TaskGraph",
    }


# Three nested pages of events; `worst_case` counts it by hand, as the module docstring of
# `baton.engine.cost` defines a cost: every field one, a list's items as often as its page.
AT_THE_BUDGET = """query($n: Int!, $m: Int!, $l: Int!) { tasks(first: $n) { edges { node {
    events(first: $m) { edges { node { task {
      events(first: $l) { edges { node { id } } } } } } } } } } }"""


def worst_case(n: int, m: int, lp: int) -> int:
    inner_node = 1 + 1  # node { id }
    inner_events = 1 + (1 + lp * inner_node)  # events(first: l) { edges { node } }
    task = 1 + inner_events  # task { events }
    middle_node = 1 + task  # node { task }
    middle_events = 1 + (1 + m * middle_node)  # events(first: m) { edges { node } }
    outer_node = 1 + middle_events  # node { events }
    return 1 + (1 + n * outer_node)  # tasks(first: n) { edges { node } }


async def test_a_document_costing_exactly_the_budget_runs_and_one_more_is_refused(
    service: TaskService, world: World
) -> None:
    """The budget is inclusive: 50,000 values (the README's Limits table) may be returned."""
    assert BUDGET == 50_000
    sizes = {"n": 6, "m": 49, "l": 83}
    assert worst_case(6, 49, 83) == BUDGET  # 2 + 6 * (3 + 49 * (4 + 2 * 83))
    await world.hand_off()
    requester = world.roles["requester"]
    at_budget = await execute_raw(service, requester, AT_THE_BUDGET, sizes)
    assert at_budget.errors == [] and at_budget.data is not None, at_budget.errors
    assert len(at_budget.data["tasks"]["edges"]) == 1

    # One field more (a `__typename` beside `tasks`) costs one value more.
    one_more = AT_THE_BUDGET.replace("{ tasks(", "{ __typename tasks(", 1)
    with counting_statements() as statements:
        response = await execute_raw(service, requester, one_more, sizes)
    error = refused_for_cost(response)
    assert error["extensions"]["estimate"] == BUDGET + 1
    assert statements() == 0


async def test_at_run_time_a_request_may_load_only_so_many_rows(
    service: TaskService, world: World
) -> None:
    """The second line of defence: a request that gets past the static check but loads more
    rows than `max_rows` stops with a typed error."""
    from baton.engine.limits import Limits
    from baton.engine.runner import Engine, Request
    from tests.helpers import context

    await clique(service, world, 6)
    small = Engine(schema, Limits(max_rows=5))
    outcome = await small.execute(
        Request("{ tasks(first: 50) { edges { node { id } } } }"),
        context(world.roles["requester"], service),
    )
    assert outcome.data is None
    assert [e["extensions"]["code"] for e in outcome.errors] == ["too_expensive"]


async def test_a_request_stopped_by_its_budget_leaves_nothing_for_the_collector(
    service: TaskService, world: World
) -> None:
    """A refused request's memory goes back when its answer does: the refusal keeps no
    traceback whose frames (and the rows they loaded) would live in a reference cycle until the
    collector's rare full pass. With the collector off, nothing of the refusal survives."""
    import gc

    from baton.engine.limits import Limits
    from baton.engine.runner import Engine, Request
    from baton.errors import TooMuchWork
    from tests.helpers import context

    await clique(service, world, 6)
    small = Engine(schema, Limits(max_loaded_bytes=2_000))
    query = (
        "{ tasks(first: 50) { edges { node { id "
        "events { edges { node { task { protocolObject } } } } } } } }"
    )
    gc.collect()
    gc.disable()
    try:
        outcome = await small.execute(Request(query), context(world.roles["requester"], service))
        assert [e["extensions"]["code"] for e in outcome.errors][:1] == ["too_expensive"]
        del outcome
        left = [o for o in gc.get_objects() if isinstance(o, TooMuchWork)]
    finally:
        gc.enable()
    assert left == []
