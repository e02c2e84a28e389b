"""Running plans: one level of the response at a time.

`complete_objects` answers a type plan for a whole list of parents: every field's values are
fetched for all parents at once (batch resolvers are awaited together, one call per field per
level), then completed by the field's type: leaves serialised, lists flattened so their items
form the next level, objects recursed into.

Errors follow the GraphQL spec and graphql-core's reporting: a failing field is recorded with
its path; a failure in a non-null position travels up (as a `Failure`) to the nearest nullable
position, which becomes null. As in graphql-core's executor, once a position is null, no error
from inside it that comes later in document order is reported: `Run.errors` applies that rule
to all candidates at the end, in document order, so the level-by-level order of this executor
does not change what a client sees.
"""

from __future__ import annotations

import asyncio
import bisect
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from graphql import (
    GraphQLAbstractType,
    GraphQLError,
    GraphQLList,
    GraphQLNonNull,
    GraphQLObjectType,
    GraphQLOutputType,
    located_error,
)
from graphql.execution.values import VariableValues
from graphql.pyutils import inspect as describe
from graphql.pyutils import is_iterable

from baton.engine.leaves import weight
from baton.engine.plans import Compiler, FieldPlan, Kind, TypePlan
from baton.engine.rows import made_for
from baton.engine.selection import Selection
from baton.errors import BatonError

# A response position: (parent position, key, ordinal), None for the root. The ordinal is the
# key's place in its selection set (or the list index), so positions sort in document order.
Path = tuple[Any, str | int, int] | None


class Positions(Protocol):
    """The positions of a level's parents, by index (a list, or `_Picked`)."""

    def __getitem__(self, index: int, /) -> Path: ...


class _Picked:
    """Positions made only when asked for: they serve errors alone, and most levels have
    none, while building them for every object of every level cost a tuple and a call each."""

    __slots__ = ("indexes", "path_of")

    def __init__(self, path_of: Callable[[int], Path], indexes: list[int]) -> None:
        self.path_of = path_of
        self.indexes = indexes

    def __getitem__(self, index: int, /) -> Path:
        return self.path_of(self.indexes[index])


def path_list(path: Path) -> list[str | int]:
    keys: list[str | int] = []
    while path is not None:
        path, key, _ = path
        keys.append(key)
    keys.reverse()
    return keys


def _order(path: Path) -> tuple[int, ...]:
    ordinals: list[int] = []
    while path is not None:
        path, _, ordinal = path
        ordinals.append(ordinal)
    ordinals.reverse()
    return tuple(ordinals)


def _positions(path: Path) -> list[tuple[str | int, ...]]:
    """`path` and each of its ancestors, the root (`()`) last."""
    keys = tuple(path_list(path))
    return [keys[:n] for n in range(len(keys), -1, -1)]


class ResponseTooLarge(Exception):
    """The response outgrew its byte budget: the execution stops and answers no data.

    Raised only while completing values, where no handler turns exceptions into field errors,
    so it always reaches the entry point that opened the budget."""


class Failure:
    """A position that failed; its errors wait for the nullable position it nulls."""

    __slots__ = ("errors",)

    def __init__(self, errors: list[tuple[GraphQLError, Path]]) -> None:
        self.errors = errors

    @staticmethod
    def merge(failures: Sequence[Failure]) -> Failure:
        return Failure([e for f in failures for e in f.errors])


@dataclass(eq=False)
class ResolveInfo:
    """What a resolver's `info` parameter gets here: the request's context, and what the
    document selects below the field (see `baton.engine.selection`)."""

    context: Any
    selection: Selection | None = None


@dataclass(eq=False)
class Run:
    """One execution: its context, variables and the errors it records."""

    compiler: Compiler
    context: Any
    variables: VariableValues | None
    # What the response may still take, in bytes (see `charge`).
    bytes_left: int = 2**62
    info: ResolveInfo = field(init=False)
    # A mutation's root fields whose resolvers ran, by response key, in order.
    ran: list[str] = field(default_factory=list)
    # (error, its own path, the position it nulled)
    _candidates: list[tuple[GraphQLError, Path, Path]] = field(default_factory=list)
    _kwargs: dict[FieldPlan, dict[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.info = ResolveInfo(self.context)

    def fail(self, error: Exception, plan: FieldPlan, path: Path) -> Failure:
        if isinstance(error, BatonError):
            # An expected failure is answered, never logged: its traceback would only keep
            # every frame it passed through, and the rows they hold, alive in a reference
            # cycle until the collector's rare full pass (a refused request's hundred MB).
            error.__traceback__ = None
        return Failure([(located_error(error, plan.nodes, path_list(path)), path)])

    def settle(self, failure: Failure, position: Path) -> None:
        """`failure` made `position` null (None: the whole result)."""
        for error, path in failure.errors:
            self._candidates.append((error, path, position))

    @property
    def errors(self) -> list[GraphQLError]:
        reported: list[GraphQLError] = []
        nulled: set[tuple[str | int, ...]] = set()
        for error, _, position in sorted(self._candidates, key=lambda c: _order(c[1])):
            ancestry = _positions(position)
            if any(p in nulled for p in ancestry):
                continue
            nulled.add(ancestry[0])
            reported.append(error)
        return reported

    def reset(self, bytes_left: int | None = None) -> None:
        """Start a new response (a subscription's next item), with a new byte budget."""
        self._candidates = []
        if bytes_left is not None:
            self.bytes_left = bytes_left

    def charge(self, size: int) -> None:
        """Count `size` bytes of the response; past the budget, the whole execution stops."""
        self.bytes_left -= size
        if self.bytes_left < 0:
            raise ResponseTooLarge

    def info_for(self, plan: FieldPlan) -> ResolveInfo:
        """The `info` of `plan`'s resolver; the shared one for a field with no selection."""
        if plan.nodes[0].selection_set is None:
            return self.info
        return ResolveInfo(self.context, plan.selection)

    def kwargs(self, plan: FieldPlan) -> dict[str, Any]:
        if plan.static_kwargs is not None:
            return plan.static_kwargs
        found = self._kwargs.get(plan)
        if found is None:
            found = self._kwargs[plan] = plan.kwargs(self.variables)
        return found


# --- fetching a field's values for a level ------------------------------------------------


def _at(paths: Positions, plan: FieldPlan, i: int) -> Path:
    return (paths[i], plan.key, plan.ordinal)


def _fetch(run: Run, plan: FieldPlan, sources: Sequence[Any], paths: Positions) -> Any:
    """The field's value for every source: a list, or an awaitable of one."""
    kind = plan.kind
    if kind is Kind.ATTRIBUTE:
        get = plan.get
        assert get is not None
        try:
            return [get(s) for s in sources]
        except Exception:  # find which parent failed
            return [_guard(run, plan, get, s, _at(paths, plan, i)) for i, s in enumerate(sources)]
    if kind is Kind.TYPENAME:
        return [plan.parent.name] * len(sources)
    try:
        kwargs = run.kwargs(plan)
    except Exception as exc:
        return [run.fail(exc, plan, _at(paths, plan, i)) for i in range(len(sources))]
    if kind is Kind.BATCH:
        return _batch(run, plan, sources, paths, kwargs)
    call = plan.call
    assert call is not None
    if plan.info_name is not None:
        kwargs = {**kwargs, plan.info_name: run.info_for(plan)}
    values: list[Any] = []
    wants_self = plan.wants_self
    count = len(sources)
    while len(values) < count:
        # Each resolver is called exactly once per parent (a mutation's has effects): after a
        # failure, carry on from the next parent.
        try:
            if wants_self:
                for source in sources[len(values) :]:
                    values.append(call(source, **kwargs))
            else:
                for _ in range(len(values), count):
                    values.append(call(**kwargs))
        except Exception as exc:
            values.append(run.fail(exc, plan, _at(paths, plan, len(values))))
    if plan.is_async:
        return _gather(run, plan, values, paths)
    return values


def _guard(run: Run, plan: FieldPlan, get: Callable[[Any], Any], source: Any, path: Path) -> Any:
    try:
        return get(source)
    except Exception as exc:
        return run.fail(exc, plan, path)


async def _batch(
    run: Run, plan: FieldPlan, sources: Sequence[Any], paths: Positions, kwargs: Any
) -> list[Any]:
    assert plan.call is not None
    if plan.batch_selection:
        kwargs = {**kwargs, "selection": plan.selection}
    try:
        values = list(await plan.call(run.context, sources, **kwargs))
        if len(values) != len(sources):
            raise RuntimeError(f"batch resolver of {plan.name} answered {len(values)} values")
    except Exception as exc:
        if plan.single is None or len(sources) == 1 or getattr(exc, "request_wide", False):
            return [run.fail(exc, plan, _at(paths, plan, i)) for i in range(len(sources))]
        # Which parents fail, as the field's own resolver would answer for each of them:
        # graphql-core calls it once per parent, so it reports only those that fail.
        single = _fetch(run, plan.single, sources, paths)
        return list(await single) if inspect.isawaitable(single) else list(single)
    return values


async def _gather(run: Run, plan: FieldPlan, values: list[Any], paths: Positions) -> list[Any]:
    waiting = [(i, v) for i, v in enumerate(values) if inspect.isawaitable(v)]
    if len(waiting) == 1:  # no task for a single call (a root field, say)
        try:
            outcomes: list[Any] = [await waiting[0][1]]
        except Exception as exc:
            outcomes = [exc]
    else:
        outcomes = await asyncio.gather(*(v for _, v in waiting), return_exceptions=True)
    for (i, _), outcome in zip(waiting, outcomes, strict=True):
        if isinstance(outcome, BaseException):
            if not isinstance(outcome, Exception):
                raise outcome
            outcome = run.fail(outcome, plan, _at(paths, plan, i))
        values[i] = outcome
    return values


# --- completing values by type --------------------------------------------------------------


async def complete_objects(
    run: Run,
    plan: TypePlan,
    sources: Sequence[Any],
    paths: Positions,
    *,
    serial: bool = False,
) -> list[Any]:
    """Each source's answer to `plan`: a dict in selection order, or a Failure."""
    count = len(sources)
    run.charge(plan.key_bytes * count)
    new = plan.template.copy  # a copy of a dict is a third of the cost of `dict.fromkeys`
    results: list[Any] = [new() for _ in range(count)]
    if serial:  # mutations: each root field resolves and completes before the next starts
        for fplan in plan.fields:
            values = _fetch(run, fplan, sources, paths)
            if inspect.isawaitable(values):
                values = await values
            run.ran.append(fplan.key)
            await _place(run, fplan, values, paths, results)
            if any(type(r) is Failure for r in results):
                break  # the response is null: run no later mutation the client is not told of
        return results
    made = plan.made
    if made is None:
        made = plan.made = made_for(plan, run.compiler)
    if made.fill is not None:
        done, weighed, keys = made.fill(sources, results)
        if weighed:
            run.charge(weight(weighed))
        run.charge(keys)
        if done < count:  # the rest by the general path, from the parent it stopped at
            rest = results[done:]
            at = _Picked(paths.__getitem__, list(range(done, count)))
            inline = made.inline
            leaves = [f for f in inline if f.leaf is not None]
            objects = [f for f in inline if f.leaf is None]
            await _general(run, leaves, objects, sources[done:], at, rest)
            results[done:] = rest  # with the failures of non-null fields in their places
    if made.leaves or made.others:
        await _general(run, made.leaves, made.others, sources, paths, results)
    return results


async def _general(
    run: Run,
    leaves: list[FieldPlan],
    others: list[FieldPlan],
    sources: Sequence[Any],
    paths: Positions,
    results: list[Any],
) -> None:
    """`leaves` and `others` of every parent, field by field, into `results`."""
    for n, fplan in enumerate(leaves):
        if not _leaf(run, fplan, sources, paths, results):
            # arguments that do not convert: the general path reports it, for this field on
            others = [*leaves[n:], *others]
            break
    if not others:
        return
    fetched: list[Any] = []
    pending: list[int] = []
    for index, fplan in enumerate(others):
        values = _fetch(run, fplan, sources, paths)
        if inspect.isawaitable(values):
            pending.append(index)
        fetched.append(values)
    if len(pending) == 1:
        fetched[pending[0]] = await fetched[pending[0]]
    elif pending:
        done = await asyncio.gather(*(fetched[i] for i in pending))
        for index, values in zip(pending, done, strict=True):
            fetched[index] = values
    for fplan, values in zip(others, fetched, strict=True):
        await _place(run, fplan, values, paths, results)


def _leaf(
    run: Run, plan: FieldPlan, sources: Sequence[Any], paths: Positions, results: list[Any]
) -> bool:
    """A leaf field (`FieldPlan.leaf`) for every parent in one pass: got, checked for null,
    serialised and placed, with the errors and nulls of the general path (`_fetch`, `complete`,
    `_place`) exactly. False, having done nothing, when its arguments do not convert."""
    assert plan.leaf is not None
    named, non_null = plan.leaf
    kind = plan.kind
    get = plan.get
    call = plan.call
    kwargs: dict[str, Any] = {}
    if kind is Kind.CALL:
        try:
            kwargs = run.kwargs(plan)
        except Exception:
            return False
        if plan.info_name is not None:
            kwargs = {**kwargs, plan.info_name: run.info}
    wants_self = plan.wants_self
    if call is not None and wants_self and not kwargs:
        # A method of the parent with no arguments (most fields): called as `get` is, without
        # unpacking an empty dict for every parent.
        get, call = call, None
    typename = plan.parent.name if kind is Kind.TYPENAME else None
    serialize = run.compiler.serializer(named)
    key = plan.key
    weighed: list[Any] | None = [] if run.compiler.weighs(named) else None
    for i, source in enumerate(sources):
        try:
            if typename is not None:
                value: Any = typename
            elif get is not None:
                value = get(source)
            else:
                assert call is not None
                value = call(source, **kwargs) if wants_self else call(**kwargs)
            if value is not None:
                serialized = serialize(value)
                if serialized is None:
                    raise TypeError(
                        f"Expected `{named}.serialize({describe(value)})` to return "
                        f"non-nullable value, returned: {describe(serialized)}"
                    )
                value = serialized
            elif non_null:
                raise TypeError(
                    f"Cannot return null for non-nullable field {plan.parent.name}.{plan.name}."
                )
        except Exception as exc:
            position = _at(paths, plan, i)
            failure = run.fail(exc, plan, position)
            if non_null:
                current = results[i]
                results[i] = (
                    Failure.merge([current, failure]) if type(current) is Failure else failure
                )
                continue
            run.settle(failure, position)
            value = None
        current = results[i]
        if type(current) is not Failure:
            current[key] = value
        if weighed is not None and value is not None:
            weighed.append(value)
    if weighed:
        run.charge(weight(weighed))
    return True


async def _place(
    run: Run, plan: FieldPlan, values: list[Any], paths: Positions, results: list[Any]
) -> None:
    key, ordinal = plan.key, plan.ordinal
    completed = await complete(
        run, plan, plan.return_type, values, lambda i: (paths[i], key, ordinal)
    )
    for i, value in enumerate(completed):
        current = results[i]
        if type(value) is Failure:
            results[i] = Failure.merge([current, value]) if type(current) is Failure else value
        elif type(current) is not Failure:
            current[key] = value


async def complete(
    run: Run,
    plan: FieldPlan,
    type_: GraphQLOutputType,
    values: list[Any],
    path_of: Callable[[int], Path],
) -> list[Any]:
    """Complete `values` of `type_`; a Failure where a non-null position failed."""
    if isinstance(type_, GraphQLNonNull):
        inner = await _complete_nullable(run, plan, type_.of_type, values, path_of)
        for i, value in enumerate(inner):
            if value is None:
                message = (
                    f"Cannot return null for non-nullable field {plan.parent.name}.{plan.name}."
                )
                # A resolver broke its type's promise: a server fault (`internal`, logged),
                # raised as graphql-core raises it.
                inner[i] = run.fail(TypeError(message), plan, path_of(i))
        return inner
    completed = await _complete_nullable(run, plan, type_, values, path_of)
    for i, value in enumerate(completed):
        if type(value) is Failure:
            run.settle(value, path_of(i))
            completed[i] = None
    return completed


async def _complete_nullable(
    run: Run,
    plan: FieldPlan,
    type_: GraphQLOutputType,
    values: list[Any],
    path_of: Callable[[int], Path],
) -> list[Any]:
    if isinstance(type_, GraphQLList):
        return await _complete_lists(run, plan, type_, values, path_of)
    if isinstance(type_, GraphQLObjectType | GraphQLAbstractType):
        return await _complete_composites(run, plan, type_, values, path_of)
    serialize = run.compiler.serializer(type_)  # type: ignore[arg-type]
    out: list[Any] = []
    for i, value in enumerate(values):
        if value is None or type(value) is Failure:
            out.append(value)
            continue
        try:
            serialized = serialize(value)
            if serialized is None:
                raise TypeError(
                    f"Expected `{type_}.serialize({describe(value)})` to return non-nullable "
                    f"value, returned: {describe(serialized)}"
                )
        except Exception as exc:
            serialized = run.fail(exc, plan, path_of(i))
        out.append(serialized)
    if run.compiler.weighs(type_):  # type: ignore[arg-type]
        run.charge(weight(out))
    return out


async def _complete_lists(
    run: Run,
    plan: FieldPlan,
    type_: GraphQLList[Any],
    values: list[Any],
    path_of: Callable[[int], Path],
) -> list[Any]:
    flat: list[Any] = []
    starts: list[int] = []  # where each list's items begin in `flat`, by list
    owners: list[int] = []  # ... and whose list that is
    out: list[Any] = list(values)
    for i, value in enumerate(values):
        if value is None or type(value) is Failure:
            continue
        if type(value) is not list and not is_iterable(value):
            message = (
                f"Expected Iterable, but did not find one for field "
                f"'{plan.parent.name}.{plan.name}'."
            )
            out[i] = run.fail(GraphQLError(message), plan, path_of(i))
            continue
        starts.append(len(flat))
        owners.append(i)
        flat.extend(value)

    def item_path(j: int) -> Path:
        # Asked only to report an error: which list `j` is in is looked up then.
        k = bisect.bisect_right(starts, j) - 1
        index = j - starts[k]
        return (path_of(owners[k]), index, index)

    items = await complete(run, plan, type_.of_type, flat, item_path) if flat else []
    failed = Failure in map(type, items)
    ends = [*starts[1:], len(flat)]
    for k, i in enumerate(owners):
        segment = items[starts[k] : ends[k]]
        if failed:
            failures = [item for item in segment if type(item) is Failure]
            if failures:
                out[i] = Failure.merge(failures)
                continue
        out[i] = segment
    return out


async def _complete_composites(
    run: Run,
    plan: FieldPlan,
    type_: GraphQLObjectType | GraphQLAbstractType,
    values: list[Any],
    path_of: Callable[[int], Path],
) -> list[Any]:
    out: list[Any] = list(values)
    groups: dict[GraphQLObjectType, list[int]] = {}
    if isinstance(type_, GraphQLObjectType):
        indexes = [i for i, v in enumerate(values) if v is not None and type(v) is not Failure]
        if indexes:
            groups[type_] = indexes
    else:
        by_class = run.compiler.runtime_types(type_)
        for i, value in enumerate(values):
            if value is None or type(value) is Failure:
                continue
            runtime = by_class.get(type(value))
            if runtime is None:
                message = (
                    f"Abstract type '{type_.name}' must resolve to an Object type at runtime for"
                    f" field '{plan.parent.name}.{plan.name}'. Got: {describe(value)}."
                )
                # A resolver returned what its type does not hold: a server fault.
                out[i] = run.fail(TypeError(message), plan, path_of(i))
                continue
            groups.setdefault(runtime, []).append(i)
    for runtime, indexes in groups.items():
        try:
            child = plan.child(runtime)
        except GraphQLError as error:  # @skip/@include given null: each object fails
            for i in indexes:
                out[i] = run.fail(error, plan, path_of(i))
            continue
        answers = await complete_objects(
            run, child, [values[i] for i in indexes], _Picked(path_of, indexes)
        )
        for i, answer in zip(indexes, answers, strict=True):
            out[i] = answer
    return out


async def root(run: Run, plan: TypePlan, *, serial: bool) -> Any:
    """The operation's data: a dict, or None when a failure reached the root."""
    [data] = await complete_objects(run, plan, [None], [None], serial=serial)
    if type(data) is Failure:
        run.settle(data, None)
        return None
    return data


async def complete_item(
    run: Run, plan: FieldPlan, item: Any, bytes_left: int
) -> tuple[Any, list[GraphQLError]]:
    """One item of a subscription's source stream, completed as the root field's value
    within `bytes_left`: the data (None when a failure reached the root) and the errors."""
    run.reset(bytes_left)
    position: Path = (None, plan.key, 0)
    [value] = await complete(run, plan, plan.return_type, [item], lambda _: position)
    if type(value) is Failure:
        run.settle(value, None)
        return None, run.errors
    return {plan.key: value}, run.errors


def stream_failed(run: Run, plan: FieldPlan, error: Exception) -> list[GraphQLError]:
    """The errors that end a stream whose source raised `error`."""
    run.reset()
    run.settle(run.fail(error, plan, (None, plan.key, 0)), None)
    return run.errors
