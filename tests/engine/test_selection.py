"""What a document selects below a field (`baton.engine.selection`): names through aliases,
fragments and inline fragments, at any path, a superset whatever the directives say; and
nothing at all outside Baton's engine."""

from __future__ import annotations

from graphql import FieldNode, FragmentDefinitionNode, OperationDefinitionNode, parse

from baton.engine.selection import Selection, selection_of

DOCUMENT = """
query($skip: Boolean!) {
  tasks {
    edges {
      node { id ...Parts x: state ... on Task { assignee @skip(if: $skip) } }
      cursor
    }
    other: edges { node { version events { edges { node { task { packet { task } } } } } } }
    pageInfo { hasNextPage }
  }
}
fragment Parts on Task { requester ...More }
fragment More on Task { dependencies { id } }
"""


def _selection() -> Selection:
    document = parse(DOCUMENT)
    operation = next(d for d in document.definitions if isinstance(d, OperationDefinitionNode))
    fragments = {
        d.name.value: d for d in document.definitions if isinstance(d, FragmentDefinitionNode)
    }
    [tasks] = [s for s in operation.selection_set.selections if isinstance(s, FieldNode)]
    return Selection([tasks], fragments)


def test_names_are_those_selected_directly_below_the_field() -> None:
    assert _selection().names() == {"edges", "pageInfo"}


def test_a_path_follows_aliases_fragments_and_skipped_fields_as_included() -> None:
    selection = _selection()
    assert selection.names("edges") == {"node", "cursor"}
    assert selection.names("edges", "node") == {
        "id",
        "requester",
        "dependencies",
        "state",
        "assignee",
        "version",
        "events",
    }
    assert selection.names("edges", "node", "events", "edges", "node", "task") == {"packet"}


def test_a_path_that_selects_nothing_names_nothing() -> None:
    selection = _selection()
    assert selection.names("edges", "node", "id") == frozenset()
    assert selection.names("nowhere") == frozenset()


def test_outside_the_engine_a_resolver_is_told_nothing() -> None:
    class StrawberryInfo:  # graphql-core's executor hands Strawberry's Info, no `selection`
        selected_fields = ()

    assert selection_of(StrawberryInfo()) is None
    ours = selection_of(type("Ours", (), {"selection": _selection()})())
    assert ours is not None and ours.names("edges") == {"node", "cursor"}
