"""Strings PostgreSQL cannot store, refused before they reach it.

A NUL character or a lone surrogate is valid JSON, and GraphQL lets a string literal spell NUL
as an escape, but either fails deep inside the database driver. The engine checks the query text
(once, with its parse) and the variables (per request) with `unstorable`, which makes them an
`invalid_input` error for every argument of every operation, over HTTP and WebSocket alike;
services called directly check the texts they store with it too.
"""

from __future__ import annotations

from collections.abc import Iterable

MAX_DEPTH = 64


def unstorable(value: object, path: str = "", depth: int = 0) -> str | None:
    """Why `value` (decoded JSON) cannot be stored, naming where, or None."""
    if _storable(value, depth):
        return None  # the common case, told without naming every place on the way
    return _why(value, path, depth)


def _storable(value: object, depth: int) -> bool:
    """Whether `_why` finds nothing: the same walk, without the paths."""
    if depth > MAX_DEPTH:
        return False
    if isinstance(value, str):
        if "\x00" in value:
            return False
        if value.isascii():
            return True
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return False
        return True
    if isinstance(value, dict):
        depth += 1
        for key in value:
            if not _storable(key, depth):
                return False
        for item in value.values():
            if not _storable(item, depth):
                return False
    elif isinstance(value, list):
        depth += 1
        for item in value:
            if not _storable(item, depth):
                return False
    return True


def _why(value: object, path: str, depth: int) -> str | None:
    where = f" (at {path})" if path else ""
    if depth > MAX_DEPTH:
        return f"input nested too deeply{where}"
    if isinstance(value, str):
        if "\x00" in value:
            return f"strings may not contain the NUL character{where}"
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return f"strings must be valid Unicode, with no lone surrogates{where}"
        return None
    children: Iterable[tuple[str, object]]
    if isinstance(value, dict):
        keys = [(f"{path}.{k}" if path else str(k), k) for k in value]
        values = [(f"{path}.{k}" if path else str(k), v) for k, v in value.items()]
        children = [*keys, *values]
    elif isinstance(value, list):
        children = [(f"{path}[{i}]", item) for i, item in enumerate(value)]
    else:
        return None
    for child_path, child in children:
        reason = _why(child, child_path, depth + 1)
        if reason is not None:
            return reason
    return None
