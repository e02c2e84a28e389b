"""One typed mutation per move of a lifecycle, generated from its table.

Each move's mutation takes one argument, `input`: the subject's `id`, `expectedVersion`, and a
field for every parameter the table declares for the move (`Move.params`), typed by its kind.
Tasks and runs both get their move mutations here.

Deliberately no `from __future__ import annotations`: the generated resolvers' annotations
must be real types for Strawberry to read.
"""

import types
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any, cast

import strawberry
from strawberry.types import Info
from strawberry.types.field import StrawberryField

from baton.protocol.machine import Machine
from baton.protocol.params import Kind, Param


@dataclass(frozen=True)
class ObjectParam:
    """How an OBJECT parameter appears: its input type, and how its value becomes the plain
    object the service takes."""

    input_type: type
    to_value: Callable[[Any], Any]


# A field of a generated input type: (annotation, strawberry field).
InputField = tuple[Any, Any]
Resolve = Callable[[Info[Any, None], Enum, Any, dict[str, Any]], Awaitable[Any]]


def _annotation(param: Param, objects: Mapping[str, ObjectParam]) -> Any:
    base: Any
    if param.kind is Kind.CHOICE:
        base = param.enum
    elif param.kind is Kind.OBJECT:
        base = objects[param.name].input_type
    elif param.kind is Kind.TEXT_LIST:
        base = list[str]
    else:
        base = str
    return base if param.required else base | None


def _field(param: Param) -> Any:
    if param.required:
        return strawberry.field(name=param.field, description=param.description)
    return strawberry.field(name=param.field, default=None, description=param.description)


def input_type(
    name: str,
    subject: str,
    params: Iterable[Param],
    objects: Mapping[str, ObjectParam],
    *,
    extras: Mapping[str, InputField] | None = None,
) -> type:
    """`<Name>Input`: id, expectedVersion, each parameter, and any `extras` (which may also
    replace one of these)."""
    fields: dict[str, InputField] = {
        "id": (strawberry.ID, strawberry.field(description=f"The {subject}.")),
        "expected_version": (
            int | None,
            strawberry.field(
                default=None, description="When given and different, VersionConflictError."
            ),
        ),
    }
    for param in params:
        fields[param.name] = (_annotation(param, objects), _field(param))
    fields.update(extras or {})
    namespace: dict[str, Any] = {key: spec[1] for key, spec in fields.items()}
    namespace["__annotations__"] = {key: spec[0] for key, spec in fields.items()}
    cls = types.new_class(name, (), {}, lambda ns: ns.update(namespace))
    return strawberry.input(cls)


def move_fields(
    machine: Machine[Any, Any, Any],
    *,
    subject: str,
    result: Any,
    resolve: Resolve,
    describe: Callable[[Any], str],
    objects: Mapping[str, ObjectParam] | None = None,
    extras: Mapping[Any, Mapping[str, InputField]] | None = None,
) -> list[StrawberryField]:
    """A mutation for every move name of `machine`, in table order; `resolve` gets the move's
    name, its input and its arguments by parameter name (as plain values)."""
    kinds = objects or {}
    out = []
    for name in machine.names():
        move = machine.named(name)[0]
        mutation = move.mutation
        type_ = input_type(
            mutation[0].upper() + mutation[1:] + "Input",
            subject,
            move.params,
            kinds,
            extras=(extras or {}).get(name),
        )
        out.append(_mutation(mutation, name, move.params, type_, result, resolve, describe, kinds))
    return out


def _mutation(
    mutation: str,
    name: Enum,
    params: tuple[Param, ...],
    input_type: type,
    result: Any,
    resolve: Resolve,
    describe: Callable[[Any], str],
    objects: Mapping[str, ObjectParam],
) -> StrawberryField:
    async def resolver(info: Info[Any, None], input: Any) -> Any:
        args = {}
        for param in params:
            value = getattr(input, param.name)
            if value is not None and param.kind is Kind.OBJECT:
                value = objects[param.name].to_value(value)
            args[param.name] = value
        return await resolve(info, name, input, args)

    resolver.__annotations__["input"] = input_type
    resolver.__annotations__["return"] = result
    resolver.__name__ = resolver.__qualname__ = mutation  # the field's Python name, kept unique
    field = strawberry.mutation(resolver=resolver, name=mutation, description=describe(name))
    return cast(StrawberryField, field)
