"""A field's arguments, coerced as graphql-core's `get_argument_values` coerces them, with the
work that does not depend on the request's variables done once.

Arguments without variables are coerced when a plan is compiled (`FieldPlan.static_kwargs`).
The rest went through `get_argument_values` on every request, which walks each literal's AST
and asks at every level what kind of type it has: for `tasks(filter: {project: $v, states:
[working]}, first: 50)` that walk was 2 % of the server's CPU. Only the variables change from
one request to the next, so `ArgumentValues` reads the field's node once and keeps, per
argument, either its coerced value (a constant part is coerced by graphql-core's own
`coerce_input_literal`, once) or a small function of the coerced variables that does what
graphql-core does with them: a variable as it is, the default of an absent one, an input
object or list literal rebuilt around its constant parts.

Whatever would make graphql-core raise (an absent required argument, a null where a non-null
is wanted, a literal that does not coerce) is not reproduced: the whole field goes to
`get_argument_values`, which then raises in its own words. So do the cases not worth a fast
path: `@oneOf` input objects and custom scalars given a list or object literal that holds a
variable. Fragment variables are not used by the engine and not handled here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from graphql import (
    FieldNode,
    GraphQLField,
    GraphQLInputObjectType,
    GraphQLInputType,
    GraphQLList,
    GraphQLNonNull,
    ListValueNode,
    ObjectValueNode,
    Undefined,
    ValueNode,
    VariableNode,
)
from graphql.execution.values import VariableValues, get_argument_values
from graphql.type.definition import (
    GraphQLArgument,
    GraphQLInputField,
    is_required_argument,
    is_required_input_field,
)
from graphql.utilities.coerce_input_value import coerce_default_value, coerce_input_literal

Variables = dict[str, Any]  # coerced variable values, by name
# A part of a value that depends on the variables: the coerced value, `OMIT` (an input field or
# argument left out) or Undefined (graphql-core would raise: the field goes to graphql-core).
Dynamic = Callable[[Variables], Any]
Build = Callable[[Variables], Any]

OMIT: Any = object()
_NO_VARIABLES: Variables = {}


class _Unsupported(Exception):
    """A literal left to graphql-core for the whole field, on every request."""


class _Constant:
    """A part that holds no variable, coerced once."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


Part = _Constant | Dynamic


class ArgumentValues:
    """`get_argument_values(definition, node, variables)`, compiled for one field node."""

    def __init__(self, definition: GraphQLField, node: FieldNode) -> None:
        self.definition = definition
        self.node = node
        self._build: Build | None
        try:
            self._build = _field(definition, node)
        except _Unsupported:
            self._build = None

    def __call__(self, variables: VariableValues | None) -> dict[str, Any]:
        build = self._build
        if build is not None:
            found = build(_NO_VARIABLES if variables is None else variables.coerced)
            if found is not Undefined:
                return cast(dict[str, Any], found)
        return get_argument_values(self.definition, self.node, variables)


def _field(definition: GraphQLField, node: FieldNode) -> Build:
    # As graphql-core: the last of duplicate arguments counts, unknown ones are ignored.
    given = {argument.name.value: argument.value for argument in node.arguments or ()}
    parts: list[tuple[str, Part]] = []
    for name, argument in definition.args.items():
        value = given.get(name)
        if value is None:
            if is_required_argument(argument):
                raise _Unsupported(name)  # graphql-core: "was not provided"
            part: Part = _Constant(_default(argument))
        elif isinstance(value, VariableNode):
            part = _variable(value.name.value, argument, is_required_argument(argument))
        else:
            part = _literal(value, argument.type)
        parts.append((argument.out_name or name, part))
    return _assemble(parts, None)


def _default(input_value: GraphQLArgument | GraphQLInputField) -> Any:
    """The coerced default, or OMIT when there is none."""
    try:
        default = coerce_default_value(input_value)
    except TypeError as invalid:
        raise _Unsupported("an invalid default") from invalid
    return OMIT if default is Undefined else default


def _lazy_default(input_value: GraphQLArgument | GraphQLInputField) -> Callable[[], Any]:
    """The coerced default, asked for only when a variable is absent (an invalid default makes
    graphql-core raise only then): OMIT when there is none, Undefined when it is invalid."""
    found: list[Any] = []

    def default() -> Any:
        if not found:
            try:
                found.append(_default(input_value))
            except _Unsupported:
                found.append(Undefined)
        return found[0]

    return default


def _variable(
    name: str, input_value: GraphQLArgument | GraphQLInputField, required: bool
) -> Dynamic:
    """An argument or input field given a variable: its value as it is; when absent, the
    default (graphql-core raises for an absent `required` one, or a null non-null one)."""
    non_null = isinstance(input_value.type, GraphQLNonNull)
    default = _lazy_default(input_value)

    def get(variables: Variables) -> Any:
        value = variables.get(name, Undefined)
        if value is Undefined:
            return Undefined if required else default()
        if value is None and non_null:
            return Undefined
        return value

    return get


def _literal(node: ValueNode, type_: GraphQLInputType) -> Part:
    """`coerce_input_literal(node, type_, variables)` as a part, for a node that is not a
    variable (an argument's, an input field's and a list item's own rules handle those)."""
    assert not isinstance(node, VariableNode)
    if not _holds_variables(node):
        try:
            return _Constant(coerce_input_literal(node, type_))
        except Exception as invalid:  # an invalid default of an input field: TypeError
            raise _Unsupported(type_) from invalid
    if isinstance(type_, GraphQLNonNull):
        return _literal(node, type_.of_type)  # a literal with variables is never null
    if isinstance(type_, GraphQLList):
        return _list(node, type_)
    if isinstance(type_, GraphQLInputObjectType):
        return _input_object(node, type_)
    # A custom scalar's `parse_literal` is given the variables; graphql-core's own leaves
    # refuse a list or object (after replacing its variables). Neither is worth a fast path.
    raise _Unsupported(type_)


def _list(node: ValueNode, type_: GraphQLList[Any]) -> Part:
    item_type = type_.of_type
    if not isinstance(node, ListValueNode):
        # A list accepts a single value as a list of one.
        item = _literal(node, item_type)
        if isinstance(item, _Constant):  # an object that never coerces
            return item

        def one(variables: Variables) -> Any:
            value = item(variables)
            return Undefined if value is Undefined else [value]

        return one
    items: list[Part] = []
    non_null = isinstance(item_type, GraphQLNonNull)
    for item_node in node.values:
        if isinstance(item_node, VariableNode):
            part: Part = _variable_item(item_node.name.value, non_null)
        else:
            part = _literal(item_node, item_type)
            if isinstance(part, _Constant) and part.value is Undefined:
                return part  # the list never coerces
        items.append(part)
    constant = [p.value if isinstance(p, _Constant) else None for p in items]
    dynamic = [(i, p) for i, p in enumerate(items) if not isinstance(p, _Constant)]

    def build(variables: Variables) -> Any:
        coerced = constant.copy()
        for i, get in dynamic:
            value = get(variables)
            if value is Undefined:
                return Undefined
            coerced[i] = value
        return coerced

    return build


def _variable_item(name: str, non_null: bool) -> Dynamic:
    """A variable as a list's item: its value as it is. Null or absent, it is null in a list of
    nullable items, and makes a list of non-null items not coerce."""
    if non_null:

        def required(variables: Variables) -> Any:
            value = variables.get(name, Undefined)
            return Undefined if value is None else value

        return required

    def nullable(variables: Variables) -> Any:
        return variables.get(name)

    return nullable


def _input_object(node: ValueNode, type_: GraphQLInputObjectType) -> Part:
    if not isinstance(node, ObjectValueNode):
        return _Constant(Undefined)
    if type_.is_one_of:
        raise _Unsupported(type_)
    fields = type_.fields
    given = {field.name.value: field.value for field in node.fields}  # the last one counts
    if any(name not in fields for name in given):
        return _Constant(Undefined)
    parts: list[tuple[str, Part]] = []
    for name, field in fields.items():
        value = given.get(name)
        if value is None:
            if is_required_input_field(field):
                return _Constant(Undefined)
            part: Part = _Constant(_default(field))
        elif isinstance(value, VariableNode):
            part = _variable(value.name.value, field, is_required_input_field(field))
        else:
            part = _literal(value, field.type)
            if isinstance(part, _Constant) and part.value is Undefined:
                return part
        parts.append((field.out_name or name, part))
    out_type = type_.out_type
    if out_type is GraphQLInputObjectType.out_type:  # the identity: not worth a call
        return _assemble(parts, None)
    return _assemble(parts, out_type)


def _assemble(parts: list[tuple[str, Part]], finish: Callable[[Any], Any] | None) -> Build:
    """A dict of the parts, in their order, without the omitted ones; Undefined when a part
    is. Built from a copy of the constant parts, with a slot kept for each dynamic one."""
    if len({key for key, _ in parts}) != len(parts):
        raise _Unsupported("two parts with one out name")
    template: dict[str, Any] = {}
    slots: list[tuple[str, Dynamic]] = []
    for key, part in parts:
        if isinstance(part, _Constant):
            if part.value is Undefined:
                raise _Unsupported("a constant that does not coerce")
            if part.value is not OMIT:
                template[key] = part.value
        else:
            template[key] = None
            slots.append((key, part))

    def build(variables: Variables) -> Any:
        coerced = template.copy()
        for key, get in slots:
            value = get(variables)
            if value is OMIT:
                del coerced[key]
            elif value is Undefined:
                return Undefined
            else:
                coerced[key] = value
        return coerced if finish is None else finish(coerced)

    return build


def _holds_variables(node: ValueNode) -> bool:
    if isinstance(node, VariableNode):
        return True
    if isinstance(node, ListValueNode):
        return any(_holds_variables(item) for item in node.values)
    if isinstance(node, ObjectValueNode):
        return any(_holds_variables(field.value) for field in node.fields)
    return False
