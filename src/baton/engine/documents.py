"""Documents parsed and validated once, then reused; never more work than a bound allows.

graphql-core rebuilds every validation rule's visitor on each call: validating even a small
query costs milliseconds, many times what executing it costs. `DocumentCache` keeps the outcome
of parsing and validating each distinct document (refusals included, so a client repeating a
bad document pays once too) in an LRU bounded both by entries and by the total size of the
texts it holds. Documents that differ only in comments and spacing are one document: a text
the cache has not seen is lexed, and its tokens find what an earlier spelling prepared.

Parsing is bounded by the token limit, but some of graphql-core's validation rules are not
linear: comparing every pair of fields that share a response name (fields that must merge)
is quadratic in how many there are, and several rules recurse through fragment spreads. So a
parsed document is measured before it is validated, in bounded work and without recursion:
fields nested more than `Limits.max_nesting` deep, fragment spreads chained as deep, and a
response name selected more than `Limits.max_same_name` times in one selection set (merged
fields and fragments included) are refused with what to change. Documents longer than
`INLINE_BYTES` are parsed and validated on a worker thread, one at a time per process, so one
client's large document never stalls the requests of others.
"""

from __future__ import annotations

import asyncio
import re
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from graphql import (
    DocumentNode,
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    GraphQLError,
    GraphQLSchema,
    InlineFragmentNode,
    OperationDefinitionNode,
    SelectionSetNode,
    Source,
    TokenKind,
    parse,
    specified_rules,
    validate,
)
from graphql.language.lexer import Lexer
from graphql.validation import ASTValidationRule
from strawberry.extensions.max_aliases import create_validator as alias_limit
from strawberry.extensions.query_depth_limiter import create_validator as depth_limit

from baton.engine.limits import Limits
from baton.storable import unstorable
from baton.telemetry.spans import span

T = TypeVar("T")

_NUL_ESCAPE = re.compile(r"\\u(?:0000|\{0+\})", re.IGNORECASE)

# Longer documents are parsed and validated off the event loop.
INLINE_BYTES = 4096


def refusal(message: str) -> GraphQLError:
    """An error that refuses the whole request before execution."""
    return GraphQLError(message, extensions={"code": "invalid_input"})


MAX_MEMOS = 256  # per document: plans and costs for that many variable combinations


@dataclass(eq=False)
class Prepared:
    """A query text, parsed and validated; `errors` non-empty means it is refused."""

    text: str
    document: DocumentNode | None
    errors: tuple[GraphQLError, ...]
    operations: dict[str | None, OperationDefinitionNode] = field(default_factory=dict)
    fragments: dict[str, FragmentDefinitionNode] = field(default_factory=dict)
    # Per-operation state the executor attaches (compiled plans, checked costs); lives and
    # dies with this. Keys can carry variable values, so `remember` bounds how many it holds.
    cache: dict[Any, Any] = field(default_factory=dict)

    def remember(self, key: Any, value: Any) -> Any:
        """Keep `value` under `key` while fewer than MAX_MEMOS are kept; return it either way."""
        if len(self.cache) < MAX_MEMOS:
            self.cache[key] = value
        return value

    def operation(self, name: str | None) -> OperationDefinitionNode | GraphQLError:
        """The operation to run, as the GraphQL spec picks it, or why none can be."""
        if name is not None:
            found = self.operations.get(name)
            return found if found is not None else refusal(f"Unknown operation named '{name}'.")
        if len(self.operations) == 1:
            return next(iter(self.operations.values()))
        if not self.operations:
            return refusal("Must provide an operation.")
        return refusal("Must provide operation name if query contains multiple operations.")


class DocumentCache:
    def __init__(
        self,
        schema: GraphQLSchema,
        limits: Limits,
        *,
        extra_rules: Sequence[type[ASTValidationRule]] = (),
        max_entries: int = 2000,
        max_text_bytes: int = 16 * 1024 * 1024,
    ) -> None:
        self.schema = schema
        self.limits = limits
        self.rules: tuple[type[ASTValidationRule], ...] = (
            *specified_rules,
            depth_limit(limits.max_depth, None, None),
            alias_limit(limits.max_aliases),
            *extra_rules,
        )
        self.max_entries = max_entries
        self.max_text_bytes = max_text_bytes
        # By text, and by token stream (see `_tokens`); both keys count against the size.
        self._entries: OrderedDict[str, Prepared] = OrderedDict()
        self._text_bytes = 0
        self._off_loop = asyncio.Semaphore(1)

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, text: str) -> Prepared:
        """The prepared document, prepared here and now when it is new."""
        hit = self._hit(text)
        if hit is not None:
            return hit
        prepared, tokens = _prepare(self.schema, self.limits, self.rules, text, self._by_tokens)
        return self._keep(text, tokens, prepared)

    async def prepare(self, text: str) -> Prepared:
        """The prepared document; a new one longer than INLINE_BYTES is prepared on a worker
        thread (one at a time), so the event loop keeps serving others meanwhile."""
        hit = self._hit(text)
        if hit is not None:
            return hit
        if len(text) <= INLINE_BYTES:
            return self.get(text)
        async with self._off_loop:
            hit = self._hit(text)  # prepared while this request waited its turn
            if hit is not None:
                return hit
            prepared, tokens = await asyncio.to_thread(
                _prepare, self.schema, self.limits, self.rules, text, self._by_tokens
            )
        return self._keep(text, tokens, prepared)

    async def off_loop(self, work: Callable[[], T]) -> T:
        """`work` on a worker thread, one at a time with the documents prepared there."""
        async with self._off_loop:
            return await asyncio.to_thread(work)

    def _hit(self, text: str) -> Prepared | None:
        hit = self._entries.get(text)
        if hit is not None:
            self._entries.move_to_end(text)
        return hit

    def _by_tokens(self, tokens: str) -> Prepared | None:
        # Read from a worker thread too: a plain dict look-up, which the GIL keeps whole.
        return self._entries.get(tokens)

    def _keep(self, text: str, tokens: str | None, prepared: Prepared) -> Prepared:
        for key in (text, tokens):
            if key is None or key in self._entries:
                continue
            size = len(key)
            if size > self.max_text_bytes // 4:
                continue  # a huge document is not worth evicting a quarter of the cache for
            self._entries[key] = prepared
            self._text_bytes += size
        while len(self._entries) > self.max_entries or self._text_bytes > self.max_text_bytes:
            key, _ = self._entries.popitem(last=False)
            self._text_bytes -= len(key)
        return prepared


def _prepare(
    schema: GraphQLSchema,
    limits: Limits,
    rules: tuple[type[ASTValidationRule], ...],
    text: str,
    known: Any = None,
) -> tuple[Prepared, str | None]:
    """`text` prepared, and its token stream (None when it does not lex). With `known`, a
    look-up by token stream, an earlier spelling's preparation is reused."""
    reason = unstorable(text, "query")
    if reason is None and _NUL_ESCAPE.search(text):
        reason = "strings may not contain the NUL character (at query)"
    if reason is not None:
        return Prepared(text, None, (refusal(reason),)), None
    try:
        tokens = _tokens(text, limits.max_tokens)
    except GraphQLError as error:
        return Prepared(text, None, (_coded(error),)), None
    if known is not None:
        earlier = known(tokens)
        if earlier is not None:
            return earlier, tokens
    return _parse_and_validate(schema, limits, rules, text), tokens


def _parse_and_validate(
    schema: GraphQLSchema, limits: Limits, rules: tuple[type[ASTValidationRule], ...], text: str
) -> Prepared:
    try:
        with span("graphql.parse"):
            document = parse(text, max_tokens=limits.max_tokens)
    except GraphQLError as error:
        return Prepared(text, None, (_coded(error),))
    except RecursionError:
        return Prepared(text, None, (_too_deep(limits),))
    try:
        with span("graphql.validate"):
            problem = _shape_problem(document, limits)
            errors = [] if problem is not None else validate(schema, document, rules)
    except RecursionError:
        return Prepared(text, document, (_too_deep(limits),))
    if problem is not None:
        return Prepared(text, document, (refusal(problem),))
    if errors:
        return Prepared(text, document, tuple(_coded(e) for e in errors))
    operations: dict[str | None, OperationDefinitionNode] = {}
    fragments: dict[str, FragmentDefinitionNode] = {}
    for definition in document.definitions:
        if isinstance(definition, OperationDefinitionNode):
            operations[definition.name.value if definition.name else None] = definition
        elif isinstance(definition, FragmentDefinitionNode):
            fragments[definition.name.value] = definition
    return Prepared(text, document, (), operations, fragments)


def _tokens(text: str, max_tokens: int) -> str:
    """The document's tokens without comments and spacing: equal for two spellings of one
    document. Raises graphql-core's syntax error, or past `max_tokens`."""
    lexer = Lexer(Source(text))
    parts: list[str] = []
    while True:
        token = lexer.advance()
        if token.kind is TokenKind.EOF:
            break
        parts.append(f"{token.kind.value}{token.value or ''}")
        if len(parts) > max_tokens:
            raise GraphQLError(f"Document contains more than {max_tokens} tokens. Parsing aborted.")
    return "\x1f".join(parts)


def _too_deep(limits: Limits) -> GraphQLError:
    return refusal(
        f"The document nests selections too deeply; at most {limits.max_nesting} levels of "
        "fields, and chains of at most as many fragment spreads."
    )


# How many field selections the shape check may look at (merging included) before it calls
# a document too complex: a little more than the most the token limit lets a plain document
# hold, and far more than any document written by hand or generated by a client library.
WORK_PER_TOKEN = 20


def _shape_problem(document: DocumentNode, limits: Limits) -> str | None:
    """What makes `document` too costly to validate, found without recursion in work bounded
    by `WORK_PER_TOKEN` per token: fields nested deeper than `limits.max_nesting`, a fragment
    chain longer than that, or a response name selected more than `limits.max_same_name` times
    in one selection set, counting the fields it merges with (through fragments, and the
    selections of same-named fields, level by level, as execution merges them)."""
    budget = WORK_PER_TOKEN * limits.max_tokens
    fragments = {
        d.name.value: d for d in document.definitions if isinstance(d, FragmentDefinitionNode)
    }
    # Each fragment's top-level fields (through inline fragments and the fragments it
    # spreads, each field once), computed after the fragments it spreads.
    chain: dict[str, int] = {}
    top: dict[str, dict[int, FieldNode]] = {}
    work = 0
    for name in _spread_order(fragments):
        fields, spreads = _top(fragments[name].selection_set)
        chain[name] = 1 + max((chain.get(s, 0) for s in spreads), default=0)
        if chain[name] > limits.max_nesting:
            return f"Fragment spreads chain {chain[name]} deep; at most {limits.max_nesting}."
        merged = {id(f): f for f in fields}
        for spread in spreads:
            merged.update(top.get(spread, {}))
        work += len(merged)
        if work > budget:
            return _too_complex()
        top[name] = merged
    pending: list[tuple[list[SelectionSetNode], int]] = [
        ([d.selection_set], 1)
        for d in document.definitions
        if isinstance(d, OperationDefinitionNode | FragmentDefinitionNode)
    ]
    while pending:
        selection_sets, level = pending.pop()
        if level > limits.max_nesting:
            return (
                f"Query depth {level} is far over the limit of {limits.max_depth} levels of fields."
            )
        grouped: dict[str, dict[int, FieldNode]] = {}
        for selection_set in selection_sets:
            fields, spreads = _top(selection_set)
            for spread in spreads:
                fields.extend(top.get(spread, {}).values())
            work += len(fields)
            if work > budget:
                return _too_complex()
            for f in fields:
                grouped.setdefault(f.alias.value if f.alias else f.name.value, {})[id(f)] = f
        for response_name, nodes in grouped.items():
            if len(nodes) > limits.max_same_name:
                return (
                    f"`{response_name}` is selected {len(nodes)} times in one selection set "
                    f"(merged fields and fragments included); at most {limits.max_same_name}. "
                    "Select it once, or give the copies different aliases."
                )
            below = [n.selection_set for n in nodes.values() if n.selection_set is not None]
            if below:
                pending.append((below, level + 1))
    return None


def _too_complex() -> str:
    return (
        "The document is too complex to validate (its fragments and merged fields expand "
        "too far); write it with fewer fragment spreads."
    )


def _top(selection_set: SelectionSetNode) -> tuple[list[FieldNode], list[str]]:
    """The fields of a selection set, through its inline fragments, and the fragments it
    spreads (each once)."""
    fields: list[FieldNode] = []
    spreads: dict[str, None] = {}
    stack = [selection_set]
    while stack:
        for selection in stack.pop().selections:
            if isinstance(selection, FieldNode):
                fields.append(selection)
            elif isinstance(selection, InlineFragmentNode):
                stack.append(selection.selection_set)
            elif isinstance(selection, FragmentSpreadNode):
                spreads[selection.name.value] = None
    return fields, list(spreads)


def _spread_order(fragments: dict[str, FragmentDefinitionNode]) -> list[str]:
    """Fragment names, each after the fragments it spreads anywhere inside it (those in a
    cycle, which validation refuses, come last, in some order)."""
    needs: dict[str, set[str]] = {}
    needed_by: dict[str, list[str]] = {name: [] for name in fragments}
    for name, definition in fragments.items():
        found: set[str] = set()
        stack = [definition.selection_set]
        while stack:
            for selection in stack.pop().selections:
                if isinstance(selection, FragmentSpreadNode):
                    if selection.name.value in fragments:
                        found.add(selection.name.value)
                elif (
                    isinstance(selection, FieldNode | InlineFragmentNode)
                    and selection.selection_set is not None
                ):
                    stack.append(selection.selection_set)
        needs[name] = found
        for spread in found:
            needed_by[spread].append(name)
    order = [name for name, found in needs.items() if not found]
    waiting = {name: len(found) for name, found in needs.items()}
    for name in order:  # grows as fragments become ready
        for dependent in needed_by[name]:
            waiting[dependent] -= 1
            if waiting[dependent] == 0:
                order.append(dependent)
    placed = set(order)
    return order + [name for name in fragments if name not in placed]


def _coded(error: GraphQLError) -> GraphQLError:
    error.extensions = {**(error.extensions or {}), "code": "invalid_input"}
    return error
