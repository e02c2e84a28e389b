"""The engine's entry points: run a request (query or mutation), or open a subscription.

A request is refused before execution, with `errors` and no `data`, when its document does not
parse or validate, names no runnable operation, or its variables do not coerce. Otherwise it runs
on its compiled plan; operations that select `__schema` or `__type` (introspection) run on
graphql-core's executor, and when they select nothing else their result is cached per
document and variables: the schema never changes while the process lives.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Hashable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, cast

import orjson
from graphql import FieldNode, GraphQLError, OperationDefinitionNode, OperationType, execute
from graphql.execution.values import VariableValues, get_variable_values
from strawberry.schema.schema import Schema

from baton.budget import row_budget
from baton.engine.cost import CostModel, CostRefusal, IntrospectionBudget
from baton.engine.documents import DocumentCache, Prepared, refusal
from baton.engine.errors import formatted
from baton.engine.execute import Run, complete_item, root, stream_failed
from baton.engine.fields import directive_variables
from baton.engine.limits import Limits
from baton.engine.plans import Compiler, FieldPlan, TypePlan, Unsupported
from baton.engine.sharing import SharedOutcomes, share_key
from baton.storable import unstorable

log = logging.getLogger("baton.engine")

MAX_VARIABLE_ERRORS = 20
_MISSING: Any = object()


@dataclass
class Outcome:
    """What one execution answers: `data` (absent when refused before execution) and errors."""

    data: Any = _MISSING
    errors: list[dict[str, Any]] = field(default_factory=list)
    _encoded: bytes | None = field(default=None, repr=False)
    _text: str | None = field(default=None, repr=False)
    final_error: bool = False  # the stream's source failed: these errors end it

    @property
    def refused(self) -> bool:
        return self.data is _MISSING

    def payload(self) -> dict[str, Any]:
        body: dict[str, Any] = {}
        if self.data is not _MISSING:
            body["data"] = self.data
        if self.errors:
            body["errors"] = self.errors
        return body

    def encoded(self) -> bytes:
        if self._encoded is None:
            self._encoded = orjson.dumps(self.payload())
        return self._encoded

    def text(self) -> str:
        """The payload as JSON text, encoded once however many subscribers it goes to."""
        if self._text is None:
            self._text = self.encoded().decode()
        return self._text


def refused(*errors: GraphQLError) -> Outcome:
    return Outcome(errors=formatted(errors))


@dataclass(frozen=True)
class Request:
    query: str
    variables: dict[str, Any] | None = None
    operation_name: str | None = None


@dataclass(eq=False)
class _Ready:
    prepared: Prepared
    operation: OperationDefinitionNode
    variables: VariableValues
    plan: TypePlan | None  # None: run on graphql-core
    compiler: Compiler | None


class Engine:
    def __init__(self, schema: Schema, limits: Limits) -> None:
        self.schema = schema
        self.limits = limits
        self.documents = DocumentCache(schema._schema, limits)
        self.shared: SharedOutcomes[Outcome] = SharedOutcomes()
        self.costs = CostModel(schema._schema)

    def operation_type(self, request: Request) -> OperationType | None:
        """The kind of operation `request` would run (None when it cannot run at all)."""
        prepared = self.documents.get(request.query)
        if prepared.errors:
            return None
        operation = prepared.operation(request.operation_name)
        return None if isinstance(operation, GraphQLError) else operation.operation

    def _ready(self, request: Request) -> _Ready | Outcome:
        if request.variables is not None:
            reason = unstorable(request.variables, "variables")
            if reason is not None:
                return refused(refusal(reason))
        prepared = self.documents.get(request.query)
        if prepared.errors:
            return refused(*prepared.errors)
        operation = prepared.operation(request.operation_name)
        if isinstance(operation, GraphQLError):
            return refused(operation)
        coerced = get_variable_values(
            self.schema._schema,
            operation.variable_definitions or (),
            request.variables or {},
            max_errors=MAX_VARIABLE_ERRORS,
        )
        if isinstance(coerced, list):
            return refused(*(_as_input_error(e) for e in coerced))
        root = self.schema._schema.get_root_type(operation.operation)
        assert root is not None, "validation refuses operations the schema lacks"
        cost_key = self._key(prepared, "cost", operation, coerced, self.costs.size_arguments)
        if cost_key not in prepared.cache:
            try:
                prepared.remember(
                    cost_key,
                    self.costs.check(
                        root,
                        operation.selection_set,
                        prepared.fragments,
                        coerced,
                        self.limits.max_cost,
                    ),
                )
            except CostRefusal as too_costly:
                return refused(too_costly)
        plan, compiler = self._plan(prepared, operation, coerced)
        return _Ready(prepared, operation, coerced, plan, compiler)

    @staticmethod
    def _key(
        prepared: Prepared,
        kind: str,
        operation: OperationDefinitionNode,
        variables: VariableValues,
        arguments: frozenset[str] = frozenset(),
    ) -> tuple[Any, ...]:
        """What a `kind` memo of `operation` depends on: the values of the variables that
        @skip/@include, or the field arguments named in `arguments`, read."""
        names_key = ("variables", arguments)
        names = prepared.cache.get(names_key)
        if names is None:
            names = prepared.cache[names_key] = directive_variables(
                prepared.document.definitions if prepared.document else (), arguments
            )
        return (
            kind,
            operation.name.value if operation.name else None,
            tuple(sorted((n, repr(variables.coerced.get(n))) for n in names)),
        )

    def _plan(
        self, prepared: Prepared, operation: OperationDefinitionNode, variables: VariableValues
    ) -> tuple[TypePlan | None, Compiler | None]:
        key = self._key(prepared, "plan", operation, variables)
        cached = prepared.cache.get(key)
        if cached is None:
            compiler = Compiler(self.schema, prepared.fragments, variables)
            root = self.schema._schema.get_root_type(operation.operation)
            assert root is not None, "validation refuses operations the schema lacks"
            try:
                plan: TypePlan | None = compiler.type_plan(root, [operation.selection_set])
                if plan is not None and plan.introspects:
                    plan = None
            except Unsupported as exc:
                log.warning("running an operation on graphql-core: %s", exc)
                plan = None
            cached = prepared.remember(key, (plan, compiler))
        return cast(tuple[TypePlan | None, Compiler | None], cached)

    async def execute(self, request: Request, context: Any) -> Outcome:
        """Run a query or mutation (a subscription is refused: use `subscribe`)."""
        ready = self._ready(request)
        if isinstance(ready, Outcome):
            return ready
        kind = ready.operation.operation
        if kind is OperationType.SUBSCRIPTION:
            return refused(refusal("subscriptions need a WebSocket (graphql-transport-ws)"))
        if ready.plan is None or ready.compiler is None:
            return await self._on_graphql_core(ready, request, context)
        run = Run(ready.compiler, context, ready.variables)
        try:
            with row_budget(self.limits.max_rows):
                async with asyncio.timeout(self.limits.max_seconds):
                    data = await root(run, ready.plan, serial=kind is OperationType.MUTATION)
        except TimeoutError:
            message = f"the operation ran longer than {self.limits.max_seconds:g} seconds"
            return Outcome(None, [{"message": message, "extensions": {"code": "timeout"}}])
        return Outcome(data, formatted(run.errors))

    async def _on_graphql_core(self, ready: _Ready, request: Request, context: Any) -> Outcome:
        pure = _only_introspection(ready)
        key = ("introspection", request.operation_name, orjson.dumps(request.variables or {}))
        if pure:
            cached = ready.prepared.cache.get(key)
            if cached is not None:
                return cached  # type: ignore[no-any-return]
        budget = IntrospectionBudget(self.limits.max_cost)
        result = execute(
            self.schema._schema,
            ready.prepared.document,  # type: ignore[arg-type]
            root_value=None,
            context_value=context,
            variable_values=request.variables or {},
            operation_name=request.operation_name,
            executor_class=self.schema.execution_context_class,
            middleware=[budget],
        )
        if inspect.isawaitable(result):
            result = await result
        over = [e for e in result.errors or () if isinstance(e.original_error, CostRefusal)]
        if over:
            return refused(over[0].original_error)  # type: ignore[arg-type]
        outcome = Outcome(result.data, formatted(result.errors or ()))
        if pure:
            ready.prepared.remember(key, outcome)
        return outcome

    async def subscribe(
        self, request: Request, context: Any, *, sharing: Hashable | None = None
    ) -> AsyncGenerator[Outcome, None] | Outcome:
        """A subscription's stream of outcomes, or the outcome that refuses it.

        With `sharing` (what the result may depend on besides the document and variables: the
        principal), subscribers that share it, the document and the variables share one
        execution and one encoded payload per item their streams yield (items that name
        themselves with `share_key`)."""
        ready = self._ready(request)
        if isinstance(ready, Outcome):
            return ready
        if ready.operation.operation is not OperationType.SUBSCRIPTION:
            return refused(refusal("this operation is not a subscription"))
        if ready.plan is None or ready.compiler is None or len(ready.plan.fields) != 1:
            return refused(refusal("a subscription selects exactly one field"))
        field = ready.plan.fields[0]
        run = Run(ready.compiler, context, ready.variables)
        try:
            assert field.call is not None
            kwargs = run.kwargs(field)
            if field.info_name is not None:
                kwargs = {**kwargs, field.info_name: run.info}
            source = field.call(None, **kwargs) if field.wants_self else field.call(**kwargs)
            if inspect.isawaitable(source):
                source = await source
        except Exception as exc:
            run.settle(run.fail(exc, field, (None, field.key, 0)), None)
            return Outcome(None, formatted(run.errors))
        group = None
        if sharing is not None:
            variables = orjson.dumps(request.variables or {}, option=orjson.OPT_SORT_KEYS)
            group = (ready.prepared.text, request.operation_name, variables, sharing)
        return self._stream(run, field, source, group)

    async def _stream(
        self, run: Run, field: FieldPlan, source: AsyncIterator[Any], group: Hashable | None
    ) -> AsyncGenerator[Outcome, None]:
        while True:
            try:
                item = await anext(source)
            except StopAsyncIteration:
                return
            except Exception as exc:
                yield Outcome(None, formatted(stream_failed(run, field, exc)), final_error=True)
                return
            key = share_key(item)
            if group is None or key is None:
                yield await _complete(run, field, item)
            else:
                yield await self.shared.get((group, key), partial(_complete, run, field, item))


async def _complete(run: Run, field: FieldPlan, item: Any) -> Outcome:
    data, errors = await complete_item(run, field, item)
    return Outcome(data, formatted(errors))


def _only_introspection(ready: _Ready) -> bool:
    """Whether the operation reads the schema and nothing else (fragments excluded: what they
    select could depend on the caller), so its answer is the same for everyone."""
    if ready.operation.operation is not OperationType.QUERY:
        return False
    return all(
        isinstance(s, FieldNode) and s.name.value in ("__schema", "__type", "__typename")
        for s in ready.operation.selection_set.selections
    )


def _as_input_error(error: GraphQLError) -> GraphQLError:
    error.extensions = {**(error.extensions or {}), "code": "invalid_input"}
    return error
