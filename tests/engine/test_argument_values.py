"""The engine's argument coercion (`baton.engine.argument_values`) answers what graphql-core's
`get_argument_values` answers: the same dict, keys in the same order, for arguments that
coerce, and graphql-core's own error otherwise.

Documents are generated for every field of the schema that takes arguments, mixing literals,
variables (given, absent, null, of the wrong type, with operation defaults), variables inside
input object and list literals, and argument defaults. A small built schema adds what Baton's
does not have: lists of nullable items, `@oneOf` inputs, an input with its own `out_type`, a
custom scalar given literals with variables, invalid defaults.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from graphql import (
    FieldNode,
    GraphQLEnumType,
    GraphQLError,
    GraphQLField,
    GraphQLInputObjectType,
    GraphQLInputType,
    GraphQLList,
    GraphQLNonNull,
    GraphQLObjectType,
    GraphQLScalarType,
    GraphQLSchema,
    OperationDefinitionNode,
    build_schema,
    parse,
    type_from_ast,
)
from graphql.execution.values import VariableValues, get_argument_values, get_variable_values
from graphql.type.definition import is_required_argument, is_required_input_field

import baton.engine.argument_values as argument_values
from baton.api.schema import schema
from baton.engine.argument_values import ArgumentValues
from baton.services.tasks import TaskService
from tests.engine.differential import ours, reference
from tests.engine.test_variables import value_for
from tests.helpers import ENGINE, agent, context

SCHEMA = schema._schema


def fields_with_arguments(s: GraphQLSchema) -> list[tuple[str, GraphQLField]]:
    return sorted(
        (f"{t.name}.{name}", f)
        for t in s.type_map.values()
        if isinstance(t, GraphQLObjectType) and not t.name.startswith("__")
        for name, f in t.fields.items()
        if f.args
    )


FIELDS = fields_with_arguments(SCHEMA)


class Fallbacks:
    """Counts the calls that went to graphql-core."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, *args: Any) -> Any:
        self.count += 1
        return get_argument_values(*args)


@pytest.fixture
def fallbacks(monkeypatch: pytest.MonkeyPatch) -> Fallbacks:
    counter = Fallbacks()
    monkeypatch.setattr(argument_values, "get_argument_values", counter)
    return counter


# --- generated documents ----------------------------------------------------------------------

SCALARS: dict[str, tuple[list[str], list[str]]] = {  # literals that coerce, and some that do not
    "String": (['"s"', '""', json.dumps("ünï")], ["7"]),
    "ID": (['"id"', "7"], ["1.5"]),
    "Int": (["0", "7", "-3"], ["2147483648", '"7"']),
    "Float": (["1.5", "2"], ['"x"']),
    "Boolean": (["true", "false"], ["1"]),
    "DateTime": (['"2026-01-01T00:00:00+00:00"'], ['"not a date"', "3"]),
}
OTHER_SCALAR = (['{a: [1, "x"]}', '"text"', "4"], [])
JUNK = ['"x"', "3", "1.5", "true", "{nope: 1}", "[1, 2]", "NOT_A_MEMBER", "null"]
WRONG_TYPES = ["String", "Int!", "[String]", "Boolean", "ID!"]


class Generator:
    """One document's arguments, and the variables they declare. A sloppy document also has
    what validation would refuse (nulls, junk, missing or unknown names, variables of the
    wrong type) or graphql-core's coercion does."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.sloppy = rng.random() < 0.35
        self.declared: dict[str, str] = {}  # name -> its definition: `Type` or `Type = default`

    def chance(self, p: float) -> bool:
        """True with probability `p`, in a sloppy document only."""
        return self.sloppy and self.rng.random() < p

    def variable(self, t: GraphQLInputType) -> str:
        rng = self.rng
        name = f"v{len(self.declared)}"
        r = rng.random()
        if r < 0.2 and isinstance(t, GraphQLNonNull):
            declared = str(t.of_type)  # null may reach the argument (valid next to a default)
        elif r < 0.3 and not isinstance(t, GraphQLNonNull):
            declared = f"{t}!"
        elif self.chance(0.1):
            declared = rng.choice(WRONG_TYPES)
        else:
            declared = str(t)
        if rng.random() < 0.12 and declared == str(t):
            declared += f" = {self.literal(t, 2, variables=False)}"
        self.declared[name] = declared
        return f"${name}"

    def literal(self, t: GraphQLInputType, depth: int = 0, variables: bool = True) -> str:
        rng = self.rng
        if variables and rng.random() < 0.3:
            return self.variable(t)
        if (not isinstance(t, GraphQLNonNull) and rng.random() < 0.05) or self.chance(0.04):
            return "null"
        if self.chance(0.03):
            return rng.choice(JUNK)
        if variables and self.chance(0.03):
            # a list or an object holding a variable, where the type wants something else
            inner = self.variable(t)
            return rng.choice([f"[{inner}]", f"{{a: {inner}}}"])
        if isinstance(t, GraphQLNonNull):
            return self.literal(t.of_type, depth, variables)
        if isinstance(t, GraphQLList):
            if rng.random() < 0.15:
                return self.literal(t.of_type, depth + 1, variables)  # a list of one
            items = [
                self.literal(t.of_type, depth + 1, variables) for _ in range(rng.randint(0, 3))
            ]
            return f"[{', '.join(items)}]"
        if isinstance(t, GraphQLInputObjectType):
            parts = []
            for name, field in t.fields.items():
                if is_required_input_field(field):
                    if not self.chance(0.1):
                        parts.append(f"{name}: {self.literal(field.type, depth + 1, variables)}")
                elif depth < 4 and rng.random() < 0.5:
                    parts.append(f"{name}: {self.literal(field.type, depth + 1, variables)}")
            if self.chance(0.05):
                parts.append("nope: 1")
            if parts and self.chance(0.05):
                parts.append(parts[0])  # a field given twice: graphql-core takes the last
            rng.shuffle(parts)
            return f"{{{', '.join(parts)}}}"
        if isinstance(t, GraphQLEnumType):
            if self.chance(0.1):
                return rng.choice(["NOT_A_MEMBER", '"quoted"'])
            return rng.choice(list(t.values))
        assert isinstance(t, GraphQLScalarType)
        if variables and (self.chance(0.1) or (t.name == "Json" and rng.random() < 0.3)):
            # a scalar given a list or an object that holds a variable
            inner = self.variable(t)
            return rng.choice([f"[{inner}]", f"{{a: {inner}}}"])
        valid, invalid = SCALARS.get(t.name, OTHER_SCALAR)
        return rng.choice(invalid if invalid and self.chance(0.2) else valid)

    def arguments(self, definition: GraphQLField) -> str:
        rng = self.rng
        given = []
        for name, argument in definition.args.items():
            # An absent argument takes its default; a required one, graphql-core's error.
            keep = not self.chance(0.1) if is_required_argument(argument) else rng.random() < 0.75
            if keep:
                given.append(f"{name}: {self.literal(argument.type)}")
        if given and self.chance(0.05):
            given.append(given[0])  # an argument given twice
        if self.chance(0.05):
            given.append("nope: 1")
        rng.shuffle(given)
        return ", ".join(given)


def generated(
    s: GraphQLSchema, definition: GraphQLField, rng: random.Random
) -> tuple[OperationDefinitionNode, FieldNode]:
    g = Generator(rng)
    arguments = g.arguments(definition)
    declared = ", ".join(f"${name}: {d}" for name, d in g.declared.items())
    variables = f"({declared})" if declared else ""
    # Coercion reads the field's arguments, not its name: every document selects `f`.
    query = f"query{variables} {{ f{f'({arguments})' if arguments else ''} }}"
    operation = parse(query).definitions[0]
    assert isinstance(operation, OperationDefinitionNode)
    node = operation.selection_set.selections[0]
    assert isinstance(node, FieldNode)
    return operation, node


def variable_values(
    s: GraphQLSchema, operation: OperationDefinitionNode, rng: random.Random
) -> Iterator[VariableValues | None]:
    """The variables of several requests: coerced by graphql-core, given or absent or null;
    where they do not coerce, their raw values as if they had (a variable of the wrong type)."""
    definitions = operation.variable_definitions or ()
    yield None
    for _ in range(4):
        raw: dict[str, Any] = {}
        for d in definitions:
            r = rng.random()
            if r < 0.15:
                continue
            t = type_from_ast(s, d.type)
            raw[d.variable.name.value] = None if r < 0.25 or t is None else value_for(t, rng)
        try:
            coerced = get_variable_values(s, definitions, raw)
        except TypeError:  # graphql-core, meeting an invalid default of an input field
            coerced = []
        yield coerced if isinstance(coerced, VariableValues) else VariableValues({}, raw)


def outcome(call: Callable[[], dict[str, Any]]) -> tuple[Any, ...]:
    try:
        coerced = call()
    except Exception as error:
        return ("raised", type(error), str(error))
    return ("coerced", coerced, repr(coerced))  # the repr holds the order of keys


def assert_same(definition: GraphQLField, node: FieldNode, vv: VariableValues | None) -> None:
    compiled = ArgumentValues(definition, node)
    theirs = outcome(lambda: get_argument_values(definition, node, vv))
    assert outcome(lambda: compiled(vv)) == theirs


@pytest.mark.parametrize(("name", "definition"), FIELDS, ids=[name for name, _ in FIELDS])
def test_every_field_coerces_its_arguments_as_graphql_core(
    name: str, definition: GraphQLField, fallbacks: Fallbacks
) -> None:
    rng = random.Random(name)
    calls = 0
    for _ in range(150):
        operation, node = generated(SCHEMA, definition, rng)
        for vv in variable_values(SCHEMA, operation, rng):
            assert_same(definition, node, vv)
            calls += 1
    assert fallbacks.count < calls * 0.75, "the fast path is taken for a good share"


# --- a built schema, for what Baton's does not have ---------------------------------------------

BUILT = build_schema(
    """
    scalar Json
    enum Color { RED GREEN }
    input Point { x: Int!, y: Int = 3, tags: [String], color: Color = GREEN, z: Int! = 0 }
    input Pick @oneOf { a: Int, b: String }
    input Wrapped { point: Point, points: [Point!], picks: [Pick], grid: [[Int]] }
    input Broken { n: Int = "not an int" }
    input Twin { a: Int, b: Int }
    type Query {
      f(
        items: [Int], strict: [Int!]!, point: Point, wrapped: Wrapped, color: Color = RED,
        n: Int! = 7
      ): Int
      g(bad: Int = "nope", n: Int, point: Point): Int
      h(pick: Pick, json: Json, broken: Broken, n: Int, twin: Twin): Int
    }
    """
)


def input_type(name: str) -> GraphQLInputObjectType:
    found = BUILT.type_map[name]
    assert isinstance(found, GraphQLInputObjectType)
    return found


# Python names (graphql-core's `out_name`): an argument's, an input field's, and two fields of
# one input that share one; and an input object made into something else than a dict (set as
# graphql-core's extension point is: an attribute over the static method, hence the ignore).
assert BUILT.query_type is not None
BUILT.query_type.fields["f"].args["n"].out_name = "count"
input_type("Point").fields["y"].out_name = "why"
input_type("Twin").fields["b"].out_name = "a"
input_type("Wrapped").out_type = lambda value: ("wrapped", sorted(value.items(), key=repr))  # type: ignore[method-assign]
BUILT_FIELDS = fields_with_arguments(BUILT)


@pytest.mark.parametrize(("name", "definition"), BUILT_FIELDS, ids=[n for n, _ in BUILT_FIELDS])
def test_a_built_schema_coerces_as_graphql_core(name: str, definition: GraphQLField) -> None:
    rng = random.Random(name)
    for _ in range(1000):
        operation, node = generated(BUILT, definition, rng)
        for vv in variable_values(BUILT, operation, rng):
            assert_same(definition, node, vv)


def argument_values_of(
    s: GraphQLSchema, query: str, inputs: dict[str, Any]
) -> tuple[GraphQLField, FieldNode, VariableValues]:
    operation = parse(query).definitions[0]
    assert isinstance(operation, OperationDefinitionNode)
    node = operation.selection_set.selections[0]
    assert isinstance(node, FieldNode)
    root = s.mutation_type if operation.operation.value == "mutation" else s.query_type
    assert root is not None
    coerced = get_variable_values(s, operation.variable_definitions, inputs)
    assert isinstance(coerced, VariableValues)
    return root.fields[node.name.value], node, coerced


# --- cases by hand --------------------------------------------------------------------------------

W2 = (
    "query($v: String) { tasks(filter: {project: $v, states: [working]}, first: 50) "
    "{ totalCount } }"
)


@pytest.mark.parametrize("inputs", [{"v": "p1"}, {}, {"v": None}], ids=["given", "absent", "null"])
def test_a_variable_in_an_input_object_literal_takes_the_fast_path(
    inputs: dict[str, Any], fallbacks: Fallbacks
) -> None:
    definition, node, vv = argument_values_of(SCHEMA, W2, inputs)
    compiled = ArgumentValues(definition, node)
    coerced = compiled(vv)
    assert fallbacks.count == 0
    assert coerced == get_argument_values(definition, node, vv)
    assert coerced["filter"]["project"] == inputs.get("v")
    assert coerced["first"] == 50 and coerced["after"] is None


CASES = [
    # an absent variable: the argument's default, or the input field's, or nothing
    ("query($f: Int) { tasks(first: $f) { totalCount } }", {}, {"first": 50}),
    (
        "mutation($p: Int) { setGateRule(input: {decision: ALLOW, priority: $p}) { __typename } }",
        {},
        {"input.priority": 0, "input.requester": "*/*"},
    ),
    (
        "mutation($o: String) { setGateRule(input: {decision: DENY, owner: $o}) { __typename } }",
        {},
        {"input.owner": None},
    ),
    (
        "query($o: String) { gateRules(owner: $o) { id } }",
        {},
        {"owner": None},
    ),
    # a given variable as it is, next to defaults and constants
    (
        "query($ids: [ID!]!, $d: Int) { taskGraph(ids: $ids, depth: $d) { cycles } }",
        {"ids": ["a"], "d": 2},
        {"ids": ["a"], "depth": 2, "first": 200},
    ),
    (
        'query($id: ID!) { taskGraph(ids: [$id, "b"]) { cycles } }',
        {"id": "a"},
        {"ids": ["a", "b"], "depth": 10},
    ),
    (
        'query($s: [TaskState!]) { tasks(filter: {states: $s, project: "p"}) { totalCount } }',
        {"s": ["working"]},
        {"filter.project": "p", "filter.requester": None, "first": 50},
    ),
]


def at(value: Any, path: str) -> Any:
    for key in path.split("."):
        value = value[key]
    return value


@pytest.mark.parametrize(("query", "inputs", "expected"), CASES, ids=range(len(CASES)))
def test_variables_and_defaults_coerce_without_graphql_core(
    query: str, inputs: dict[str, Any], expected: dict[str, Any], fallbacks: Fallbacks
) -> None:
    definition, node, vv = argument_values_of(SCHEMA, query, inputs)
    coerced = ArgumentValues(definition, node)(vv)
    assert fallbacks.count == 0
    assert coerced == get_argument_values(definition, node, vv)
    for path, value in expected.items():
        assert at(coerced, path) == value, path


def test_absent_items_of_a_list_of_nullable_items_are_null(fallbacks: Fallbacks) -> None:
    query = "query($a: Int, $b: Int) { f(items: [$a, 1, $b], strict: [2]) }"
    definition, node, vv = argument_values_of(BUILT, query, {"b": None})
    coerced = ArgumentValues(definition, node)(vv)
    assert fallbacks.count == 0
    assert coerced == get_argument_values(definition, node, vv)
    assert coerced["items"] == [None, 1, None]


BAD = [
    # a null variable for a non-null argument with a default
    ("query($f: Int) { tasks(first: $f) { totalCount } }", {"f": None}),
    # a null variable for a non-null input field with a default, inside a literal
    (
        'mutation($g: Int) { rotateWebhookSecret(input: {id: "x", graceSeconds: $g}) { '
        "__typename } }",
        {"g": None},
    ),
]


@pytest.mark.parametrize(("query", "inputs"), BAD, ids=range(len(BAD)))
def test_a_bad_argument_raises_graphql_cores_own_error(
    query: str, inputs: dict[str, Any], fallbacks: Fallbacks
) -> None:
    definition, node, vv = argument_values_of(SCHEMA, query, inputs)
    with pytest.raises(GraphQLError) as theirs:
        get_argument_values(definition, node, vv)
    with pytest.raises(GraphQLError) as ours_:
        ArgumentValues(definition, node)(vv)
    assert fallbacks.count == 1
    assert ours_.value.message == theirs.value.message
    assert "not to be None" in ours_.value.message


async def test_a_bad_argument_answers_graphql_cores_error_through_the_engine(
    service: TaskService,
) -> None:
    query, inputs = BAD[1]
    principal = agent("tester")
    answer = await ours(ENGINE, query, inputs, context(principal, service))
    assert answer == await reference(schema, query, inputs, context(principal, service))
    [error] = answer["errors"]
    assert error["path"] == ["rotateWebhookSecret"]
    assert error["message"] == (
        "Argument 'input' has invalid value at .graceSeconds: "
        "Expected variable '$g' provided to non-null type 'Int!' not to be None."
    )
