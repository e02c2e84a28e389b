"""The engine answers as graphql-core does where resolvers fail, on a schema made to fail.

Each document runs on the engine and on graphql-core's reference executor (see
`tests.engine.differential`) against `tests.engine.synthetic`; answers must be identical, and so
must the mutations each execution ran (its `Ledger`). Hand-written documents cover each kind of
failure; hypothesis-graphql adds generated ones over the whole schema.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis_graphql import from_schema

from baton.engine.limits import DEFAULT_LIMITS
from baton.engine.runner import Engine
from tests.engine.differential import (
    assert_same,
    our_stream,
    ours,
    reference,
    reference_stream,
    refused_by_baton_only,
)
from tests.engine.synthetic import SYNTHETIC, Ledger

ENGINE = Engine(SYNTHETIC, DEFAULT_LIMITS)

QUERIES: list[tuple[str, dict[str, Any] | None]] = [
    # resolvers that fail: nullable, non-null (bubbling to the nearest nullable), async
    ("{ item { name number twice later fails must mustLater } }", None),
    ("{ item(number: 2) { must mustLater } }", None),
    ("{ items { name must } }", None),
    ("{ items(first: 7) { mustLater later } }", None),
    (
        "{ a: item(number: 2) { must } b: item(number: 3) { must }"
        " c: maybeItem(number: 5) { must } }",
        None,
    ),
    ("{ slowFail item { name } }", None),
    ("{ maybeItem { name } other: maybeItem(number: 4) { twice } }", None),
    # a server's faults: null from a non-null resolver, an unexpected exception, values no
    # leaf can serialise, an object its union does not hold
    ("{ item { nullFromResolver } }", None),
    ("{ maybeItem(number: 1) { nullFromResolver } item { name } }", None),
    ("{ item { crash huge color } }", None),
    ("{ items { color } }", None),
    ("{ stray { __typename } }", None),
    # lists: holes, a null in a non-null list, nested lists, batches with one failing parent
    ("{ item { holes { name must } strict { name } matrix } }", None),
    ("{ item { holes { name } matrix } }", None),
    # errors in lists that follow empty ones, at every parent of a level (which list an item is
    # in is looked up only for its error's path)
    ("{ items(first: 3) { children(first: 0) { name } strict { name } holes { must } } }", None),
    ("{ items(first: 4) { matrix strict { must } children(first: 0) { must } } }", None),
    ("{ items { name label } }", None),
    ("{ items(first: 14) { label } }", None),
    ('{ items(first: 14) { number x: label(prefix: "n") } }', None),
    ("{ item { children { name children(first: 2) { number must } } } }", None),
    ("{ item { children(first: -1) { name } } }", None),
    # errors deep in lists whose parents are some of a level's objects (holes, one member of a
    # union): each error's path names its own parent
    ("{ item { holes { name must fails } } }", None),
    ("{ items(first: 3) { children(first: 3) { name must } holes { fails } } }", None),
    ("{ named { ... on Item { fails must } ... on Robot { serial } } }", None),
    ("{ things { ... on Robot { serial } ... on Item { holes { must } } } }", None),
    ("{ items(first: 5) { a: color b: color twins { number must } } }", None),
    ("{ maybeItem(number: 3) { twins { twins { must } } } }", None),
    # leaves read from the parent, answered a level at a time until a parent's value is one
    # for the general path: converted by its serialiser, null where non-null, refused, raised
    ("{ items(first: 2) { __typename code maybeCode size flag tint seen name number } }", None),
    ("{ items(first: 20) { number maybeCode flag seen } }", None),
    ("{ items(first: 20) { maybeCode size } }", None),
    ("{ items(first: 20) { tint } }", None),
    ("{ items(first: 6) { code } }", None),
    ("{ items(first: 9) { a: code b: maybeCode t: __typename } }", None),
    ("{ item { holes { code size } children(first: 4) { tint seen maybeCode } } }", None),
    ("{ things { ... on Item { size code } ... on Robot { serial __typename } } }", None),
    ("{ maybeItem(number: 7) { code } item(number: 16) { seen number } }", None),
    # objects read from the parent, built in the same pass, down to their own leaves
    ("{ items(first: 3) { twin { code size maybeTwin { tint seen __typename } } } }", None),
    ("{ items(first: 20) { name twin { code size maybeTwin { tint seen } } } }", None),
    ("{ items(first: 20) { maybeTwin { maybeCode flag } } }", None),
    ("{ items(first: 20) { maybeTwin { twin { number } } } }", None),
    ("{ item(number: 17) { name } maybeItem(number: 17) { twin { name } } }", None),
    ("{ items(first: 5) { twin { name must } maybeTwin { later } } }", None),
    # unions, interfaces, fragments, typenames, aliases, merging
    (
        "{ things { __typename ... on Item { number } ... on Robot { serial } } "
        "named { name __typename ... on Robot { serial } } }",
        None,
    ),
    (
        "query { ...Q item { ...I } } fragment Q on SyntheticQuery { items(first: 2) { ...I } }"
        " fragment I on Item { name ... on Named { name } twice }",
        None,
    ),
    ("{ item { a: twice b: twice name n: name } }", None),
    # variables and directives, with explicit nulls where a non-null is expected
    ("query($f: Int) { items(first: $f) { name } }", {"f": None}),
    ("query($f: Int) { items(first: $f) { name } }", {"f": 2}),
    ("query($f: Int) { item { children(first: $f) { name } } }", {"f": None}),
    ("query($f: Int) { item { c: children(first: $f) { name } name } }", {}),
    ("query($s: Boolean = false) { item { name @skip(if: $s) } }", {"s": None}),
    ("query($s: Boolean = true) { item { name @include(if: $s) } }", {"s": None}),
    ("query($s: Boolean = true) { item { name @include(if: $s) } }", {"s": False}),
    ("query($s: Boolean = false) { item @skip(if: $s) { name } x: echo }", {"s": None}),
    ("query($s: Boolean = false) { item { holes { name @skip(if: $s) } } }", {"s": None}),
    (
        "query($s: Boolean = false) { maybeItem(number: 2) { holes {"
        " ... @skip(if: $s) { name } } } }",
        {"s": None},
    ),
    ("query($m: Int) { item { echo(maybe: $m) } }", {"m": None}),
    ("query($m: Int) { item { echo(maybe: $m) } }", {}),
    ("query($m: Int) { item { echo(range: {low: $m}) } }", {"m": None}),
    ('query($m: Int) { item { echo(range: {high: $m, tags: ["a"]}) } }', {"m": None}),
    ("query($r: Range) { item { echo(range: $r) } }", {"r": {"low": 2, "tags": ["x", "y"]}}),
    ("query($r: Range) { item { echo(range: $r) } }", {"r": {"low": None}}),
    ("query($c: Color!) { item { echo(color: $c) } }", {"c": "RED"}),
    ("query($w: [String!]) { item { echo(words: $w) } }", {"w": "one"}),
    ('query($t: Boolean) { echo(flag: $t, text: "x") }', {"t": None}),
    # refused before execution: by validation, by variables that do not coerce
    ("query($w: String) { item { echo(words: [$w]) } }", {"w": None}),
    ("query($f: Int!) { items(first: $f) { name } }", {}),
    ("query($f: Int!) { items(first: $f) { name } }", {"f": "two"}),
    ("{ item { nope } }", None),
    ("{ item { name(x: 1) } }", None),
]

MUTATIONS: list[str] = [
    'mutation { a: bump(label: "a") { name } b: refuse { name } c: bump(label: "c") { name } }',
    'mutation { a: bump(label: "a") { name } b: maybeRefuse { name } c: bump { name } }',
    'mutation { a: bump(label: "a") { name } b: bumpLater(label: "b") { must } c: bump { name } }',
    'mutation { a: bump(label: "a") { name } b: bumpLater(label: "b") { fails } c: bump { name } }',
    "mutation { a: bumpLater { number } b: bumpLater { nullFromResolver } c: bump { name } }",
    'mutation { a: bump(label: "a") { must } }',
    'mutation { a: bump(label: "a") { name } b: bump(label: "b") { number must } }',
]

SUBSCRIPTIONS: list[tuple[str, dict[str, Any] | None]] = [
    ("subscription { count }", None),
    ("subscription { count(to: 4, failAt: 3) }", None),
    ("subscription($f: Int) { count(to: 3, failAt: $f) }", {"f": None}),
    ("subscription { items { name must later } }", None),
    ("subscription { maybeItems { name twice } }", None),
    ("subscription { items(to: 2) { nullFromResolver } }", None),
]


@pytest.mark.parametrize(("query", "variables"), QUERIES, ids=range(len(QUERIES)))
async def test_queries_answer_as_graphql_core_does(
    query: str, variables: dict[str, Any] | None
) -> None:
    mine = await ours(ENGINE, query, variables, Ledger())
    theirs = await reference(SYNTHETIC, query, variables, Ledger())
    assert_same(mine, theirs, query)


@pytest.mark.parametrize("query", MUTATIONS, ids=range(len(MUTATIONS)))
async def test_mutations_run_what_graphql_core_runs(query: str) -> None:
    """The same answer, and the same mutations ran: none after one that nulled the response."""
    mine_ran, theirs_ran = Ledger(), Ledger()
    mine = await ours(ENGINE, query, None, mine_ran)
    theirs = await reference(SYNTHETIC, query, None, theirs_ran)
    assert_same(mine, theirs, query)
    assert mine_ran.done == theirs_ran.done, query


async def test_a_mutation_that_nulls_the_response_stops_the_ones_after_it() -> None:
    ran = Ledger()
    answer = await ours(ENGINE, MUTATIONS[0], None, ran)
    assert answer["data"] is None
    assert ran.done == ["a", "refuse"]  # `c` never ran: the client was not told of it


@pytest.mark.parametrize(("query", "variables"), SUBSCRIPTIONS, ids=range(len(SUBSCRIPTIONS)))
async def test_subscriptions_stream_what_graphql_core_streams(
    query: str, variables: dict[str, Any] | None
) -> None:
    mine = await our_stream(ENGINE, query, variables, Ledger())
    theirs = await reference_stream(SYNTHETIC, query, variables, Ledger())
    assert mine == theirs, query


GENERATED = from_schema(SYNTHETIC._schema, allow_x00=False)


@settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(query=GENERATED)
async def test_generated_documents_answer_as_graphql_core_does(query: str) -> None:
    mine = await ours(ENGINE, query, None, Ledger())
    if refused_by_baton_only(mine):
        return  # a limit graphql-core does not have (argument checks, the cost budget)
    theirs = await reference(SYNTHETIC, query, None, Ledger())
    if "data" not in mine and "data" not in theirs:
        return  # both refuse; Baton's extra validation rules may word it differently
    assert_same(mine, theirs, query)
