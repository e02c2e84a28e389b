"""`unstorable` names the first place a value cannot be stored; its quick yes agrees."""

from __future__ import annotations

import pytest

from baton.storable import MAX_DEPTH, unstorable


def nested(depth: int) -> object:
    value: object = 1
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("plain", None),
        ("accentué ✓", None),
        ({"a": ["b", {"c": 1, "d": None}], "e": 2.5}, None),
        ("a\x00b", "strings may not contain the NUL character (at v)"),
        ("\ud800", "strings must be valid Unicode, with no lone surrogates (at v)"),
        ({"ok": "x", "k\x00": "y"}, "strings may not contain the NUL character (at v.k\x00)"),
        ({"a": ["x", "y\x00"]}, "strings may not contain the NUL character (at v.a[1])"),
        (
            {"a": "\udfff", "b": "\x00"},
            "strings must be valid Unicode, with no lone surrogates (at v.a)",
        ),
        (nested(MAX_DEPTH), None),
        (nested(MAX_DEPTH + 1), "input nested too deeply (at v" + "[0]" * (MAX_DEPTH + 1) + ")"),
    ],
)
def test_the_first_reason_or_none(value: object, reason: str | None) -> None:
    assert unstorable(value, "v") == reason
