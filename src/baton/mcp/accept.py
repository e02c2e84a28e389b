"""A tool's argument shape compiled to one function that says whether arguments fit it.

jsonschema walks the schema on every call (a descent, an evolved validator and an iterator per
keyword and value): about 40 µs for a checkpoint, a tenth of what the door itself costs. Most
calls fit their shape, so the door asks the compiled function first and jsonschema only for
arguments that do not fit, for the error it names (the first one, exactly as before).

It knows the keywords shapes are made of (`baton.mcp.schemas.shape`): `type`, `properties`,
`required`, `additionalProperties`, `items`, string `enum`s, `minimum` and `maximum`, and the
annotations. A schema with any other keyword compiles to None, and the door asks jsonschema
every time. It may refuse more than jsonschema (a value of a type JSON does not make), never
less: a test holds it to jsonschema's verdict on generated values. (Arguments come from a JSON
parse; a value of another type, a subclass of `dict` or a `Decimal`, is refused here and left to
jsonschema.)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from numbers import Number
from typing import Any

Accept = Callable[[Any], bool]

# Keywords that say nothing about which values fit.
ANNOTATIONS = frozenset(
    {"description", "default", "title", "examples", "deprecated", "readOnly", "writeOnly"}
)
KNOWN = frozenset(
    {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "enum",
        "minimum",
        "maximum",
    }
)
JSON_NUMBERS = (int, float)


def _is_integer(value: Any) -> bool:
    # JSON Schema's integer (draft 6 on): a whole float counts, a bool does not.
    kind = type(value)
    return kind is int or (kind is float and value.is_integer())


TYPES: dict[str, Accept] = {
    "object": lambda value: type(value) is dict,
    "array": lambda value: type(value) is list,
    "string": lambda value: type(value) is str,
    "integer": _is_integer,
    "number": lambda value: type(value) in JSON_NUMBERS,
    "boolean": lambda value: type(value) is bool,
    "null": lambda value: value is None,
}


def compile_shape(schema: Any) -> Accept | None:
    """Whether a value fits `schema`, as one function; None when `schema` uses a keyword this
    module does not know."""
    if schema is True:
        return lambda value: True
    if schema is False:
        return lambda value: False
    if not isinstance(schema, Mapping) or not set(schema) <= KNOWN | ANNOTATIONS:
        return None
    checks: list[Accept] = []
    if "type" in schema:
        named = schema["type"]
        names = [named] if isinstance(named, str) else named
        if not isinstance(names, list) or not all(n in TYPES for n in names):
            return None
        kinds = [TYPES[n] for n in names]
        checks.append(kinds[0] if len(kinds) == 1 else lambda v: any(k(v) for k in kinds))
    if "enum" in schema:
        values = schema["enum"]
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            return None
        allowed = frozenset(values)
        checks.append(lambda v: type(v) is str and v in allowed)
    if "minimum" in schema or "maximum" in schema:
        low, high = schema.get("minimum", -math.inf), schema.get("maximum", math.inf)
        if type(low) not in JSON_NUMBERS or type(high) not in JSON_NUMBERS:
            return None
        checks.append(_range(low, high))
    if "items" in schema:
        item = compile_shape(schema["items"])
        if item is None:
            return None
        checks.append(_items(item))
    if {"properties", "required", "additionalProperties"} & set(schema):
        fields = _object(schema)
        if fields is None:
            return None
        checks.append(fields)
    return _all(checks)


def _all(checks: list[Accept]) -> Accept:
    if not checks:
        return lambda value: True
    if len(checks) == 1:
        return checks[0]
    if len(checks) == 2:
        first, second = checks
        return lambda value: first(value) and second(value)

    return lambda value: all(check(value) for check in checks)


def _range(low: float, high: float) -> Accept:
    # Applies to numbers only (not bools), as jsonschema's `minimum` and `maximum` do.
    def accept(value: Any) -> bool:
        kind = type(value)
        if kind is int or kind is float:
            return bool(low <= value <= high)
        return kind is bool or not isinstance(value, Number)

    return accept


def _items(item: Accept) -> Accept:
    def accept(value: Any) -> bool:
        if type(value) is not list:
            return not isinstance(value, list)  # applies to arrays only
        return all(map(item, value))

    return accept


def _object(schema: Mapping[str, Any]) -> Accept | None:
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    extra_schema = schema.get("additionalProperties", True)
    if not isinstance(properties, Mapping) or not isinstance(required, list):
        return None
    fields: dict[str, Accept] = {}
    for name, sub in properties.items():
        check = compile_shape(sub)
        if check is None:
            return None
        fields[name] = check
    extra = compile_shape(extra_schema)
    if extra is None:
        return None
    closed = extra_schema is False
    open_ = extra_schema is True
    needed = tuple(required)

    def accept(value: Any) -> bool:
        if type(value) is not dict:
            return not isinstance(value, dict)  # these keywords apply to objects only
        for name in needed:
            if name not in value:
                return False
        for name, item in value.items():
            check = fields.get(name)
            if check is None:
                if closed:
                    return False
                if not open_ and not extra(item):
                    return False
            elif not check(item):
                return False
        return True

    return accept
