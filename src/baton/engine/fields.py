"""Field collection: which fields a selection set asks of one concrete type.

The GraphQL spec's CollectFields: fields keyed by response name in document order, fragments
(named and inline) whose type condition the type satisfies, each named fragment once per
selection set, and `@skip` / `@include` evaluated with the request's variables.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from graphql import (
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    GraphQLError,
    GraphQLIncludeDirective,
    GraphQLObjectType,
    GraphQLSchema,
    GraphQLSkipDirective,
    InlineFragmentNode,
    NamedTypeNode,
    SelectionNode,
    SelectionSetNode,
    VariableNode,
    is_abstract_type,
)
from graphql.execution.values import VariableValues, get_directive_values

Collected = dict[str, list[FieldNode]]


def response_key(node: FieldNode) -> str:
    return node.alias.value if node.alias else node.name.value


def collect(
    schema: GraphQLSchema,
    fragments: Mapping[str, FragmentDefinitionNode],
    runtime_type: GraphQLObjectType,
    selection_sets: Iterable[SelectionSetNode],
    variables: VariableValues | None,
    lenient: bool = False,
) -> Collected:
    """The fields by response key. A `@skip`/`@include` whose `if` cannot be read (a variable
    given null) raises graphql-core's error, or, when `lenient`, counts as included (the cost
    check's worst case)."""
    fields: Collected = {}
    visited: set[str] = set()

    def visit(selection_set: SelectionSetNode) -> None:
        for selection in selection_set.selections:
            try:
                included = _included(selection, variables)
            except GraphQLError:
                if not lenient:
                    raise
                included = True
            if not included:
                continue
            if isinstance(selection, FieldNode):
                fields.setdefault(response_key(selection), []).append(selection)
            elif isinstance(selection, InlineFragmentNode):
                if _applies(schema, selection.type_condition, runtime_type):
                    visit(selection.selection_set)
            elif isinstance(selection, FragmentSpreadNode):
                name = selection.name.value
                fragment = fragments.get(name)
                if name in visited or fragment is None:
                    continue
                visited.add(name)
                if _applies(schema, fragment.type_condition, runtime_type):
                    visit(fragment.selection_set)

    for selection_set in selection_sets:
        visit(selection_set)
    return fields


def _included(node: SelectionNode, variables: VariableValues | None) -> bool:
    if not node.directives:
        return True
    skip = get_directive_values(GraphQLSkipDirective, node, variables)
    if skip is not None and skip["if"] is True:
        return False
    include = get_directive_values(GraphQLIncludeDirective, node, variables)
    return not (include is not None and include["if"] is False)


def _applies(
    schema: GraphQLSchema, condition: NamedTypeNode | None, runtime_type: GraphQLObjectType
) -> bool:
    if condition is None:
        return True
    named = schema.get_type(condition.name.value)
    if named is runtime_type:
        return True
    if named is not None and is_abstract_type(named):
        return schema.is_sub_type(named, runtime_type)
    return False


def directive_variables(
    nodes: Iterable[object], arguments: frozenset[str] = frozenset()
) -> frozenset[str]:
    """Variables that `@skip`/`@include` read anywhere in `nodes` (a document's definitions),
    and those given to a field argument named in `arguments`: a plan (or cost) computed for one
    request holds for every request that gives them the same values."""
    names: set[str] = set()

    def walk(node: object) -> None:
        directives = getattr(node, "directives", None)
        for directive in directives or ():
            if directive.name.value in ("skip", "include"):
                for argument in directive.arguments or ():
                    if isinstance(argument.value, VariableNode):
                        names.add(argument.value.name.value)
        for argument in getattr(node, "arguments", None) or ():
            if argument.name.value in arguments and isinstance(argument.value, VariableNode):
                names.add(argument.value.name.value)
        selection_set = getattr(node, "selection_set", None)
        for selection in selection_set.selections if selection_set else ():
            walk(selection)

    for node in nodes:
        walk(node)
    return frozenset(names)
