"""Plans: an operation's selections, compiled once into what runs for each field.

A `TypePlan` is the fields one concrete object type answers for a selection set; each
`FieldPlan` knows how to get its value for a whole list of parents at once: an attribute, a
call of the Strawberry resolver per parent, or one call of a batch resolver for all of them
(see `batched`). Arguments without variables are coerced and converted at compile time; the
rest once per request, by a coercion compiled at the field's first use
(`baton.engine.argument_values`). Sub-plans for each concrete type are compiled the first time
a value of that type shows up, and kept.
"""

from __future__ import annotations

import functools
import inspect
import operator
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any, cast

from graphql import (
    FieldNode,
    FragmentDefinitionNode,
    GraphQLAbstractType,
    GraphQLEnumType,
    GraphQLField,
    GraphQLNamedType,
    GraphQLNonNull,
    GraphQLObjectType,
    GraphQLOutputType,
    GraphQLScalarType,
    GraphQLSchema,
    ValueNode,
    VariableNode,
    get_named_type,
    is_leaf_type,
)
from graphql.execution.values import VariableValues, get_argument_values
from strawberry.schema.schema import Schema
from strawberry.types.field import StrawberryField

from baton.engine.argument_values import ArgumentValues
from baton.engine.arguments import field_converter
from baton.engine.fields import collect
from baton.engine.leaves import Serialize, serializer, weighed
from baton.engine.selection import Selection

if TYPE_CHECKING:
    from baton.engine.rows import Made

DEFINITION = "strawberry-definition"
# Key in a Strawberry field's `metadata` naming its batch resolver (see `batched`).
BATCH = "baton.batch"

# Key in a Strawberry field's `metadata`: a function of the parent alone that answers what the
# field's resolver answers (see `reads`).
READS = "baton.reads"

BatchResolver = Callable[..., Awaitable[Sequence[Any]]]


def reads(get: Callable[[Any], Any]) -> dict[str, Any]:
    """Field metadata: the field, which takes no arguments, answers `get(parent)`, exactly what
    its resolver returns. The engine calls `get` in the resolver's place: an
    `operator.attrgetter` runs in C, where the resolver is a Python call for every parent."""
    return {READS: get}


def batched(resolver: BatchResolver) -> dict[str, Any]:
    """Field metadata: the engine resolves this field for every parent of one level with one
    call, `resolver(context, parents, **arguments) -> one value per parent`. The field's own
    resolver must answer the same for a single parent (it usually calls `resolver` with one).
    A resolver with a `selection` parameter is also given what the document selects below the
    field (`baton.engine.selection.Selection`); the field's own resolver may leave it out, as
    graphql-core's executor does."""
    return {BATCH: resolver}


class Unsupported(Exception):
    """A field the compiler does not handle; the operation runs on graphql-core instead."""


class Kind(Enum):
    TYPENAME = "typename"
    ATTRIBUTE = "attribute"
    CALL = "call"
    BATCH = "batch"


@dataclass(eq=False)
class FieldPlan:
    key: str
    nodes: list[FieldNode]
    parent: GraphQLObjectType
    definition: GraphQLField
    kind: Kind
    get: Callable[[Any], Any] | None  # ATTRIBUTE
    call: Callable[..., Any] | None  # CALL: the resolver function; BATCH: the batch resolver
    wants_self: bool
    info_name: str | None
    is_async: bool
    static_kwargs: dict[str, Any] | None  # converted arguments, when they hold no variable
    strawberry: StrawberryField | None
    owner: Compiler
    ordinal: int = 0  # the key's place in its selection set (see `TypePlan.keys`)
    # BATCH: the field's own resolver, per parent; asked when a batch fails, to learn which
    # parents fail (see `baton.engine.execute._batch`).
    single: FieldPlan | None = None
    # A scalar or enum (not a list) got by an attribute or a plain function: fetched, checked
    # and serialised in one pass over the parents (`baton.engine.execute._leaf`). Its named
    # type, and whether it is non-null.
    leaf: tuple[GraphQLScalarType | GraphQLEnumType, bool] | None = None
    # BATCH: the batch resolver takes a `selection` parameter (see `batched`).
    batch_selection: bool = False
    _children: dict[GraphQLObjectType, TypePlan] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.nodes[0].name.value

    @property
    def return_type(self) -> GraphQLOutputType:
        return self.definition.type

    @functools.cached_property
    def selection(self) -> Selection:
        """What the document selects below this field (see `baton.engine.selection`)."""
        return Selection(self.nodes, self.owner.fragments)

    def kwargs(self, variables: VariableValues | None) -> dict[str, Any]:
        """The resolver's keyword arguments (Strawberry input objects, Python names)."""
        if self.static_kwargs is not None:
            return self.static_kwargs
        return self.owner.convert(self, self.arguments(variables))

    @functools.cached_property
    def arguments(self) -> ArgumentValues:
        """The coercion of this field's arguments, compiled at first use."""
        return ArgumentValues(self.definition, self.nodes[0])

    def child(self, runtime_type: GraphQLObjectType) -> TypePlan:
        plan = self._children.get(runtime_type)
        if plan is None:
            selection_sets = [n.selection_set for n in self.nodes if n.selection_set]
            plan = self.owner.type_plan(runtime_type, selection_sets)
            self._children[runtime_type] = plan
        return plan


@dataclass(eq=False)
class TypePlan:
    type: GraphQLObjectType
    fields: list[FieldPlan]
    keys: tuple[str, ...]
    introspects: bool  # selects __schema or __type (only possible on the query root)
    # What the keys of one answer take in the response's JSON (`"key":` and a comma).
    key_bytes: int = 0
    # An answer before its fields are placed: the keys in selection order, each None.
    template: dict[str, None] = field(default_factory=dict)
    # The fields answered in one pass (see `FieldPlan.leaf`), and the rest.
    leaves: list[FieldPlan] = field(default_factory=list)
    others: list[FieldPlan] = field(default_factory=list)
    # How a level is answered, made at first use (`baton.engine.rows`).
    made: Made | None = None

    def __post_init__(self) -> None:
        self.key_bytes = sum(len(key) + 4 for key in self.keys) + 2
        self.template = dict.fromkeys(self.keys)
        self.leaves = [f for f in self.fields if f.leaf is not None]
        self.others = [f for f in self.fields if f.leaf is None]


class Compiler:
    """Compiles the selection sets of one operation, for one set of `@skip`/`@include`
    variable values."""

    def __init__(
        self,
        schema: Schema,
        fragments: Mapping[str, FragmentDefinitionNode],
        variables: VariableValues | None,
    ) -> None:
        self.strawberry = schema
        self.schema: GraphQLSchema = schema._schema
        self.fragments = fragments
        self.variables = variables
        self._abstract: dict[GraphQLAbstractType, dict[type, GraphQLObjectType]] = {}
        self._serializers: dict[GraphQLNamedType, Serialize] = {}
        self._members: dict[GraphQLNamedType, dict[int, str]] = {}
        self._weighed: dict[GraphQLNamedType, bool] = {}
        self._converters: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {}

    def weighs(self, type_: GraphQLScalarType | GraphQLEnumType) -> bool:
        """Whether the response's byte budget counts values of `type_` (see `leaves`)."""
        found = self._weighed.get(type_)
        if found is None:
            found = self._weighed[type_] = weighed(type_)
        return found

    def serializer(self, type_: GraphQLScalarType | GraphQLEnumType) -> Serialize:
        found = self._serializers.get(type_)
        if found is None:
            found = self._serializers[type_] = serializer(type_, self.members(type_))
        return found

    def members(self, type_: GraphQLScalarType | GraphQLEnumType) -> dict[int, str]:
        """The names of the members of enum `type_` its serialiser has seen, by `id()`."""
        found = self._members.get(type_)
        if found is None:
            found = self._members[type_] = {}
        return found

    def type_plan(self, runtime_type: GraphQLObjectType, selection_sets: list[Any]) -> TypePlan:
        collected = collect(
            self.schema, self.fragments, runtime_type, selection_sets, self.variables
        )
        introspects = False
        fields = []
        for ordinal, (key, nodes) in enumerate(collected.items()):
            name = nodes[0].name.value
            if name in ("__schema", "__type"):
                introspects = True
                continue
            plan = self._field_plan(runtime_type, key, nodes)
            plan.ordinal = ordinal
            plan.leaf = _leaf_of(plan)
            fields.append(plan)
        return TypePlan(runtime_type, fields, tuple(collected), introspects)

    def _field_plan(self, parent: GraphQLObjectType, key: str, nodes: list[FieldNode]) -> FieldPlan:
        name = nodes[0].name.value
        if name == "__typename":
            definition = GraphQLField(GraphQLNonNull(self.schema.type_map["String"]))  # type: ignore[arg-type]
            return FieldPlan(
                key,
                nodes,
                parent,
                definition,
                Kind.TYPENAME,
                None,
                None,
                False,
                None,
                False,
                {},
                None,
                self,
            )
        definition = parent.fields[name]
        sf = (definition.extensions or {}).get(DEFINITION)
        if not isinstance(sf, StrawberryField):
            raise Unsupported(f"{parent.name}.{name} has no Strawberry definition")
        if sf.extensions or sf.permission_classes:
            raise Unsupported(f"{parent.name}.{name} has field extensions")
        static = None if _has_variables(nodes[0]) else self.convert_static(definition, nodes[0], sf)
        batch = cast(Mapping[str, Any], sf.metadata or {}).get(BATCH)
        if batch is not None:
            return self._batch_plan(key, nodes, parent, definition, batch, static, sf)
        return self._single_plan(key, nodes, parent, definition, static, sf)

    def _batch_plan(
        self,
        key: str,
        nodes: list[FieldNode],
        parent: GraphQLObjectType,
        definition: GraphQLField,
        batch: BatchResolver,
        static: dict[str, Any] | None,
        sf: StrawberryField,
    ) -> FieldPlan:
        single = self._single_plan(key, nodes, parent, definition, static, sf)
        plan = FieldPlan(
            key,
            nodes,
            parent,
            definition,
            Kind.BATCH,
            None,
            batch,
            False,
            None,
            True,
            static,
            sf,
            self,
            single=single if single.kind is Kind.CALL else None,
        )
        plan.batch_selection = "selection" in inspect.signature(batch).parameters
        return plan

    def _single_plan(
        self,
        key: str,
        nodes: list[FieldNode],
        parent: GraphQLObjectType,
        definition: GraphQLField,
        static: dict[str, Any] | None,
        sf: StrawberryField,
    ) -> FieldPlan:
        name = nodes[0].name.value
        resolver = sf.base_resolver
        getter = cast(Mapping[str, Any], sf.metadata or {}).get(READS)
        if resolver is None or (getter is not None and not definition.args):
            get = getter or operator.attrgetter(sf.python_name)
            return FieldPlan(
                key,
                nodes,
                parent,
                definition,
                Kind.ATTRIBUTE,
                get,
                None,
                False,
                None,
                False,
                {},
                sf,
                self,
            )
        if resolver.root_parameter or resolver.parent_parameter:
            raise Unsupported(f"{parent.name}.{name} asks for root/parent")
        info = resolver.info_parameter
        return FieldPlan(
            key,
            nodes,
            parent,
            definition,
            Kind.CALL,
            None,
            cast(Callable[..., Any], resolver.wrapped_func),
            resolver.self_parameter is not None,
            info.name if info else None,
            resolver.is_async or sf.is_subscription,
            static,
            sf,
            self,
        )

    def convert_static(
        self, definition: GraphQLField, node: FieldNode, sf: StrawberryField
    ) -> dict[str, Any]:
        if not definition.args:
            return {}
        return self._convert(sf, get_argument_values(definition, node, None))

    def convert(self, plan: FieldPlan, coerced: dict[str, Any]) -> dict[str, Any]:
        assert plan.strawberry is not None
        return self._convert(plan.strawberry, coerced)

    def _convert(self, sf: StrawberryField, coerced: dict[str, Any]) -> dict[str, Any]:
        convert = self._converters.get(id(sf))
        if convert is None:
            registry = self.strawberry.schema_converter.scalar_registry
            convert = field_converter(sf, registry, self.strawberry.config)
            self._converters[id(sf)] = convert
        return convert(coerced)

    def runtime_types(self, abstract: GraphQLAbstractType) -> dict[type, GraphQLObjectType]:
        """Python class -> object type, for values of a union or interface."""
        found = self._abstract.get(abstract)
        if found is None:
            found = {}
            for possible in self.schema.get_possible_types(abstract):
                definition = (possible.extensions or {}).get(DEFINITION)
                origin = getattr(definition, "origin", None)
                if origin is None:
                    raise Unsupported(f"{possible.name} has no Python class")
                found[origin] = possible
            self._abstract[abstract] = found
        return found


def _leaf_of(plan: FieldPlan) -> tuple[GraphQLScalarType | GraphQLEnumType, bool] | None:
    if plan.kind is Kind.BATCH or plan.is_async:
        return None
    nullable, inner = unwrap(plan.return_type)
    if isinstance(inner, GraphQLScalarType | GraphQLEnumType):
        return inner, not nullable
    return None


def _has_variables(node: FieldNode) -> bool:
    def holds(value: ValueNode) -> bool:
        if isinstance(value, VariableNode):
            return True
        for child in getattr(value, "values", None) or ():
            if holds(child):
                return True
        return any(holds(child.value) for child in getattr(value, "fields", None) or ())

    return any(holds(argument.value) for argument in node.arguments or ())


def unwrap(type_: GraphQLOutputType) -> tuple[bool, GraphQLOutputType]:
    """(nullable, the type inside NonNull)."""
    if isinstance(type_, GraphQLNonNull):
        return False, type_.of_type
    return True, type_


def is_leaf(type_: GraphQLOutputType) -> bool:
    return is_leaf_type(get_named_type(type_))
