"""Strawberry objects around store records, made a page at a time.

`Task(record=r)` runs the dataclass's keyword-only `__init__`: about 0.3 µs, and a page of a
hundred tasks with their dependencies and dependents makes some 500 of them, each edge another.
These make the same objects with `object.__new__` and one attribute each, for types whose one
field taken at construction is the one set here (checked once per type).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import fields
from typing import Any, TypeVar

W = TypeVar("W")
E = TypeVar("E")

_new = object.__new__


_CHECKED: set[type] = set()


def _only(cls: type, name: str) -> None:
    if cls in _CHECKED:
        return
    taken = [f.name for f in fields(cls) if f.init]
    if taken != [name]:
        raise TypeError(f"{cls.__name__} takes {taken}, not only {name!r}: construct it")
    _CHECKED.add(cls)


def wrapped(cls: type[W], records: Iterable[Any]) -> list[W]:
    """`[cls(record=r) for r in records]`."""
    _only(cls, "record")
    made: list[W] = []
    for record in records:
        node = _new(cls)
        node.record = record  # type: ignore[attr-defined]
        made.append(node)
    return made


def edges_of(edge: type[E], node: type, records: Iterable[Any]) -> list[E]:
    """`[edge(node=node(record=r)) for r in records]`."""
    _only(edge, "node")
    made: list[E] = []
    nodes: list[Any] = wrapped(node, records)
    for each in nodes:
        one = _new(edge)
        one.node = each  # type: ignore[attr-defined]
        made.append(one)
    return made
