"""The schema: queries, generated mutations, subscriptions.

Requests run on `baton.engine`, which parses, validates (with the limits) and executes them;
Strawberry's own per-request extensions are not used. `schema.execute` (Strawberry's path) is
kept working for tools, but the server never takes it.
"""

from __future__ import annotations

import strawberry
from graphql import GraphQLError
from strawberry.tools import create_type
from strawberry.types import ExecutionContext

from baton.api.mutations import ALL_FIELDS
from baton.api.queries import Query
from baton.api.subscriptions import Subscription
from baton.api.webhooks import WEBHOOK_FIELDS, WebhookQueries


class BatonSchema(strawberry.Schema):
    def process_errors(
        self, errors: list[GraphQLError], execution_context: ExecutionContext | None = None
    ) -> None:
        # Strawberry logs every error with a traceback, expected ones too; the engine codes
        # and logs the unexpected ones itself.
        return


Mutation = create_type(
    "Mutation",
    [*ALL_FIELDS, *WEBHOOK_FIELDS],
    description="Changes, run one after another in document order. Expected failures are "
    "members of each result union (`... on Error { code message }`). When a field error nulls "
    "the whole response (a non-null field inside a result failing), the mutations after it "
    "do not run: a change is never made that the response does not tell of. If a response "
    "outgrows its byte budget, the `too_expensive` error names the mutations that ran. Every "
    "mutation of a task or a run (all but the gate rules' and webhooks') is also a tool of the "
    "same name, taking the same input, on the Model Context Protocol door: Streamable HTTP at "
    '`/mcp` and stdio through `baton mcp` (the README\'s "Use Baton from an agent").',
)

schema = BatonSchema(
    # merge_types, keeping Query's description
    query=strawberry.type(
        type("Query", (Query, WebhookQueries), {}),
        description=Query.__strawberry_definition__.description,  # type: ignore[attr-defined]
    ),
    mutation=Mutation,
    subscription=Subscription,
)
