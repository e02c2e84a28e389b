"""JSON Schemas of the tools' inputs, generated from the protocol tables and the task schema.

A move's input is what its GraphQL input type holds, with the same camelCase names: the
subject's `id`, `expectedVersion`, and one property per parameter the table declares
(`Move.params`), typed by its kind. Object parameters (a result, a packet, a checkpoint) take
the seed's own sub-schema from `task.schema.json`, camelCased, without what the server fills in
(`returned_by`, `returned_at`) and with the fields that have a default made optional, as the
GraphQL input types do.

Two schemas per tool: the one advertised to clients, with every bound of the seed's schema, and
its shape (types, required fields, enums, no unknown keys) that the door checks before calling
the service. Bounds are left to the service, so a value past one fails with exactly the
`invalid_input` the GraphQL API gives for it; but a whole number's range is part of its type,
as in GraphQL, whose `Int` is 32-bit: every integer is declared within `baton.inputs`'
`MIN_INT`..`MAX_INT`, and every shape holds it to that range.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from baton.inputs import MAX_INT, MIN_INT
from baton.protocol.params import Kind, Param, camel
from baton.protocol.task_object import (
    CHECKPOINT_SCHEMA,
    PACKET_SCHEMA,
    RESULT_SCHEMA,
    TASK_SCHEMA,
)

JSONSchema = dict[str, Any]

# What the server fills in, never a client: not part of an input.
SERVER_FILLED = frozenset({"returned_by", "returned_at"})
# Defaults the GraphQL input types give beside the seed's own `default`s.
API_DEFAULTS: dict[str, Any] = {"provenance": "agent_generated"}
# Keywords that bound a value rather than shape it: left to the service's checks.
BOUNDS = frozenset(
    {"minLength", "maxLength", "pattern", "minItems", "maxItems", "format", "minimum", "maximum"}
)


def camel_schema(schema: Mapping[str, Any]) -> JSONSchema:
    """`schema` with every property named in camelCase, server-filled ones dropped, and a
    property with a default (the seed's or the API's) no longer required."""
    out: JSONSchema = {}
    for key, value in schema.items():
        if key == "properties":
            out[key] = {
                camel(name): _with_default(name, camel_schema(prop))
                for name, prop in value.items()
                if name not in SERVER_FILLED
            }
        elif key == "required":
            props = schema.get("properties", {})
            out[key] = [
                camel(name)
                for name in value
                if name not in SERVER_FILLED
                and "default" not in props.get(name, {})
                and name not in API_DEFAULTS
            ]
        elif key == "items" and isinstance(value, Mapping):
            out[key] = camel_schema(value)
        elif key == "anyOf":
            out[key] = [camel_schema(branch) for branch in value]
        else:
            out[key] = value
    return out


def _with_default(name: str, prop: JSONSchema) -> JSONSchema:
    if name in API_DEFAULTS and "default" not in prop:
        return {**prop, "default": API_DEFAULTS[name]}
    return prop


def shape(schema: Any) -> Any:
    """`schema` without its bounds (see `BOUNDS`), an integer's range being GraphQL's `Int`."""
    if isinstance(schema, Mapping):
        out = {k: shape(v) for k, v in schema.items() if k not in BOUNDS}
        return {**out, **INT} if schema.get("type") == "integer" else out
    if isinstance(schema, list):
        return [shape(v) for v in schema]
    return schema


def seed_object(value: Mapping[str, Any], schema: Mapping[str, Any]) -> dict[str, Any]:
    """A camelCase input object as the seed's snake_case object, defaults filled in (the
    service takes packets and checkpoints that way). Keys the schema does not name are left
    for the service to refuse."""
    kept = _SEEDERS.get(id(schema))
    if kept is None or kept[0] is not schema:
        kept = _SEEDERS[id(schema)] = (schema, _seeder(schema))
    return kept[1](value)


Seeder = Callable[[Mapping[str, Any]], dict[str, Any]]
# A seeder per schema, made once (a call would otherwise camelCase every property name again).
_SEEDERS: dict[int, tuple[Mapping[str, Any], Seeder]] = {}


def _seeder(schema: Mapping[str, Any]) -> Seeder:
    props: Mapping[str, Any] = schema.get("properties", {})
    by_camel = {camel(name): name for name in props}
    objects: dict[str, Seeder] = {}  # properties whose value is an object of known properties
    lists: dict[str, Seeder] = {}  # properties whose value is a list of such objects
    defaults: list[tuple[str, Any]] = []
    for name, sub in props.items():
        items = sub.get("items") if isinstance(sub, Mapping) else None
        if isinstance(sub, Mapping) and "properties" in sub:
            objects[name] = _seeder(sub)
        if isinstance(items, Mapping) and "properties" in items:
            lists[name] = _seeder(items)
        if name not in SERVER_FILLED:
            if "default" in sub:
                defaults.append((name, sub["default"]))
            elif name in API_DEFAULTS:
                defaults.append((name, API_DEFAULTS[name]))

    def seed(value: Mapping[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, item in value.items():
            name = by_camel.get(key, key)
            if isinstance(item, Mapping) and name in objects:
                out[name] = objects[name](item)
            elif isinstance(item, list) and name in lists:
                inner = lists[name]
                out[name] = [inner(i) if isinstance(i, Mapping) else i for i in item]
            else:
                out[name] = item
        for name, default in defaults:
            if name not in out:
                out[name] = default
        return out

    return seed


# --- the pieces a tool's input is made of --------------------------------------------------

# A whole number, as GraphQL's `Int` takes it.
INT: JSONSchema = {"type": "integer", "minimum": MIN_INT, "maximum": MAX_INT}


def integer(minimum: int = MIN_INT, maximum: int = MAX_INT, **rest: Any) -> JSONSchema:
    """An integer property from `minimum` to `maximum`, within GraphQL's `Int`."""
    if not MIN_INT <= minimum <= maximum <= MAX_INT:
        raise ValueError(f"{minimum}..{maximum} is not within GraphQL's Int")
    return {"type": "integer", "minimum": minimum, "maximum": maximum, **rest}


_PROPS: Mapping[str, Any] = TASK_SCHEMA["properties"]

TASK_ID: JSONSchema = {"type": "string", "description": "The task's id."}
RUN_ID: JSONSchema = {"type": "string", "description": "The run's id."}
EXPECTED_VERSION: JSONSchema = integer(
    description="When given and different from the subject's version: version_conflict, "
    "and nothing changes."
)
PROJECT: JSONSchema = {**_PROPS["project"], "description": "The project (a slug)."}
HANDLE: JSONSchema = _PROPS["requester"]

# The seed's object parameters, camelCased for inputs.
OBJECTS: dict[str, JSONSchema] = {
    "result": camel_schema(RESULT_SCHEMA),
    "packet": camel_schema(PACKET_SCHEMA),
    "checkpoint": camel_schema(CHECKPOINT_SCHEMA),
}
# The seed schema each object parameter converts back to.
SEED: dict[str, Mapping[str, Any]] = {
    "result": RESULT_SCHEMA,
    "packet": PACKET_SCHEMA,
    "checkpoint": CHECKPOINT_SCHEMA,
}


def param_schema(param: Param) -> JSONSchema:
    """The JSON Schema of one move parameter, by its kind."""
    schema: JSONSchema
    if param.kind is Kind.CHOICE:
        schema = {"type": "string", "enum": [c.value for c in param.choices]}
    elif param.kind is Kind.TEXT:
        schema = {"type": "string", "minLength": 1}
    elif param.kind is Kind.TEXT_LIST:
        schema = {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1}
    elif param.kind is Kind.URL:
        schema = {"type": "string", "format": "uri"}
    else:
        schema = OBJECTS[param.name]
    return {**schema, "description": param.description} if param.description else schema


def object_schema(properties: Mapping[str, JSONSchema], required: Iterable[str] = ()) -> JSONSchema:
    return {
        "type": "object",
        "properties": dict(properties),
        "required": list(required),
        "additionalProperties": False,
    }


def move_input(
    subject: JSONSchema,
    params: Iterable[Param],
    extras: Mapping[str, tuple[JSONSchema, bool]] | None = None,
) -> JSONSchema:
    """A move's input: `id`, `expectedVersion`, its parameters, and `extras` (property name ->
    (schema, required)), which may also replace one of these."""
    props: dict[str, JSONSchema] = {"id": subject, "expectedVersion": EXPECTED_VERSION}
    required = {"id": True, "expectedVersion": False}
    for param in params:
        props[param.field] = param_schema(param)
        required[param.field] = param.required
    for name, (schema, needed) in (extras or {}).items():
        props[name] = schema
        required[name] = needed
    return object_schema(props, [k for k, needed in required.items() if needed])
