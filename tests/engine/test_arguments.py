"""The engine's argument conversion gives every resolver what Strawberry's own would.

For every field of the schema that takes arguments, inputs are built from the GraphQL types
(every field given, and only the required ones), coerced by graphql-core as a request's are,
and converted both ways; the results must be equal, input objects, enums, lists and unset
fields included."""

from __future__ import annotations

from typing import Any

import pytest
from graphql import (
    GraphQLEnumType,
    GraphQLField,
    GraphQLInputObjectType,
    GraphQLInputType,
    GraphQLList,
    GraphQLNonNull,
    GraphQLObjectType,
    GraphQLScalarType,
    coerce_input_value,
)
from strawberry.types.arguments import convert_arguments
from strawberry.types.field import StrawberryField

from baton.api.schema import schema
from baton.engine.arguments import field_converter

SAMPLES: dict[str, Any] = {
    "String": "some text",
    "ID": "an-id",
    "Int": 7,
    "Float": 1.5,
    "Boolean": True,
    "JSON": {"k": [1, "two", None]},
    "DateTime": "2026-12-01T10:00:00+00:00",
}


def _raw(type_: GraphQLInputType, full: bool, depth: int = 0) -> Any:
    """A JSON input for `type_`: every field (`full`) or the required ones only."""
    if isinstance(type_, GraphQLNonNull):
        return _raw(type_.of_type, full, depth)
    if isinstance(type_, GraphQLList):
        return [_raw(type_.of_type, full, depth), _raw(type_.of_type, full, depth)]
    if isinstance(type_, GraphQLEnumType):
        return next(iter(type_.values))
    if isinstance(type_, GraphQLScalarType):
        return SAMPLES[type_.name]
    assert isinstance(type_, GraphQLInputObjectType)
    return {
        name: _raw(f.type, full, depth + 1)
        for name, f in type_.fields.items()
        if (full and depth < 3) or isinstance(f.type, GraphQLNonNull)
    }


def _fields() -> list[tuple[str, GraphQLField]]:
    found = []
    for type_ in schema._schema.type_map.values():
        if isinstance(type_, GraphQLObjectType) and not type_.name.startswith("__"):
            found += [(f"{type_.name}.{n}", f) for n, f in type_.fields.items() if f.args]
    return found


FIELDS = _fields()


def _named(type_: Any) -> Any:
    while isinstance(type_, GraphQLNonNull | GraphQLList):
        type_ = type_.of_type
    return type_


def test_the_fields_take_input_objects_with_lists_and_enums_inside() -> None:
    """So the comparison below covers each kind of conversion."""
    inner = [
        f.type
        for _, field in FIELDS
        for a in field.args.values()
        if isinstance(_named(a.type), GraphQLInputObjectType)
        for f in _named(a.type).fields.values()
    ]
    for kind in (GraphQLEnumType, GraphQLInputObjectType, GraphQLScalarType):
        assert any(isinstance(_named(t), kind) for t in inner), kind
    assert any(isinstance(_unwrapped(t), GraphQLList) for t in inner)


def _unwrapped(type_: Any) -> Any:
    return type_.of_type if isinstance(type_, GraphQLNonNull) else type_


@pytest.mark.parametrize("full", [True, False], ids=["every field", "required only"])
@pytest.mark.parametrize(("name", "field"), FIELDS, ids=[n for n, _ in FIELDS])
def test_arguments_convert_as_strawberry_converts_them(
    name: str, field: GraphQLField, full: bool
) -> None:
    sf = field.extensions.get("strawberry-definition")
    assert isinstance(sf, StrawberryField), name
    coerced = {
        arg_name: coerce_input_value(_raw(arg.type, full), arg.type)
        for arg_name, arg in field.args.items()
        if full or isinstance(arg.type, GraphQLNonNull)
    }
    registry = schema.schema_converter.scalar_registry
    expected = convert_arguments(
        coerced, sf.arguments, scalar_registry=registry, config=schema.config
    )
    convert = field_converter(sf, registry, schema.config)
    assert convert.__name__ == "convert", "left to Strawberry: nothing compared"
    assert convert(coerced) == expected
