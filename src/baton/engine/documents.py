"""Documents parsed and validated once, then reused.

graphql-core rebuilds every validation rule's visitor on each call: validating even a small
query costs milliseconds, many times what executing it costs. `DocumentCache` keeps the outcome
of parsing and validating each distinct query text (refusals included, so a client repeating a
bad document pays once too) in an LRU bounded both by entries and by the total size of the
texts it holds.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from graphql import (
    DocumentNode,
    FragmentDefinitionNode,
    GraphQLError,
    GraphQLSchema,
    OperationDefinitionNode,
    parse,
    specified_rules,
    validate,
)
from graphql.validation import ASTValidationRule
from strawberry.extensions.max_aliases import create_validator as alias_limit
from strawberry.extensions.query_depth_limiter import create_validator as depth_limit

from baton.engine.limits import Limits
from baton.storable import unstorable

_NUL_ESCAPE = re.compile(r"\\u(?:0000|\{0+\})", re.IGNORECASE)


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
        self._entries: OrderedDict[str, Prepared] = OrderedDict()
        self._text_bytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, text: str) -> Prepared:
        hit = self._entries.get(text)
        if hit is not None:
            self._entries.move_to_end(text)
            return hit
        prepared = self._prepare(text)
        self._keep(prepared)
        return prepared

    def _keep(self, prepared: Prepared) -> None:
        size = len(prepared.text)
        if size > self.max_text_bytes // 4:
            return  # a huge document is not worth evicting a quarter of the cache for
        self._entries[prepared.text] = prepared
        self._text_bytes += size
        while len(self._entries) > self.max_entries or self._text_bytes > self.max_text_bytes:
            _, dropped = self._entries.popitem(last=False)
            self._text_bytes -= len(dropped.text)

    def _prepare(self, text: str) -> Prepared:
        reason = unstorable(text, "query")
        if reason is None and _NUL_ESCAPE.search(text):
            reason = "strings may not contain the NUL character (at query)"
        if reason is not None:
            return Prepared(text, None, (refusal(reason),))
        try:
            document = parse(text, max_tokens=self.limits.max_tokens)
        except GraphQLError as error:
            return Prepared(text, None, (_coded(error),))
        errors = validate(self.schema, document, self.rules)
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


def _coded(error: GraphQLError) -> GraphQLError:
    error.extensions = {**(error.extensions or {}), "code": "invalid_input"}
    return error
