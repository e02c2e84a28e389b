"""The worst-case cost of an operation, and its arguments' checks, before it runs.

Depth, alias and token limits bound a document's size, not the work it asks for: a few nested
lists multiply. Every list field of the schema has a bound — its `first` argument (itself
bounded) where it takes one, else a documented maximum (`ListSize` in the field's metadata) —
and an operation's cost is the number of values its response can hold at most: each field
counts one, a list's items count as often as the list can be long. Introspection (`__schema`,
`__type`) is counted exactly: the schema is at hand, so its lists' lengths are known. An
operation over `Limits.max_cost` is refused before anything runs, with the budget and the
estimate; the count stops as soon as it passes the budget, so refusing costs no more than
accepting.

The same walk checks every argument that a field declares a check for (`checked`): a `first`
outside its bounds, a `depth` out of range, an `after` that is no cursor. Such a request is
refused before anything runs, as a whole, like a document over the depth limit: a client learns
of a bad argument before any part of its operation has run (a mutation included).

A walk's cost depends only on the values of the arguments that size lists (`sizing`: `first`)
and of the @skip/@include conditions: a walk gives it as `Costed`, with the fields whose
arguments it checked, so that another request with the same of those values (a page after
another cursor, a filter for another project) has the same checks run on its own values
(`recheck`) instead of a whole walk again.

A value the walk cannot read — an argument or a directive given an explicit null where its type
forbids one — is counted at its maximum and left to execution, which reports it as a field
error with its path, as graphql-core does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
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
from graphql.type.introspection import (
    SchemaMetaFieldDef,
    TypeMetaFieldDef,
    TypeNameMetaFieldDef,
)

from baton.engine.argument_values import ArgumentValues
from baton.engine.fields import collect
from baton.engine.plans import DEFINITION

# Keys in a Strawberry field's `metadata`: its `ListSize` (see `list_size`), and the checks of
# its arguments (see `checked`).
LIST_SIZE = "baton.list_size"
ARGUMENT_CHECKS = "baton.argument_checks"

# A check of one argument's value: what is wrong with it, or None.
Check = Callable[[Any], str | None]


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


def checked(**checks: Check) -> dict[str, Any]:
    """Field metadata: checks of the field's arguments (by GraphQL name), run before the
    operation runs (see the module docstring). A check sees every value but null."""
    return {ARGUMENT_CHECKS: checks}


def between(low: int, high: int) -> Check:
    """A check: an integer from `low` to `high`."""

    def check(value: Any) -> str | None:
        return None if low <= value <= high else f"must be between {low} and {high}"

    return check


def at_most(count: int, what: str = "values") -> Check:
    """A check: a list of at most `count` items."""

    def check(value: Any) -> str | None:
        return None if len(value) <= count else f"at most {count} {what}"

    return check


def parses(parse: Callable[[Any], object]) -> Check:
    """A check: `parse(value)` accepts it (raising `BatonError`, or ValueError, when not)."""

    def check(value: Any) -> str | None:
        try:
            parse(value)
        except Exception as exc:  # the parser's own words say what is wrong
            message = getattr(exc, "message", None) or str(exc)
            return message.split(": ", 1)[-1] if ": " in message else message
        return None

    return check


class CostRefusal(GraphQLError):
    """Refused before execution: an argument that fails its check, or over the cost budget."""

    def __init__(self, message: str, **extensions: Any) -> None:
        super().__init__(message, extensions={"code": "invalid_input", **extensions})


class _OverBudget(Exception):
    """The count passed the budget: stop counting."""


def _metadata(definition: GraphQLField) -> Mapping[str, Any]:
    sf = (definition.extensions or {}).get(DEFINITION)
    return cast(Mapping[str, Any], getattr(sf, "metadata", None) or {})


def _bound(definition: GraphQLField) -> object:
    """The `list_size` metadata of a field, if it has any."""
    return _metadata(definition).get(LIST_SIZE)


@dataclass(frozen=True)
class _Info:
    """What graphql-core's introspection resolvers read of their `info`."""

    schema: GraphQLSchema


@dataclass
class _Walk:
    fragments: Mapping[str, FragmentDefinitionNode]
    variables: VariableValues
    # Introspection's count, and where it stops (see `CostModel._introspection`).
    spent: int = 0
    budget: int = 0
    # The fields whose arguments were read for a check or a size, in the walk's order, and
    # whether they could be read (see `Costed`).
    read: list[tuple[GraphQLField, ArgumentValues, bool]] = field(default_factory=list)

    def spend(self, count: int) -> None:
        self.spent += count
        if self.spent > self.budget:
            raise _OverBudget


@dataclass(frozen=True)
class Costed:
    """A walk's outcome under the budget: the cost, and the fields whose arguments it read
    for their checks or sizes (whether each could be read). With the same values for the
    variables that size lists and decide @skip/@include, another request costs the same if
    its arguments can be read where these could (and not where these could not), and it
    passes the same checks (`CostModel.recheck`)."""

    cost: int
    read: tuple[tuple[GraphQLField, ArgumentValues, bool], ...]


class CostModel:
    def __init__(self, schema: GraphQLSchema, *, default_list: int = 100) -> None:
        self.schema = schema
        self.default_list = default_list
        self._info = _Info(schema)
        # The only arguments a cost reads (`first`): with the same values for the variables
        # given to them (and to @skip/@include), an operation's cost is the same (`Costed`).
        sizing: set[str] = set()
        for type_ in schema.type_map.values():
            if not isinstance(type_, GraphQLObjectType):
                continue
            for definition in type_.fields.values():
                bound = _bound(definition)
                if isinstance(bound, ListSize) and bound.argument is not None:
                    sizing.add(bound.argument)
        self.sizing = frozenset(sizing)

    def check(
        self,
        operation_type: GraphQLObjectType,
        selection_set: SelectionSetNode,
        fragments: Mapping[str, FragmentDefinitionNode],
        variables: VariableValues,
        budget: int,
    ) -> Costed:
        """The operation's worst-case cost, or `CostRefusal` (over the budget, or an
        argument that fails its check)."""
        walk = _Walk(fragments, variables)
        cost = self._selection(walk, operation_type, [selection_set], None, budget)
        if cost > budget:
            raise CostRefusal(
                f"This operation could return more than {budget} values, the budget "
                f"(counted up to {cost} before stopping). Ask for fewer items (`first`) or "
                "fewer nested lists.",
                budget=budget,
                estimate=cost,
            )
        return Costed(cost, tuple(walk.read))

    def recheck(self, costed: Costed, variables: VariableValues) -> bool:
        """Whether `costed` holds for `variables` (which give the sizes and conditions of the
        walk that made it): their arguments read where its were, and checked in its order
        (`CostRefusal` for the first that fails, as the walk would). False: an argument reads
        where the walk's did not, or not where it did, so its sizes may differ: walk again."""
        for definition, values, readable in costed.read:
            try:
                arguments = values(variables)
            except GraphQLError:
                if readable:
                    return False
                continue
            if not readable:
                return False
            _check(definition, arguments)
        return True

    def _selection(
        self,
        walk: _Walk,
        type_: GraphQLObjectType,
        selection_sets: list[SelectionSetNode],
        page: int | None,
        limit: int,
    ) -> int:
        """The selection's cost, or any number over `limit` once it is known to be."""
        total = 0
        fields = collect(self.schema, walk.fragments, type_, selection_sets, walk.variables, True)
        for nodes in fields.values():
            total += self._field(walk, type_, nodes, page, limit - total)
            if total > limit:
                break
        return total

    def _field(
        self,
        walk: _Walk,
        parent: GraphQLObjectType,
        nodes: list[FieldNode],
        page: int | None,
        limit: int,
    ) -> int:
        """One field: 1, plus its items' cost as often as the list can be long. A field that
        is not a list but declares a size (a connection's `first`) passes it down as the page
        size of the lists inside it (the connection's `edges`)."""
        node = nodes[0]
        name = node.name.value
        if name in ("__schema", "__type"):
            return self._introspection(walk, nodes, limit)
        definition = _definition(self.schema, parent, name)
        arguments = self._arguments(walk, definition, node)
        named = get_named_type(definition.type)
        if not is_composite_type(named):
            return 1
        lists = _list_depth(definition.type)
        declared = self._size(definition, arguments, page)
        if lists:
            size = declared if declared is not None else page
            size = size if size is not None else self.default_list
            inner = None
        else:
            size, inner = 1, declared
        repeat = size**lists
        if repeat == 0:
            return 1
        selection_sets = [n.selection_set for n in nodes if n.selection_set]
        possible = (
            self.schema.get_possible_types(named)
            if is_abstract_type(named)
            else [cast(GraphQLObjectType, named)]
        )
        child_limit = max(0, limit - 1) // repeat
        child = max(
            (self._selection(walk, t, selection_sets, inner, child_limit) for t in possible),
            default=0,
        )
        return 1 + int(repeat * child)

    def _arguments(
        self, walk: _Walk, definition: GraphQLField, node: FieldNode
    ) -> dict[str, Any] | None:
        """The field's arguments, checked; None when they cannot be read (see the module
        docstring: execution reports that). Noted in `walk.read` when they are read for a
        check or a size."""
        if not definition.args:
            return {}
        metadata = _metadata(definition)
        bound = metadata.get(LIST_SIZE)
        read = ARGUMENT_CHECKS in metadata or (
            isinstance(bound, ListSize) and bound.argument is not None
        )
        try:
            arguments = get_argument_values(definition, node, walk.variables)
        except GraphQLError:
            if read:
                walk.read.append((definition, ArgumentValues(definition, node), False))
            return None
        if read:  # read again by `recheck`, compiled: a filter's literal costs 40 µs to walk
            walk.read.append((definition, ArgumentValues(definition, node), True))
        _check(definition, arguments)
        return arguments

    def _size(
        self, definition: GraphQLField, arguments: dict[str, Any] | None, page: int | None
    ) -> int | None:
        """The declared bound of the field's lists; None when it declares none."""
        bound = _bound(definition)
        if not isinstance(bound, ListSize):
            return None
        if bound.per_page is not None and page is not None:
            return int(min(bound.maximum, page * bound.per_page))
        if bound.argument is None:
            return bound.maximum
        value = None if arguments is None else arguments.get(bound.argument)
        if value is None:
            if arguments is None:
                return bound.maximum
            return bound.default if bound.default is not None else bound.maximum
        if not 0 <= value <= bound.maximum:
            raise CostRefusal(
                f"{bound.argument}: must be between 0 and {bound.maximum}",
                field=bound.argument,
            )
        return int(value)

    # --- introspection, counted exactly -------------------------------------------------------

    def _introspection(self, walk: _Walk, nodes: list[FieldNode], limit: int) -> int:
        """What `__schema` or `__type` answers, counted value by value on the schema itself
        with graphql-core's own introspection resolvers, stopping past `limit`."""
        definition = SchemaMetaFieldDef if nodes[0].name.value == "__schema" else TypeMetaFieldDef
        walk.spent, walk.budget = 0, limit
        try:
            walk.spend(1)
            value = self._resolve(walk, definition, nodes[0], None)
            named = get_named_type(definition.type)
            if value is not None:
                self._introspect(walk, cast(GraphQLObjectType, named), value, nodes)
        except _OverBudget:
            pass
        return walk.spent

    def _resolve(self, walk: _Walk, definition: GraphQLField, node: FieldNode, source: Any) -> Any:
        try:
            arguments = get_argument_values(definition, node, walk.variables)
        except GraphQLError:
            return None  # execution reports it; nothing under it is produced
        assert definition.resolve is not None, "every introspection field resolves"
        return definition.resolve(source, self._info, **arguments)

    def _introspect(
        self, walk: _Walk, type_: GraphQLObjectType, value: Any, nodes: list[FieldNode]
    ) -> None:
        selection_sets = [n.selection_set for n in nodes if n.selection_set]
        fields = collect(self.schema, walk.fragments, type_, selection_sets, walk.variables, True)
        for field_nodes in fields.values():
            name = field_nodes[0].name.value
            walk.spend(1)
            if name == "__typename":
                continue
            definition = type_.fields[name]
            named = get_named_type(definition.type)
            lists = _list_depth(definition.type)
            if not lists and not is_composite_type(named):
                continue
            resolved = self._resolve(walk, definition, field_nodes[0], value)
            if resolved is None:
                continue
            items = list(resolved) if lists else [resolved]
            if lists:
                walk.spend(len(items))
            if is_composite_type(named):
                for item in items:
                    if item is not None:
                        self._introspect(walk, cast(GraphQLObjectType, named), item, field_nodes)


def _check(definition: GraphQLField, arguments: Mapping[str, Any]) -> None:
    """`CostRefusal` for the first of the field's arguments that fails its check."""
    checks: Mapping[str, Check] = _metadata(definition).get(ARGUMENT_CHECKS) or {}
    for argument, check in checks.items():
        value = arguments.get(argument)
        problem = None if value is None else check(value)
        if problem is not None:
            raise CostRefusal(f"{argument}: {problem}", field=argument)


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
