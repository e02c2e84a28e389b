"""A request's variables, coerced as graphql-core coerces them, with less work per request.

graphql-core's `get_variable_values` reads each variable's type off the document, walks the
value once to check its depth and again to coerce it, asking at every level what kind of type
it has: some 20 us for a mutation's input object, on every request. The answer depends on the
operation only through its variable definitions, so `Coercer` reads them once per operation
and compiles, per input type, a function that does what graphql-core's `coerce_input_value`
does for that type. Values that coerce take this path; anything else (a value that does not
coerce, a missing non-null variable, a variable with a default) is handed to
`get_variable_values` whole, which then says what is wrong in its own words.

The depth check is not repeated: the engine refuses variables nested deeper than
`baton.storable.MAX_DEPTH` before coercing them, far below graphql-core's limit.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

from graphql import (
    GraphQLError,
    GraphQLInputObjectType,
    GraphQLInputType,
    GraphQLList,
    GraphQLNonNull,
    GraphQLSchema,
    Undefined,
    VariableDefinitionNode,
)
from graphql.execution.get_variable_signature import (
    GraphQLVariableSignature,
    get_variable_signature,
)
from graphql.execution.values import (
    VariableValues,
    VariableValuesOrErrors,
    VariableValueSource,
    get_variable_values,
)
from graphql.language.parser import MAX_NESTING_DEPTH
from graphql.pyutils import is_iterable
from graphql.type.definition import assert_leaf_type, is_required_input_field
from graphql.utilities.coerce_input_value import coerce_default_value

from baton.storable import MAX_DEPTH

# What graphql-core's depth check would refuse never gets here (see the module docstring).
assert MAX_DEPTH + 1 < MAX_NESTING_DEPTH

Coerce = Callable[[Any], Any]  # a value -> its coerced value, or Undefined


class Coercer:
    """Coerces variables for one operation's variable definitions."""

    def __init__(
        self,
        schema: GraphQLSchema,
        definitions: Collection[VariableDefinitionNode],
        max_errors: int,
    ) -> None:
        self.schema = schema
        self.definitions = definitions
        self.max_errors = max_errors
        self._fast: list[tuple[GraphQLVariableSignature, bool, Coerce]] | None = []
        for node in definitions:
            signature = get_variable_signature(schema, node)
            if isinstance(signature, GraphQLError) or node.default_value:
                self._fast = None  # graphql-core's path handles these
                break
            required = isinstance(signature.type, GraphQLNonNull)
            self._fast.append((signature, required, coercer(signature.type)))

    def __call__(self, inputs: dict[str, Any]) -> VariableValuesOrErrors:
        if self._fast is not None:
            sources: dict[str, VariableValueSource] = {}
            coerced: dict[str, Any] = {}
            for signature, required, coerce in self._fast:
                name = signature.name
                value = inputs.get(name, Undefined)
                if value is Undefined:
                    if required:
                        break
                    sources[name] = VariableValueSource(signature)
                    continue
                sources[name] = VariableValueSource(signature, value)
                result = coerce(value)
                if result is Undefined:
                    break
                coerced[name] = result
            else:
                return VariableValues(sources, coerced)
        return get_variable_values(
            self.schema, self.definitions, inputs, max_errors=self.max_errors
        )


_COERCERS: dict[Any, Coerce] = {}


def coercer(type_: GraphQLInputType) -> Coerce:
    """graphql-core's `coerce_input_value(value, type_)` as a function of the value alone."""
    found = _COERCERS.get(type_)
    if found is None:
        found = _COERCERS[type_] = _compile(type_)
    return found


def _compile(type_: GraphQLInputType) -> Coerce:
    if isinstance(type_, GraphQLNonNull):
        inner = coercer(type_.of_type)

        def non_null(value: Any) -> Any:
            if value is None or value is Undefined:
                return Undefined
            return inner(value)

        return non_null
    nullable = _nullable(type_)

    def maybe_null(value: Any) -> Any:
        if value is None or value is Undefined:
            return None
        return nullable(value)

    return maybe_null


def _nullable(type_: GraphQLInputType) -> Coerce:
    """The coercion of a value that is not None (nor Undefined)."""
    if isinstance(type_, GraphQLList):
        return _list(coercer(type_.of_type))
    if isinstance(type_, GraphQLInputObjectType):
        return _input_object(type_)
    leaf = assert_leaf_type(type_)
    coerce_leaf = leaf.coerce_input_value

    def coerce(value: Any) -> Any:
        try:
            return coerce_leaf(value)
        except Exception:  # as graphql-core: any failure means "does not coerce"
            return Undefined

    return coerce


def _list(item: Coerce) -> Coerce:
    def coerce(value: Any) -> Any:
        if type(value) is not list and not is_iterable(value):
            one = item(value)  # a non-list value is a list of one
            return Undefined if one is Undefined else [one]
        coerced = []
        for element in value:
            one = item(element)
            if one is Undefined:
                return Undefined
            coerced.append(one)
        return coerced

    return coerce


def _input_object(type_: GraphQLInputObjectType) -> Coerce:
    fields: list[tuple[str, str, Any, bool, Coerce]] | None = None

    def plan() -> list[tuple[str, str, Any, bool, Coerce]]:
        # Built at first use: input types can refer to each other in cycles.
        return [
            (
                name,
                field.out_name or name,
                field,
                is_required_input_field(field),
                coercer(field.type),
            )
            for name, field in type_.fields.items()
        ]

    def coerce(value: Any) -> Any:
        nonlocal fields
        if not isinstance(value, dict):
            return Undefined
        if fields is None:
            fields = plan()
        known = type_.fields
        defined = 0
        for name, given in value.items():
            if given is Undefined:
                continue
            defined += 1
            if name not in known:
                return Undefined
        coerced: dict[str, Any] = {}
        for name, out_name, field, required, coerce_field in fields:
            given = value.get(name, Undefined)
            if given is Undefined:
                if required:
                    return Undefined
                default = coerce_default_value(field)
                if default is not Undefined:
                    coerced[out_name] = default
            else:
                one = coerce_field(given)
                if one is Undefined:
                    return Undefined
                coerced[out_name] = one
        if type_.is_one_of:
            keys = list(coerced)
            if defined != 1 or len(keys) != 1 or coerced[keys[0]] is None:
                return Undefined
        return type_.out_type(coerced)

    return coerce
