"""The compiled schema predicates answer what `jsonschema` answers, on every schema the task
object has (the whole task, packet, result, checkpoint, and each top-level property)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from baton.protocol import task_object
from baton.protocol.schema_predicate import Unsupported, compile_schema
from tests.helpers import packet, result

NAMES = ["task", "packet", "result", "checkpoint"] + [
    f"property:{name}" for name in task_object.TASK_SCHEMA["properties"]
]

_leaf = (
    st.none()
    | st.booleans()
    | st.integers(-2, 2)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=4)
)
ANY_JSON = st.recursive(
    _leaf,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=6,
)
SAMPLE_STRINGS = [
    "https://example.com/a",
    "mailto:a@b.c",
    "not a uri",
    "x:",
    "2026-12-01T10:00:00Z",
    "req/agent",
    "own",
    "a\n",
    "٣",
    "",
]


def _kinds(schema: Mapping[str, Any]) -> list[str]:
    kind = schema.get("type", [])
    return [kind] if isinstance(kind, str) else list(kind)


def valid(schema: Mapping[str, Any]) -> st.SearchStrategy[Any]:
    """Values `schema` allows (or close to it: `near` filters what it must)."""
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if "anyOf" in schema:
        return st.one_of([valid(sub) for sub in schema["anyOf"]])
    options: list[st.SearchStrategy[Any]] = []
    for kind in _kinds(schema):
        if kind == "string":
            least, most = schema.get("minLength", 0), schema.get("maxLength", 8)
            if "pattern" in schema:
                options.append(st.from_regex(schema["pattern"], fullmatch=True))
            elif schema.get("format") == "uri":
                options.append(st.sampled_from(["https://example.com/a", "mailto:a@b.c"]))
            else:
                options += [st.text(min_size=least, max_size=min(most, 8)), st.just("é" * most)]
        elif kind in ("integer", "number"):
            options += [st.integers(0, 3), st.just(2.0)]
        elif kind == "boolean":
            options.append(st.booleans())
        elif kind == "null":
            options.append(st.none())
        elif kind == "array":
            least, most = schema.get("minItems", 0), schema.get("maxItems", 3)
            items = valid(schema["items"]) if "items" in schema else ANY_JSON
            options.append(st.lists(items, min_size=least, max_size=max(least, min(most, 3))))
            options.append(st.lists(items, min_size=most, max_size=most) if most < 60 else items)
        elif kind == "object":
            props = schema.get("properties", {})
            required = set(schema.get("required", []))
            options.append(
                st.fixed_dictionaries(
                    {k: valid(v) for k, v in props.items() if k in required},
                    optional={k: valid(v) for k, v in props.items() if k not in required},
                )
            )
    return st.one_of(options) if options else ANY_JSON


def near(schema: Mapping[str, Any], depth: int = 0) -> st.SearchStrategy[Any]:
    """A valid value, or one with one thing wrong with it, anywhere inside."""
    wrong: list[st.SearchStrategy[Any]] = [ANY_JSON, st.sampled_from(SAMPLE_STRINGS)]
    if "string" in _kinds(schema):
        most = schema.get("maxLength", 8)
        wrong += [st.just("é" * (most + 1)), st.just("a\n"), st.just("")]
        if "format" in schema:
            wrong.append(st.sampled_from(["not a uri", "x:", ":", "a b:c"]))
    if "array" in _kinds(schema) and "items" in schema:
        most = schema.get("maxItems", 3)
        wrong.append(st.lists(valid(schema["items"]), min_size=most + 1, max_size=most + 1))
        if depth < 3:
            wrong.append(st.lists(near(schema["items"], depth + 1), min_size=1, max_size=2))
    if "object" in _kinds(schema) and schema.get("properties"):
        props = schema["properties"]
        whole = valid(schema)
        wrong += [
            whole.map(lambda d: {**d, "extra": 1}),
            st.tuples(whole, st.sampled_from(sorted(props))).map(
                lambda pair: {k: v for k, v in pair[0].items() if k != pair[1]}
            ),
        ]
        if depth < 3:
            wrong.append(
                st.tuples(whole, st.sampled_from(sorted(props))).flatmap(
                    lambda pair: near(props[pair[1]], depth + 1).map(
                        lambda bad, pair=pair: {**pair[0], pair[1]: bad}
                    )
                )
            )
    return st.one_of(valid(schema), *wrong)


@pytest.mark.parametrize("name", NAMES)
def test_every_task_object_schema_compiles(name: str) -> None:
    """None falls back to jsonschema alone: the comparison below compares two things."""
    try:
        compile_schema(task_object._schema(name), task_object._formats.conforms, lambda p: p)
    except Unsupported as exc:
        pytest.fail(f"{name}: {exc}")


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(data=st.data())
def test_the_compiled_predicate_answers_as_jsonschema(name: str, data: st.DataObject) -> None:
    value = data.draw(near(task_object._schema(name)))
    expected = task_object._validator(name).is_valid(value)
    event("valid" if expected else "invalid")
    assert task_object._valid(name)(value) == expected


EVIDENCE = {"kind": "link", "summary": "the run"}
RETURNED = {"returned_by": "own/agent", "returned_at": "2026-12-01T10:00:00Z"}


@pytest.mark.parametrize(
    ("name", "value", "valid"),
    [
        ("packet", packet(), True),
        ("packet", packet(deliverable_type="poem"), False),
        ("packet", packet(files=["x"] * 1000), False),
        ("packet", {**packet(), "surprise": 1}, False),
        ("result", {**result(), **RETURNED}, True),
        ("result", result(), False),  # who returned it, and when, are required
        ("result", {**result(evidence=[{"kind": "x"}]), **RETURNED}, False),
        (
            "result",
            {**result(evidence=[{**EVIDENCE, "url": "https://ci.example/1"}]), **RETURNED},
            True,
        ),
        ("result", {**result(evidence=[{**EVIDENCE, "url": "not a uri"}]), **RETURNED}, False),
        ("property:requester", "own/agent", True),
        ("property:requester", "own/agent\n", False),
    ],
)
def test_known_values_are_judged_alike(name: str, value: Any, valid: bool) -> None:
    assert task_object._valid(name)(value) is valid
    assert task_object._validator(name).is_valid(value) is valid
