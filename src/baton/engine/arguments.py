"""Resolver arguments from coerced GraphQL values, converted by functions built once per field.

Strawberry's `convert_arguments` works out, for every value of every request, what kind of type
it is converting to (optional, list, leaf, enum, input object, and how each field is named).
That answer depends only on the schema, so here it is worked out once per field and kept as a
tree of small functions that do exactly what Strawberry's would. Types whose conversion has
more to it (`Maybe`, `GlobalID`, inputs that build themselves) are left to Strawberry's own,
for the whole field; the engine's differential tests hold the two to the same answers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import MISSING
from typing import Any

from strawberry.relay.types import GlobalID
from strawberry.scalars import is_scalar
from strawberry.schema.config import StrawberryConfig
from strawberry.types.arguments import convert_arguments
from strawberry.types.base import (
    StrawberryList,
    StrawberryMaybe,
    StrawberryOptional,
    StrawberryType,
    has_object_definition,
)
from strawberry.types.enum import StrawberryEnumDefinition, has_enum_definition
from strawberry.types.field import StrawberryField
from strawberry.types.lazy_type import LazyType
from strawberry.types.scalar import ScalarDefinition, ScalarWrapper
from strawberry.types.unset import UNSET

Convert = Callable[[Any], Any]
Registry = Mapping[object, ScalarWrapper | ScalarDefinition]


class _Unsupported(Exception):
    """A type whose conversion is left to Strawberry."""


def field_converter(
    sf: StrawberryField, registry: Registry, config: StrawberryConfig
) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """Coerced arguments (GraphQL names) -> the resolver's keyword arguments (Python names)."""
    build = _Builder(registry, config)
    try:
        parts = [
            (config.name_converter.from_argument(a), a.python_name, build.converter(a.type))
            for a in sf.arguments
        ]
    except _Unsupported:

        def by_strawberry(coerced: dict[str, Any]) -> dict[str, Any]:
            return convert_arguments(coerced, sf.arguments, scalar_registry=registry, config=config)

        return by_strawberry

    def convert(coerced: dict[str, Any]) -> dict[str, Any]:
        return {python: conv(coerced[name]) for name, python, conv in parts if name in coerced}

    return convert


def _identity(value: Any) -> Any:
    return value


def _passing(convert: Convert) -> Convert:
    """`convert`, with None and UNSET passed through as they are."""

    def converted(value: Any) -> Any:
        return value if value is None or value is UNSET else convert(value)

    return converted


class _Builder:
    def __init__(self, registry: Registry, config: StrawberryConfig) -> None:
        self.registry = registry
        self.config = config
        self._objects: dict[type, Convert] = {}

    def is_leaf(self, type_: Any) -> bool:
        if isinstance(type_, LazyType):
            return self.is_leaf(type_.resolve_type())
        if type_ is GlobalID:
            return False
        return is_scalar(type_, self.registry) or isinstance(type_, StrawberryEnumDefinition)

    def converter(self, type_: StrawberryType | type) -> Convert:
        """What Strawberry's `convert_argument` does for `type_`, as one function."""
        if isinstance(type_, StrawberryMaybe) or type_ is GlobalID:
            raise _Unsupported(type_)
        if isinstance(type_, StrawberryOptional):
            return self.converter(type_.of_type)
        if isinstance(type_, LazyType):
            return self.converter(type_.resolve_type())
        if isinstance(type_, StrawberryList):
            item = type_.of_type
            if self.is_leaf(item) or (
                isinstance(item, StrawberryOptional) and self.is_leaf(item.of_type)
            ):
                # Copied: graphql-core gives every request that omits it the same default.
                return _passing(list)
            each = self.converter(item)
            return _passing(lambda values: [each(v) for v in values])
        if self.is_leaf(type_) or has_enum_definition(type_):
            return _identity
        if has_object_definition(type_):
            return _passing(self._input_object(type_))
        raise _Unsupported(type_)

    def _input_object(self, cls: type) -> Convert:
        built = self._objects.get(cls)
        if built is not None:
            return built
        definition = cls.__strawberry_definition__  # type: ignore[attr-defined]
        if definition.from_input is not None:
            raise _Unsupported(cls)
        fields: list[tuple[str, str, Convert]] = []

        def convert(value: Mapping[str, Any]) -> Any:
            kwargs = dict(implicit)
            for name, python, conv in fields:
                if name in value:
                    kwargs[python] = conv(value[name])
            return cls(**kwargs)

        # Kept before its fields are built, so an input that contains itself converts.
        self._objects[cls] = convert
        # Fields with no default are None unless given (graphql-core has already checked that
        # every required field is present).
        implicit = (
            {
                f.python_name: None
                for f in definition.fields
                if f.default_value is MISSING and f.default_factory is MISSING
            }
            if definition.is_input
            else {}
        )
        for f in definition.fields:
            fields.append(
                (
                    self.config.name_converter.from_field(f),
                    f.python_name,
                    self.converter(f.resolve_type(type_definition=definition)),
                )
            )
        return convert
