"""The compiled argument shapes (`baton.mcp.accept`) give jsonschema's verdict: on values drawn
from every tool's shape, mostly fitting with a wrong value here and there, a compiled shape
accepts exactly what jsonschema accepts, so the door's fast path changes no answer."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from baton.mcp.accept import compile_shape
from baton.mcp.tools import TOOLS

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**40), 2**40)
    | st.floats(allow_nan=False)
    | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)


def fitting(schema: Any) -> st.SearchStrategy[Any]:
    """Values shaped by `schema`, each part of them now and then any JSON value instead."""
    return st.one_of(_shaped(schema), _shaped(schema), _shaped(schema), JSON)


def _shaped(schema: Any) -> st.SearchStrategy[Any]:
    if not isinstance(schema, dict):
        return JSON
    if "enum" in schema:
        return st.sampled_from(schema["enum"]) | st.text(max_size=3)
    kind = schema.get("type")
    if kind == "object":
        props: dict[str, Any] = schema.get("properties", {})
        required = set(schema.get("required", ()))
        return st.fixed_dictionaries(
            {name: fitting(props[name]) for name in props if name in required},
            optional={name: fitting(sub) for name, sub in props.items() if name not in required},
        ) | st.dictionaries(st.sampled_from([*props, "other"]), JSON, max_size=3)
    if kind == "array":
        return st.lists(fitting(schema.get("items", {})), max_size=3)
    if kind == "integer":
        low, high = schema.get("minimum", -(2**40)), schema.get("maximum", 2**40)
        edges = [low - 1, low, high, high + 1, float(low), low + 0.5]
        return st.integers(low, high) | st.sampled_from(edges)
    if kind == "string":
        return st.text(max_size=5)
    return JSON


@pytest.mark.parametrize("name", sorted(TOOLS))
def test_a_compiled_shape_accepts_what_jsonschema_accepts(name: str) -> None:
    tool = TOOLS[name]
    accepts = compile_shape(tool.shape)
    assert accepts is not None, f"{name}'s shape uses a keyword the compiler does not know"
    checker = Draft202012Validator(tool.shape)

    @settings(max_examples=80, deadline=None)
    @given(fitting(tool.shape))
    def agrees(value: Any) -> None:
        assert accepts(value) == checker.is_valid(value), value

    agrees()


def test_values_json_does_not_make_are_left_to_jsonschema() -> None:
    class Mapping(dict[str, Any]):
        pass

    shape = {
        "type": "object",
        "properties": {"n": {"type": "integer", "minimum": 0}},
        "additionalProperties": False,
    }
    accepts = compile_shape({"properties": shape["properties"], "additionalProperties": False})
    assert accepts is not None
    assert accepts({"n": 1}) and not accepts({"n": -1}) and not accepts({"m": 1})
    assert not accepts(Mapping(m=1))  # jsonschema would call it an object: its verdict then
    bound = compile_shape({"minimum": 0})
    assert bound is not None and not bound(Decimal(-1)) and bound(True) and bound("a")


def test_a_shape_with_an_unknown_keyword_is_not_compiled() -> None:
    assert compile_shape({"type": "string", "pattern": "^a"}) is None
    assert compile_shape({"type": "object", "properties": {"a": {"anyOf": []}}}) is None
