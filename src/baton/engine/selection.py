"""What a document selects below a field, by name: lets a resolver read only what is asked.

A listing that answers `{ id state }` need not read, send over the wire and keep each task's
JSON. `Selection.names(*path)` are the field names the document selects at `path` below one
field (each step a field name), through aliases, named and inline fragments of any type
condition, with `@skip`/`@include` taken as included: a superset of what any execution of the
document answers. A resolver that leaves out what no name asks for therefore never misses a
field it is asked. Resolvers get it from Baton's engine (`selection_of(info)`, or a batch resolver's
`selection` parameter); under graphql-core's executor they get nothing and read everything.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from graphql import (
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    InlineFragmentNode,
    SelectionSetNode,
)


class Selection:
    """The selections below one field of a compiled operation (see the module docstring)."""

    __slots__ = ("_fragments", "_names", "_nodes")

    def __init__(
        self, nodes: Sequence[FieldNode], fragments: Mapping[str, FragmentDefinitionNode]
    ) -> None:
        self._nodes = nodes
        self._fragments = fragments
        self._names: dict[tuple[str, ...], frozenset[str]] = {}

    def names(self, *path: str) -> frozenset[str]:
        """The names of the fields selected at `path` below this field (empty when nothing is
        selected there)."""
        found = self._names.get(path)
        if found is None:
            sets = [node.selection_set for node in self._nodes if node.selection_set]
            for step in path:
                sets = [
                    f.selection_set
                    for f in _fields(sets, self._fragments)
                    if f.name.value == step and f.selection_set
                ]
            found = frozenset(f.name.value for f in _fields(sets, self._fragments))
            self._names[path] = found
        return found


def _fields(
    sets: Sequence[SelectionSetNode], fragments: Mapping[str, FragmentDefinitionNode]
) -> list[FieldNode]:
    found: list[FieldNode] = []
    visited: set[str] = set()

    def visit(selection_set: SelectionSetNode) -> None:
        for selection in selection_set.selections:
            if isinstance(selection, FieldNode):
                found.append(selection)
            elif isinstance(selection, InlineFragmentNode):
                visit(selection.selection_set)
            elif isinstance(selection, FragmentSpreadNode):
                name = selection.name.value
                fragment = fragments.get(name)
                if fragment is not None and name not in visited:
                    visited.add(name)
                    visit(fragment.selection_set)

    for selection_set in sets:
        visit(selection_set)
    return found


def selection_of(info: Any) -> Selection | None:
    """What `info`'s field selects, or None when the resolver runs outside Baton's engine:
    then it should read everything."""
    selection = getattr(info, "selection", None)
    return selection if isinstance(selection, Selection) else None
