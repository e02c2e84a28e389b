"""The engine's variable coercion answers what graphql-core's `get_variable_values` answers:
the same coerced values and sources for variables that coerce, the same errors otherwise."""

from __future__ import annotations

import random
from typing import Any

import pytest
from graphql import (
    GraphQLEnumType,
    GraphQLInputObjectType,
    GraphQLInputType,
    GraphQLList,
    GraphQLNonNull,
    GraphQLScalarType,
    is_input_type,
    parse,
)
from graphql.execution.values import VariableValues, get_variable_values

from baton.api.schema import schema
from baton.engine.variables import Coercer

SCHEMA = schema._schema
INPUT_TYPES = sorted(
    (t for t in SCHEMA.type_map.values() if is_input_type(t) and not t.name.startswith("__")),
    key=lambda t: t.name,
)
JUNK: list[Any] = [None, "", "x", 0, -1, 1.5, True, [], [None], {}, {"nope": 1}, ["a", 2]]


def scalar(t: GraphQLScalarType, rng: random.Random) -> Any:
    return {
        "String": rng.choice(["s", "", "ünï"]),
        "ID": rng.choice(["id", "7"]),
        "Int": rng.choice([0, 3, 2**31]),
        "Float": rng.choice([1.5, 2]),
        "Boolean": rng.choice([True, False]),
    }.get(t.name, rng.choice([{"any": ["json"]}, "text", 4, None]))


def value_for(t: GraphQLInputType, rng: random.Random, depth: int = 0) -> Any:
    """Mostly a value of type `t`, now and then not."""
    if rng.random() < 0.04:
        return rng.choice(JUNK)
    if isinstance(t, GraphQLNonNull):
        return value_for(t.of_type, rng, depth)
    if rng.random() < 0.05:
        return None
    if isinstance(t, GraphQLList):
        if rng.random() < 0.1:
            return value_for(t.of_type, rng, depth + 1)  # a list of one, unwrapped
        return [value_for(t.of_type, rng, depth + 1) for _ in range(rng.randint(0, 3))]
    if isinstance(t, GraphQLInputObjectType):
        out = {}
        for name, field in t.fields.items():
            required = isinstance(field.type, GraphQLNonNull) and field.default is None
            if (required and rng.random() < 0.97) or (depth < 4 and rng.random() < 0.5):
                out[name] = value_for(field.type, rng, depth + 1)
        if rng.random() < 0.03:
            out["unknownField"] = 1
        return out
    if isinstance(t, GraphQLEnumType):
        return rng.choice([*t.values, "NOT_A_MEMBER"])
    assert isinstance(t, GraphQLScalarType)
    return scalar(t, rng)


def same(ours: Any, theirs: Any) -> None:
    if isinstance(theirs, list):
        assert isinstance(ours, list)
        assert [e.message for e in ours] == [e.message for e in theirs]
        return
    assert isinstance(ours, VariableValues) and isinstance(theirs, VariableValues)
    assert ours.coerced == theirs.coerced
    assert list(ours.sources) == list(theirs.sources)
    for name, source in theirs.sources.items():
        mine = ours.sources[name]
        assert mine.value == source.value
        assert mine.signature.name == source.signature.name
        assert str(mine.signature.type) == str(source.signature.type)
        assert mine.signature.default == source.signature.default


@pytest.mark.parametrize("input_type", INPUT_TYPES, ids=lambda t: t.name)
def test_every_input_type_coerces_as_graphql_core(input_type: GraphQLInputType) -> None:
    name = getattr(input_type, "name", "")
    document = parse(
        f"query($a: {name}!, $b: {name}, $c: [{name}!], $d: [{name}]!) {{ __typename }}"
    )
    definitions = document.definitions[0].variable_definitions  # type: ignore[attr-defined]
    coercer = Coercer(SCHEMA, definitions, max_errors=20)
    rng = random.Random(name)
    for _ in range(120):
        variables = {
            "a": value_for(GraphQLNonNull(input_type), rng),  # type: ignore[arg-type]
            "b": value_for(input_type, rng),
            "c": value_for(GraphQLList(GraphQLNonNull(input_type)), rng),  # type: ignore[arg-type]
            "d": value_for(GraphQLNonNull(GraphQLList(input_type)), rng),
        }
        for dropped in ([], ["b"], ["a"], ["c", "d"]):
            given = {k: v for k, v in variables.items() if k not in dropped}
            same(coercer(given), get_variable_values(SCHEMA, definitions, given, max_errors=20))


def test_defaults_and_unknown_types_go_to_graphql_core() -> None:
    document = parse('query($a: String = "x", $b: NoSuchType) { __typename }')
    definitions = document.definitions[0].variable_definitions  # type: ignore[attr-defined]
    coercer = Coercer(SCHEMA, definitions, max_errors=20)
    for given in ({}, {"a": None}, {"a": "y", "b": 1}):
        same(coercer(given), get_variable_values(SCHEMA, definitions, given, max_errors=20))
