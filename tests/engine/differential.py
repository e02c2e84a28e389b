"""Running one document on Baton's engine and on graphql-core's reference executor.

The reference is graphql-core's `validate` (the spec's rules) and `execute`/`subscribe` on the
same Strawberry schema, with the same resolvers and context, run in document order: sibling
fields one after another (`in_document_order`) and the items of a list one after another
(`serially`), so that what it answers does not depend on timing.

Answers are compared after Baton's error coding (`baton.engine.errors.formatted`), which both
go through on the server: `data` exactly, and errors exactly (message, locations, path,
`extensions`) with one allowance. When a failure in a non-null position nulls an enclosing one,
the engine reports the first error inside it in document order; graphql-core reports whatever
had failed in there by the time the null reached it, which depends on which items of a list it
could complete at once and which it had to wait for. So where the lists differ, both must
report errors in exactly the same nulled positions (at least one each), and an error that
nulled only its own field must be in both.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import AsyncGenerator, Awaitable, Iterator
from typing import Any
from unittest import mock

import strawberry
from graphql import (
    DocumentNode,
    ExecutionResult,
    OperationDefinitionNode,
    execute,
    parse,
    specified_rules,
    subscribe,
    validate,
)
from graphql.execution.values import get_variable_values

from baton.engine.errors import formatted
from baton.engine.runner import Engine, Outcome, Request

# Error codes of refusals that only Baton makes, before execution (limits and argument checks):
# graphql-core has no such rules, so a document they refuse is not a comparison.
BATON_ONLY = ("budget", "field")


def in_document_order(schema: strawberry.Schema) -> type:
    base: type = schema.execution_context_class

    class InDocumentOrder(base):  # type: ignore[misc, valid-type]
        def execute_fields(self, *args: Any) -> Any:
            return self.execute_fields_serially(*args)

    return InDocumentOrder


def payload(result: ExecutionResult | Outcome) -> dict[str, Any]:
    """What a client receives: `data` (absent when refused) and coded errors."""
    if isinstance(result, Outcome):
        return result.payload()
    body: dict[str, Any] = {"data": result.data}
    if result.errors:
        body["errors"] = formatted(result.errors)
    return body


async def reference(
    schema: strawberry.Schema, query: str, variables: dict[str, Any] | None, context: Any
) -> dict[str, Any]:
    document = parse(query)
    errors = validate(schema._schema, document, specified_rules)
    if errors:
        return {"errors": formatted(errors)}
    coerced = _coerced(schema, document, variables)
    if isinstance(coerced, list):
        # A request error, before execution: graphql-core answers `data: null`, the spec (and
        # every transport, Baton's too) no `data` at all.
        return {"errors": formatted(coerced)}
    with serially():
        result = execute(
            schema._schema,
            document,
            context_value=context,
            variable_values=variables,
            executor_class=in_document_order(schema),
        )
        if inspect.isawaitable(result):
            result = await result
    return payload(result)


@contextlib.contextmanager
def serially() -> Iterator[None]:
    """graphql-core's executor awaiting list items (and anything else it gathers) one after
    another, in order; after a failure the rest still run (as graphql-core settles them in
    the background), then the failure goes on."""

    async def one_by_one(*awaitables: Awaitable[Any]) -> list[Any]:
        results: list[Any] = []
        pending = list(awaitables)
        try:
            while pending:
                results.append(await pending.pop(0))
        except Exception:
            for left in pending:  # settled, in order, as graphql-core settles them
                with contextlib.suppress(Exception):
                    await left
            raise
        return results

    with mock.patch("graphql.execution.executor.gather_with_cancel", one_by_one):
        yield


async def ours(
    engine: Engine, query: str, variables: dict[str, Any] | None, context: Any
) -> dict[str, Any]:
    return (await engine.execute(Request(query, variables), context)).payload()


def refused_by_baton_only(answer: dict[str, Any]) -> bool:
    """Refused before execution by a rule graphql-core does not have."""
    return "data" not in answer and any(
        set(BATON_ONLY) & (e.get("extensions") or {}).keys() for e in answer.get("errors", ())
    )


def assert_same(mine: dict[str, Any], theirs: dict[str, Any], query: str) -> None:
    data = mine.get("data", "absent")
    assert data == theirs.get("data", "absent"), (query, mine, theirs)
    ours_errors, their_errors = mine.get("errors", []), theirs.get("errors", [])
    if ours_errors == their_errors:
        return
    # See the module docstring: the lists may differ only inside positions a failure nulled.
    regions = {tuple(_region(data, e)) for e in ours_errors}
    assert regions == {tuple(_region(data, e)) for e in their_errors}, query
    for error in (*ours_errors, *their_errors):
        if _region(data, error) == error.get("path"):  # nulled nothing but its own field
            assert error in ours_errors and error in their_errors, (query, error)


def _region(data: Any, error: dict[str, Any]) -> list[str | int] | None:
    """The outermost position, on the error's path, that `data` shows as null."""
    return _nulled_prefix(data, error.get("path") or [])


def _nulled_prefix(data: Any, path: list[str | int]) -> list[str | int] | None:
    """The shortest prefix of `path` whose value in `data` is null, if any."""
    value = data
    for depth, key in enumerate(path):
        if value is None:
            return path[:depth]
        if isinstance(key, int):
            value = value[key] if isinstance(value, list) and key < len(value) else None
        else:
            value = value.get(key) if isinstance(value, dict) else None
    return path if value is None else None


def _coerced(
    schema: strawberry.Schema, document: DocumentNode, variables: dict[str, Any] | None
) -> Any:
    operations = [d for d in document.definitions if isinstance(d, OperationDefinitionNode)]
    if len(operations) != 1:
        return None  # execute() itself answers for this
    return get_variable_values(
        schema._schema, operations[0].variable_definitions or (), variables or {}
    )


async def reference_stream(
    schema: strawberry.Schema,
    query: str,
    variables: dict[str, Any] | None,
    context: Any,
    *,
    limit: int | None = None,
) -> list[dict[str, Any]]:
    """What graphql-core's `subscribe` yields, one payload per item (the first `limit`); a
    source that raises ends the list with `{"raised": message}`."""
    result = subscribe(
        schema._schema, parse(query), context_value=context, variable_values=variables
    )
    if inspect.isawaitable(result):
        result = await result
    if isinstance(result, ExecutionResult):
        return [payload(result)]
    items: list[dict[str, Any]] = []
    stream: AsyncGenerator[ExecutionResult, None] = result
    try:
        async for item in stream:
            items.append(payload(item))
            if len(items) == limit:
                break
    except Exception as exc:
        items.append({"raised": str(exc)})
    finally:
        await stream.aclose()
    return items


async def our_stream(
    engine: Engine,
    query: str,
    variables: dict[str, Any] | None,
    context: Any,
    *,
    limit: int | None = None,
) -> list[dict[str, Any]]:
    """The engine's outcomes (the first `limit`), in the same terms: a final error from the
    source becomes `{"raised": message}` (the transports send it as the operation's
    `error`)."""
    stream = await engine.subscribe(Request(query, variables), context)
    if isinstance(stream, Outcome):
        return [stream.payload()]
    items: list[dict[str, Any]] = []
    try:
        async for outcome in stream:
            if outcome.final_error:
                items.append({"raised": outcome.errors[0]["message"]})
            else:
                items.append(outcome.payload())
            if len(items) == limit:
                break
    finally:
        await stream.aclose()
    return items
