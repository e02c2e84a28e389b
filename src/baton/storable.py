"""Strings PostgreSQL cannot store, refused before they reach it.

A NUL character or a lone surrogate is valid JSON, and GraphQL lets a string literal spell NUL
as an escape, but either fails deep inside the database driver. The engine checks the query text
(once, with its parse) with `unstorable`; every request's input (GraphQL variables, MCP tool
arguments) is checked with it by `baton.inputs`, which makes them an `invalid_input` error for
every argument of every door; services called directly check the texts they store with it too.
"""

from __future__ import annotations

from collections.abc import Iterable

MAX_DEPTH = 64
TOO_DEEP = "input nested too deeply"


def unstorable(value: object, path: str = "", depth: int = 0) -> str | None:
    """Why `value` (decoded JSON) cannot be stored, naming where, or None."""
    found = unstorable_at(value, path, depth)
    if found is None:
        return None
    where, reason = found
    return f"{reason} (at {where})" if where else reason


def unstorable_at(value: object, path: str = "", depth: int = 0) -> tuple[str, str] | None:
    """Where in `value` (decoded JSON) and why it cannot be stored, or None."""
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


def _why(value: object, path: str, depth: int) -> tuple[str, str] | None:
    if depth > MAX_DEPTH:
        return path, TOO_DEEP
    if isinstance(value, str):
        if "\x00" in value:
            return path, "strings may not contain the NUL character"
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return path, "strings must be valid Unicode, with no lone surrogates"
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
        found = _why(child, child_path, depth + 1)
        if found is not None:
            return found
    return None
