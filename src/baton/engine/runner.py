"""The engine's entry points: run a request (query or mutation), or open a subscription.

A request is refused before execution, with `errors` and no `data`, when its document does not
parse or validate, names no runnable operation, its variables hold more than
`Limits.max_variable_values` values or do not coerce, an argument fails its check or the
operation costs more than the budget (`baton.engine.cost`). Otherwise it runs on its compiled
plan, within the request's budgets: rows and bytes loaded, bytes of response, seconds. The
introspection fields (`__schema`, `__type`) run on graphql-core's executor, apart from the rest
of the operation and counted in its cost like the rest; their answer is cached per document and
variables, as the schema never changes while the process lives.

Mutations run their root fields one after another, and stop at the first whose failure nulls
the whole response, as graphql-core does: a client is never answered `data: null` for changes
it was not told of. A response that outgrows its byte budget ends the execution with
`too_expensive` and no data; for a mutation, the message names the root fields that ran.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, cast
from weakref import WeakValueDictionary

import orjson
from graphql import (
    DocumentNode,
    GraphQLError,
    GraphQLObjectType,
    OperationDefinitionNode,
    OperationType,
    SelectionSetNode,
    execute,
)
from graphql.execution.values import VariableValues
from strawberry.schema.schema import Schema

from baton import inputs
from baton.budget import request_budget
from baton.deadlines import Deadlines
from baton.engine.cost import Costed, CostModel, CostRefusal
from baton.engine.documents import DocumentCache, Prepared, refusal
from baton.engine.errors import formatted
from baton.engine.execute import ResponseTooLarge, Run, complete_item, root, stream_failed
from baton.engine.fields import collect, directive_variables
from baton.engine.limits import Limits
from baton.engine.plans import Compiler, FieldPlan, TypePlan, Unsupported
from baton.engine.sharing import SharedOutcomes, share_key
from baton.engine.variables import Coercer
from baton.live.streams import Passing, Pushable, Sink
from baton.telemetry.requests import note_operation
from baton.telemetry.spans import span

if TYPE_CHECKING:
    from opentelemetry.trace import Span

log = logging.getLogger("baton.engine")

MAX_VARIABLE_ERRORS = 20
INLINE_VALUES = 200  # variables holding more are coerced on a worker thread
INTROSPECTION = ("__schema", "__type")
MAX_FRAMES = 4  # frames kept with one outcome (`Outcome.framed`)
_MISSING: Any = object()


@dataclass
class Outcome:
    """What one execution answers: `data` (absent when refused before execution) and errors."""

    data: Any = _MISSING
    errors: list[dict[str, Any]] = field(default_factory=list)
    # The source stream of a subscription failed: these errors end it.
    final_error: bool = False
    _encoded: bytes | None = field(default=None, repr=False)
    _text: str | None = field(default=None, repr=False)
    _frames: dict[Hashable, bytes] | None = field(default=None, repr=False)

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

    def frame(self, key: Hashable) -> bytes | None:
        """The bytes a door writes for this payload (a whole WebSocket frame, an SSE event),
        kept under `key` (the door, and what it puts around the payload) by `keep_frame`:
        made once for every subscriber whose frame is the same."""
        frames = self._frames
        return None if frames is None else frames.get(key)

    def keep_frame(self, key: Hashable, frame: bytes) -> bytes:
        """Keep `frame` under `key` (at most `MAX_FRAMES` are kept); returns it."""
        frames = self._frames
        if frames is None:
            frames = self._frames = {}
        if len(frames) < MAX_FRAMES:
            frames[key] = frame
        return frame


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
        # An outcome holds its payload twice once sent (bytes and text), and up to
        # `MAX_FRAMES` frames made of it.
        self.shared: SharedOutcomes[Outcome] = SharedOutcomes(
            size=lambda outcome: (2 + MAX_FRAMES) * (len(outcome.encoded()) + 64)
        )
        self.costs = CostModel(schema._schema)
        self.deadlines = Deadlines()  # of its operations (`Limits.max_seconds`)
        self._groups: WeakValueDictionary[tuple[Any, ...], _Group] = WeakValueDictionary()

    async def operation_type(self, request: Request) -> OperationType | None:
        """The kind of operation `request` would run (None when it cannot run at all)."""
        prepared = await self.documents.prepare(request.query)
        if prepared.errors:
            return None
        operation = prepared.operation(request.operation_name)
        return None if isinstance(operation, GraphQLError) else operation.operation

    async def _ready(self, request: Request) -> _Ready | Outcome:
        values = 0
        if request.variables is not None:
            # The check every door's input gets (`baton.inputs`), before coercion.
            checked = inputs.check(request.variables, "variables", self.limits.max_variable_values)
            values = checked.values
            if checked.problem is not None:
                return refused(refusal(checked.problem.message))
        prepared = await self.documents.prepare(request.query)
        if prepared.errors:
            return refused(*prepared.errors)
        operation = prepared.operation(request.operation_name)
        if isinstance(operation, GraphQLError):
            return refused(operation)
        coercer_key = ("variables coercer", operation.name.value if operation.name else None)
        coercer = prepared.cache.get(coercer_key)
        if coercer is None:
            coercer = prepared.remember(
                coercer_key,
                Coercer(
                    self.schema._schema,
                    operation.variable_definitions or (),
                    max_errors=MAX_VARIABLE_ERRORS,
                ),
            )
        coerce = partial(coercer, request.variables or {})
        # graphql-core coerces a value in some 20 µs: many are coerced off the event loop.
        coerced = await self.documents.off_loop(coerce) if values > INLINE_VALUES else coerce()
        if isinstance(coerced, list):
            return refused(*(_as_input_error(e) for e in coerced))
        root_type = self.schema._schema.get_root_type(operation.operation)
        assert root_type is not None, "validation refuses operations the schema lacks"
        too_costly = self._cost(prepared, operation, root_type, coerced)
        if too_costly is not None:
            return refused(too_costly)
        plan = self._plan(prepared, operation, coerced)
        if isinstance(plan, GraphQLError):
            # A @skip/@include on a root field given null: graphql-core answers it so too.
            return Outcome(None, formatted([plan]))
        return _Ready(prepared, operation, coerced, *plan)

    def _cost(
        self,
        prepared: Prepared,
        operation: OperationDefinitionNode,
        root_type: GraphQLObjectType,
        variables: VariableValues,
    ) -> CostRefusal | None:
        """Why the operation may not run for its cost or its arguments (None: it may). A
        walk's cost is kept for the values of the variables that size lists and decide
        @skip/@include, and holds for other values of the rest once they pass the same checks
        (`CostModel.recheck`). A refusal is not kept: it may depend on any value, even one
        inside a literal, and the walk that finds it stops there."""
        key = self._key(prepared, "cost", operation, variables, self.costs.sizing)
        kept: Costed | None = prepared.cache.get(key)
        try:
            if kept is not None and self.costs.recheck(kept, variables):
                return None
            costed = self.costs.check(
                root_type, operation.selection_set, prepared.fragments, variables,
                self.limits.max_cost,
            )  # fmt: skip
        except CostRefusal as refused_for:
            return refused_for
        if kept is None:
            prepared.remember(key, costed)
        return None

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
    ) -> tuple[TypePlan | None, Compiler | None] | GraphQLError:
        key = self._key(prepared, "plan", operation, variables)
        cached = prepared.cache.get(key)
        if cached is None:
            compiler = Compiler(self.schema, prepared.fragments, variables)
            root_type = self.schema._schema.get_root_type(operation.operation)
            assert root_type is not None, "validation refuses operations the schema lacks"
            try:
                plan: TypePlan | None = compiler.type_plan(root_type, [operation.selection_set])
            except Unsupported as exc:
                log.warning("running an operation on graphql-core: %s", exc)
                plan = None
            except GraphQLError as error:
                return error
            cached = prepared.remember(key, (plan, compiler))
        return cast(tuple[TypePlan | None, Compiler | None], cached)

    async def execute(self, request: Request, context: Any) -> Outcome:
        """Run a query or mutation (a subscription is refused: use `subscribe`)."""
        ready = await self._ready(request)
        if isinstance(ready, Outcome):
            return ready
        kind = ready.operation.operation
        if kind is OperationType.SUBSCRIPTION:
            return refused(
                refusal(
                    "a subscription needs a stream: a WebSocket (graphql-transport-ws) or "
                    "Server-Sent Events (Accept: text/event-stream)"
                )
            )
        name = _noted(ready.operation)
        if ready.plan is None or ready.compiler is None:
            with span("graphql.execute") as traced:
                if traced is not None:
                    _describe(traced, kind, name)
                return await self._on_graphql_core(ready, request, context)
        run = Run(ready.compiler, context, ready.variables, self.limits.max_response_bytes)
        limits = self.limits
        try:
            with (
                span("graphql.execute") as traced,
                request_budget(limits.max_rows, limits.max_loaded_bytes),
            ):
                if traced is not None:
                    _describe(traced, kind, name)
                with self.deadlines.within(limits.max_seconds):
                    data = await root(run, ready.plan, serial=kind is OperationType.MUTATION)
                    errors = run.errors
                    if ready.plan.introspects:
                        data, errors = await self._introspect(ready, request, context, data, run)
        except TimeoutError:
            message = f"the operation ran longer than {limits.max_seconds:g} seconds"
            return Outcome(None, [{"message": message, "extensions": {"code": "timeout"}}])
        except ResponseTooLarge:
            return _too_large(limits.max_response_bytes, kind, run.ran)
        return Outcome(data, formatted(errors))

    async def _introspect(
        self, ready: _Ready, request: Request, context: Any, data: Any, run: Run
    ) -> tuple[Any, list[GraphQLError]]:
        """The operation's introspection fields, run on graphql-core and put in their places
        among the rest of `data` (the engine's answer, which holds them as nulls)."""
        errors = run.errors
        key = ("introspection", request.operation_name, orjson.dumps(request.variables or {}))
        cached = ready.prepared.cache.get(key)
        if cached is None:
            cached = ready.prepared.remember(key, await self._introspection(ready, context))
        answer, more = cast(tuple[Any, list[GraphQLError]], cached)
        run.charge(len(orjson.dumps(answer)) if answer is not None else 0)
        errors = [*errors, *more]
        if data is None or answer is None:
            return None, errors
        for response_key, value in answer.items():
            data[response_key] = value
        return data, errors

    async def _introspection(
        self, ready: _Ready, context: Any
    ) -> tuple[dict[str, Any] | None, list[GraphQLError]]:
        fields = collect(
            self.schema._schema,
            ready.prepared.fragments,
            self.schema._schema.query_type,  # type: ignore[arg-type]
            [ready.operation.selection_set],
            ready.variables,
        )
        selections = [
            node for nodes in fields.values() for node in nodes if node.name.value in INTROSPECTION
        ]
        operation = OperationDefinitionNode(
            operation=OperationType.QUERY,
            name=ready.operation.name,
            variable_definitions=ready.operation.variable_definitions,
            directives=(),
            selection_set=SelectionSetNode(selections=tuple(selections)),
        )
        document = DocumentNode(definitions=(operation, *ready.prepared.fragments.values()))
        result = execute(
            self.schema._schema,
            document,
            context_value=context,
            variable_values=ready.variables.coerced,
            executor_class=self.schema.execution_context_class,
        )
        if inspect.isawaitable(result):
            result = await result
        return result.data, list(result.errors or ())

    async def _on_graphql_core(self, ready: _Ready, request: Request, context: Any) -> Outcome:
        """An operation the compiler does not handle (none of Baton's own): graphql-core runs
        it whole, within the same budgets."""
        limits = self.limits
        with request_budget(limits.max_rows, limits.max_loaded_bytes):
            result = execute(
                self.schema._schema,
                ready.prepared.document,  # type: ignore[arg-type]
                root_value=None,
                context_value=context,
                variable_values=request.variables or {},
                operation_name=request.operation_name,
                executor_class=self.schema.execution_context_class,
            )
            if inspect.isawaitable(result):
                result = await result
        outcome = Outcome(result.data, formatted(result.errors or ()))
        if len(outcome.encoded()) > limits.max_response_bytes:
            return _too_large(limits.max_response_bytes, ready.operation.operation, [])
        return outcome

    async def subscribe(
        self, request: Request, context: Any, *, sharing: Hashable | None = None
    ) -> AsyncGenerator[Outcome, None] | Outcome:
        """A subscription's stream of outcomes, or the outcome that refuses it.

        With `sharing` (what the result may depend on besides the document and variables: the
        principal), subscribers that share it, the document and the variables share one
        execution and one encoded payload per item their streams yield (items that name
        themselves with `share_key`). When the source stream fails, the last outcome is marked
        `final_error`: its errors end the operation."""
        ready = await self._ready(request)
        if isinstance(ready, Outcome):
            return ready
        if ready.operation.operation is not OperationType.SUBSCRIPTION:
            return refused(refusal("this operation is not a subscription"))
        _noted(ready.operation)
        if ready.plan is None or ready.compiler is None or len(ready.plan.fields) != 1:
            return refused(refusal("a subscription selects exactly one field"))
        field = ready.plan.fields[0]
        run = Run(ready.compiler, context, ready.variables, self.limits.max_response_bytes)
        try:
            assert field.call is not None
            kwargs = run.kwargs(field)
            if field.info_name is not None:
                kwargs = {**kwargs, field.info_name: run.info_for(field)}
            source = field.call(None, **kwargs) if field.wants_self else field.call(**kwargs)
            if inspect.isawaitable(source):
                source = await source
        except Exception as exc:
            run.settle(run.fail(exc, field, (None, field.key, 0)), None)
            return Outcome(None, formatted(run.errors))
        if sharing is None:
            return self._stream(run, field, source, None)
        # As text: orjson's bytes keep their 4 KiB write buffer, held here for as long as
        # the subscription lives (bench/idle_memory.py found it the largest item).
        variables = orjson.dumps(request.variables or {}, option=orjson.OPT_SORT_KEYS)
        group = self._group(
            (ready.prepared.text, request.operation_name, variables.decode(), sharing)
        )
        stream = self._stream(run, field, source, group)
        if not isinstance(source, Pushable):
            return stream
        complete = partial(_complete, self.limits, run, field)
        return Passing(stream, _SharedPush(source, self.shared, group, complete))

    def _group(self, values: tuple[Any, ...]) -> _Group:
        """The group of subscribers sharing answers, one object for equal `values` while any
        subscriber holds it: its identity hashes and compares at once, where the tuple would
        hash and compare the principal each time, thousands of times an event."""
        group = self._groups.get(values)
        if group is None:
            group = self._groups[values] = _Group(values)
        return group

    async def _stream(
        self, run: Run, field: FieldPlan, source: AsyncIterator[Any], group: Hashable | None
    ) -> AsyncGenerator[Outcome, None]:
        complete = partial(_complete, self.limits)
        try:
            while True:
                try:
                    item = await anext(source)
                except StopAsyncIteration:
                    return
                except Exception as exc:
                    failed = formatted(stream_failed(run, field, exc))
                    yield Outcome(None, failed, final_error=True)
                    return
                key = share_key(item)
                if group is None or key is None:
                    yield await complete(run, field, item)
                else:
                    yield await self.shared.get((group, key), partial(complete, run, field, item))
                del item  # may be one subscriber's own copy of an event: not kept while it waits
        finally:
            # Closed now, not when the collector finds it: a live stream leaves its hub.
            aclose = getattr(source, "aclose", None)
            if aclose is not None:
                await aclose()


class _Group:
    """Subscribers of one document, variables and principal (`Engine._group`)."""

    __slots__ = ("__weakref__", "values")

    def __init__(self, values: tuple[Any, ...]) -> None:
        self.values = values  # the key it is interned under, held for as long as it lives


class _SharedPush:
    """Items pushed past a subscription's task (`baton.live.streams`) go on as their shared
    outcome when it is there at once (done already, or needing no I/O); one that is not goes
    through the stream, which waits for it."""

    __slots__ = ("complete", "group", "shared", "sink", "source")

    def __init__(
        self,
        source: Pushable[Any],
        shared: SharedOutcomes[Outcome],
        group: Hashable,
        complete: Callable[[Any], Awaitable[Outcome]],
    ) -> None:
        self.source: Pushable[Any] | None = source
        self.shared = shared
        self.group = group
        self.complete = complete
        self.sink: Sink[Outcome] | None = None

    def push_to(self, sink: Sink[Outcome]) -> None:
        # The source holds this once it is told, for as long as it lives: holding the source
        # here as well would keep a finished stream's source alive through this.
        source, self.source = self.source, None
        self.sink = sink
        if source is not None:
            source.push_to(self)

    def __call__(self, item: Any) -> bool:
        sink = self.sink
        if sink is None:
            return False
        outcome = self.shared.now_for(self.group, item, self.complete)
        return outcome is not None and sink(outcome)


async def _complete(limits: Limits, run: Run, field: FieldPlan, item: Any) -> Outcome:
    """One subscription item, within the same budgets of rows and bytes as a request (its
    time is bounded by the statements' own timeout: a timer per event would cost every
    subscriber of a busy stream more than the event itself)."""
    try:
        with request_budget(limits.max_rows, limits.max_loaded_bytes):
            data, errors = await complete_item(run, field, item, limits.max_response_bytes)
    except ResponseTooLarge:
        return _too_large(limits.max_response_bytes, OperationType.SUBSCRIPTION, [])
    return Outcome(data, formatted(errors))


def _noted(operation: OperationDefinitionNode) -> str | None:
    """The operation's name, noted as the request's (`baton.telemetry`); unnamed, its kind."""
    name = operation.name.value if operation.name else None
    note_operation(name or operation.operation.value)
    return name


def _describe(traced: Span, kind: OperationType, name: str | None) -> None:
    traced.set_attribute("graphql.operation.type", kind.value)
    if name is not None:
        traced.set_attribute("graphql.operation.name", name)


def _too_large(limit: int, kind: OperationType, ran: list[str]) -> Outcome:
    message = (
        f"The response would be larger than {limit} bytes, the most one response may hold; "
        "ask for fewer items or fields (large ones: packets, results, checkpoints, "
        "protocolObject)."
    )
    if kind is OperationType.MUTATION:
        done = ", ".join(ran) or "none"
        message += f" Mutations that ran (their changes are made): {done}."
    extensions = {"code": "too_expensive", "limit": limit}
    return Outcome(None, [{"message": message, "extensions": extensions}])


def _as_input_error(error: GraphQLError) -> GraphQLError:
    error.extensions = {**(error.extensions or {}), "code": "invalid_input"}
    return error
