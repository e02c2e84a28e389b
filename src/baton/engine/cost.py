"""The worst-case cost of an operation, computed before it runs.

Depth, alias and token limits bound a document's size, not the work it asks for: a few nested
lists multiply. Every list field of the schema has a bound — its `first` argument (itself
bounded) where it takes one, else a documented maximum (`ListSize` in the field's metadata; the
introspection is counted as it runs instead) — and an operation's cost is the number of values
its response can hold at most: each field counts one, a list's items count as often as the list
can be long. An operation over `Limits.max_cost` is refused before anything runs, with the
budget and the estimate; so is a `first` outside its bounds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

from graphql import (
    FieldNode,
    FragmentDefinitionNode,
    GraphQLError,
    GraphQLField,
    GraphQLList,
    GraphQLNonNull,
    GraphQLObjectType,
    GraphQLOutputType,
    GraphQLSchema,
    SelectionSetNode,
    get_named_type,
    is_abstract_type,
    is_composite_type,
)
from graphql.execution.values import VariableValues, get_argument_values
from graphql.type.introspection import TypeNameMetaFieldDef

from baton.engine.fields import collect
from baton.engine.plans import DEFINITION

# Key in a Strawberry field's `metadata`: its `ListSize` (see `list_size`).
LIST_SIZE = "baton.list_size"


@dataclass(frozen=True)
class ListSize:
    """How long a list field can be: `argument` (e.g. `first`) when given, else `default`;
    never more than `maximum`. With `per_page`, the list holds up to that many items for each
    item of the page it sits in (a graph's edges: at most 20 per node)."""

    maximum: int
    argument: str | None = None
    default: int | None = None
    per_page: int | None = None


def list_size(
    maximum: int,
    argument: str | None = None,
    default: int | None = None,
    *,
    per_page: int | None = None,
) -> dict[str, Any]:
    """Field metadata declaring the bound of a list field (see the module docstring)."""
    return {LIST_SIZE: ListSize(maximum, argument, default, per_page)}


class CostRefusal(GraphQLError):
    """Refused before execution: a list argument out of bounds, or over the cost budget."""

    def __init__(self, message: str, **extensions: Any) -> None:
        super().__init__(message, extensions={"code": "invalid_input", **extensions})


def _bound(definition: GraphQLField) -> object:
    """The `list_size` metadata of a field, if it has any."""
    sf = (definition.extensions or {}).get(DEFINITION)
    return cast(Mapping[str, Any], getattr(sf, "metadata", None) or {}).get(LIST_SIZE)


class CostModel:
    def __init__(self, schema: GraphQLSchema, *, default_list: int = 100) -> None:
        self.schema = schema
        self.default_list = default_list
        # The only arguments a cost reads (`first`): with the same values for the variables
        # given to them (and to @skip/@include), an operation's cost is the same.
        self.size_arguments = frozenset(
            bound.argument
            for type_ in schema.type_map.values()
            if isinstance(type_, GraphQLObjectType)
            for definition in type_.fields.values()
            if isinstance(bound := _bound(definition), ListSize) and bound.argument is not None
        )

    def check(
        self,
        operation_type: GraphQLObjectType,
        selection_set: SelectionSetNode,
        fragments: Mapping[str, FragmentDefinitionNode],
        variables: VariableValues,
        budget: int,
    ) -> int:
        """The operation's worst-case cost, or `CostRefusal`."""
        cost = self._selection(operation_type, [selection_set], fragments, variables, None)
        if cost > budget:
            raise CostRefusal(
                f"This operation could return up to {cost} values; the budget is {budget}. "
                "Ask for fewer items (`first`) or fewer nested lists.",
                budget=budget,
                estimate=cost,
            )
        return cost

    def _selection(
        self,
        type_: GraphQLObjectType,
        selection_sets: list[SelectionSetNode],
        fragments: Mapping[str, FragmentDefinitionNode],
        variables: VariableValues,
        page: int | None,
    ) -> int:
        total = 0
        for nodes in collect(self.schema, fragments, type_, selection_sets, variables).values():
            total += self._field(type_, nodes, fragments, variables, page)
        return total

    def _field(
        self,
        parent: GraphQLObjectType,
        nodes: list[FieldNode],
        fragments: Mapping[str, FragmentDefinitionNode],
        variables: VariableValues,
        page: int | None,
    ) -> int:
        """One field: 1, plus its items' cost as often as the list can be long. A field that
        is not a list but declares a size (a connection's `first`) passes it down as the page
        size of the lists inside it (the connection's `edges`)."""
        node = nodes[0]
        if node.name.value in ("__schema", "__type"):
            return 1  # introspection is counted as it runs (see `IntrospectionBudget`)
        definition = _definition(self.schema, parent, node.name.value)
        named = get_named_type(definition.type)
        if not is_composite_type(named):
            return 1
        lists = _list_depth(definition.type)
        declared = self._size(parent, definition, node, variables, page)
        if lists:
            size = declared if declared is not None else page
            size = size if size is not None else self.default_list
            inner = None
        else:
            size, inner = 1, declared
        selection_sets = [n.selection_set for n in nodes if n.selection_set]
        possible = (
            self.schema.get_possible_types(named)
            if is_abstract_type(named)
            else [cast(GraphQLObjectType, named)]
        )
        child = max(
            (self._selection(t, selection_sets, fragments, variables, inner) for t in possible),
            default=0,
        )
        return 1 + int(size**lists * child)

    def _size(
        self,
        parent: GraphQLObjectType,
        definition: GraphQLField,
        node: FieldNode,
        variables: VariableValues,
        page: int | None,
    ) -> int | None:
        """The declared bound of the field's lists; None when it declares none."""
        bound = _bound(definition)
        if not isinstance(bound, ListSize):
            return None
        if bound.per_page is not None and page is not None:
            return int(min(bound.maximum, page * bound.per_page))
        if bound.argument is None:
            return bound.maximum
        value = get_argument_values(definition, node, variables).get(bound.argument)
        if value is None:
            return bound.default if bound.default is not None else bound.maximum
        if not 0 <= value <= bound.maximum:
            raise CostRefusal(
                f"{bound.argument}: must be between 0 and {bound.maximum}",
                field=bound.argument,
            )
        return int(value)


class IntrospectionBudget:
    """graphql-core middleware for introspection, which has no static bound worth the name (a
    type's fields' types' fields …): it counts resolved fields and refuses past the budget.
    The schema never changes, so an introspection that fits runs once and is cached."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.spent = 0

    def resolve(self, next_: Any, root: Any, info: Any, **args: Any) -> Any:
        self.spent += 1
        if self.spent > self.budget:
            raise CostRefusal(
                f"This introspection returns more than {self.budget} values, the budget.",
                budget=self.budget,
                estimate=self.spent,
            )
        return next_(root, info, **args)


def _definition(schema: GraphQLSchema, parent: GraphQLObjectType, name: str) -> GraphQLField:
    if name == "__typename":
        return TypeNameMetaFieldDef
    return cast(GraphQLField, parent.fields[name])


def _list_depth(type_: GraphQLOutputType) -> int:
    """How many lists wrap the named type ([[T]] is two)."""
    depth = 0
    while True:
        if isinstance(type_, GraphQLNonNull):
            type_ = type_.of_type
        elif isinstance(type_, GraphQLList):
            depth += 1
            type_ = type_.of_type
        else:
            return depth
