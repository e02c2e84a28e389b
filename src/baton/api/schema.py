"""The schema: queries, generated mutations, limits and error codes."""

from __future__ import annotations

import logging

import strawberry
from graphql import GraphQLError
from strawberry.extensions import MaskErrors, MaxAliasesLimiter, MaxTokensLimiter, QueryDepthLimiter
from strawberry.tools import create_type
from strawberry.types import ExecutionContext

from baton.api.execution import PerEventMemoExecutionContext
from baton.api.mutations import ALL_FIELDS
from baton.api.queries import Query
from baton.api.storable import StorableStrings
from baton.api.subscriptions import Subscription
from baton.errors import BatonError

log = logging.getLogger("baton.api")

MAX_DEPTH = 12
MAX_ALIASES = 20
MAX_TOKENS = 5000


class ErrorCodes(MaskErrors):
    """Every `errors[]` entry gets `extensions.code`; unexpected exceptions are masked.

    A domain error raised in a resolver keeps its message and code (`invalid_input`,
    `forbidden`, …); a GraphQL syntax or validation error is `invalid_input`; anything else is
    logged with its traceback and answered as `internal` with no detail.
    """

    def __init__(self) -> None:
        super().__init__(error_message="Internal server error.")

    def _process_errors(self, errors: list[GraphQLError]) -> list[GraphQLError]:
        return [self._coded(error) for error in errors]

    def _coded(self, error: GraphQLError) -> GraphQLError:
        original = error.original_error
        if isinstance(original, BatonError):
            code = original.code
        elif original is None or isinstance(original, GraphQLError):
            code = (error.extensions or {}).get("code", "invalid_input")
        else:
            log.error("unexpected error in %s", error.path, exc_info=original)
            error = self.anonymise_error(error)
            code = "internal"
        error.extensions = {**(error.extensions or {}), "code": code}
        return error


class BatonSchema(strawberry.Schema):
    def process_errors(
        self, errors: list[GraphQLError], execution_context: ExecutionContext | None = None
    ) -> None:
        # Strawberry logs every error with a traceback, expected ones too; ErrorCodes already
        # logs the unexpected ones, so this stays quiet.
        return


Mutation = create_type("Mutation", ALL_FIELDS)

schema = BatonSchema(
    query=Query,
    mutation=Mutation,
    subscription=Subscription,
    execution_context_class=PerEventMemoExecutionContext,
    extensions=[
        lambda: QueryDepthLimiter(max_depth=MAX_DEPTH),
        lambda: MaxAliasesLimiter(max_alias_count=MAX_ALIASES),
        lambda: MaxTokensLimiter(max_token_count=MAX_TOKENS),
        StorableStrings,
        ErrorCodes,
    ],
)
