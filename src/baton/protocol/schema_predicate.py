"""A JSON Schema compiled once into a Python predicate: is this value valid?

`jsonschema` walks the schema for every value it checks (a dispatch per keyword, a new
validator per level): about 60 us for a hand-off's packet, on every hand-off. Valid input is
the common case and needs only a yes, so the schema is compiled into nested closures for the
keywords the task schema uses; a value found invalid is checked again by `jsonschema`, which
names the offending field. A keyword outside that set makes `compile_schema` refuse, and the
caller then uses `jsonschema` alone. A differential test holds the two to the same answers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

Valid = Callable[[Any], bool]
Formats = Callable[[Any, str], bool]  # (value, format) -> conforms
Pattern = Callable[[str], Callable[[str], object]]  # pattern -> search


class Unsupported(Exception):
    """The schema uses a keyword this compiler does not know."""


# Keywords with no bearing on validity.
_ANNOTATIONS = frozenset({"$schema", "default", "description", "title", "examples"})

_TYPES: dict[str, Valid] = {
    "string": lambda v: isinstance(v, str),
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    # As jsonschema: booleans are not numbers, and 1.0 is an integer.
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "integer": lambda v: (
        (isinstance(v, int) and not isinstance(v, bool))
        or (isinstance(v, float) and v.is_integer())
    ),
}


def compile_schema(schema: Mapping[str, Any], formats: Formats, pattern: Pattern) -> Valid:
    """The predicate `schema` defines; `formats` and `pattern` are the ones the validator it
    stands in for uses. `Unsupported` when the schema needs more than this compiler knows."""
    checks = [_keyword(k, v, schema, formats, pattern) for k, v in schema.items()]
    return _all([c for c in checks if c is not None])


def _all(tests: list[Valid]) -> Valid:
    """A value passes every one of `tests`. Loops, not `all(…)` over a generator: these run
    for every field of every input checked, and a generator costs more than the test."""
    if len(tests) == 1:
        return tests[0]

    def valid(value: Any) -> bool:
        for test in tests:  # noqa: SIM110  # a loop: `all` over a generator costs more
            if not test(value):
                return False
        return True

    return valid


def _keyword(
    key: str, arg: Any, schema: Mapping[str, Any], formats: Formats, pattern: Pattern
) -> Valid | None:
    if key in _ANNOTATIONS:
        return None
    if key == "type":
        kinds = [_TYPES[t] for t in ([arg] if isinstance(arg, str) else arg)]
        if len(kinds) == 1:
            return kinds[0]
        return lambda v: any(kind(v) for kind in kinds)
    if key == "enum":
        if not all(isinstance(e, str) for e in arg):
            raise Unsupported("enum of values other than strings")
        members = frozenset(arg)
        return lambda v: _in(v, members)
    if key in ("maxLength", "minLength"):
        bound = int(arg)
        if key == "maxLength":
            return lambda v: not isinstance(v, str) or len(v) <= bound
        return lambda v: not isinstance(v, str) or len(v) >= bound
    if key in ("maxItems", "minItems"):
        bound = int(arg)
        if key == "maxItems":
            return lambda v: not isinstance(v, list) or len(v) <= bound
        return lambda v: not isinstance(v, list) or len(v) >= bound
    if key == "pattern":
        search = pattern(arg)
        return lambda v: not isinstance(v, str) or search(v) is not None
    if key == "format":
        name = str(arg)
        return lambda v: formats(v, name)
    if key == "required":
        names = tuple(arg)
        return lambda v: not isinstance(v, dict) or all(n in v for n in names)
    if key == "properties":
        props = {name: compile_schema(sub, formats, pattern) for name, sub in arg.items()}

        def properties(v: Any) -> bool:
            if isinstance(v, dict):
                for k, item in v.items():
                    prop = props.get(k)
                    if prop is not None and not prop(item):
                        return False
            return True

        return properties
    if key == "additionalProperties":
        if arg is not False or "patternProperties" in schema:
            raise Unsupported("additionalProperties other than false")
        known = frozenset(schema.get("properties", {}))
        return lambda v: not isinstance(v, dict) or known.issuperset(v)
    if key == "items":
        if not isinstance(arg, Mapping) or "prefixItems" in schema:
            raise Unsupported("items other than one schema")
        each = compile_schema(arg, formats, pattern)

        def items(v: Any) -> bool:
            if isinstance(v, list):
                for item in v:
                    if not each(item):
                        return False
            return True

        return items
    if key == "anyOf":
        options = [compile_schema(sub, formats, pattern) for sub in arg]
        return lambda v: any(option(v) for option in options)
    raise Unsupported(key)


def _in(value: Any, members: frozenset[str]) -> bool:
    # As jsonschema's `enum`: equal to a member; only strings equal strings.
    return isinstance(value, str) and value in members
