"""The GraphQL execution context, with a fix for long-lived subscriptions.

graphql-core 3.3 runs each subscription event on a shallow copy of the subscription's
executor, so every event shares the executor's memo of collected subfields. The memo is keyed
by the identity of per-event lists, so it gains entries on every event and never drops them:
about 3.4 KB per delivered event, for as long as the subscription lives (found by
`bench/live_delivery.py`). Giving each event's executor its own memo keeps memory flat.
"""

from __future__ import annotations

from typing import Any

from strawberry.schema.schema import StrawberryGraphQLCoreExecutionContext


class PerEventMemoExecutionContext(StrawberryGraphQLCoreExecutionContext):
    def build_per_event_executor(self, payload: Any) -> Any:
        executor = super().build_per_event_executor(payload)
        executor._relevant_sub_fields = {}
        return executor
