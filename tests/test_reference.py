"""The README's generated tables and the schema's documented caps match the code."""

from __future__ import annotations

from pathlib import Path

from baton.api.schema import schema
from baton.reference import rendered
from baton.web.graphql_ws import SocketLimits

README = Path(__file__).parent.parent / "README.md"


def test_the_readme_tables_are_current() -> None:
    text = README.read_text()
    assert text == rendered(text), "README.md is stale: run `python -m baton.reference`"


def test_the_subscriptions_document_the_per_socket_cap() -> None:
    cap = f"at most {SocketLimits().max_operations} operations"
    subscription = schema._schema.subscription_type
    assert subscription is not None
    for name in ("taskEvents", "taskUpdated"):
        assert cap in (subscription.fields[name].description or ""), name
    assert f"| {SocketLimits().max_operations} at once;" in README.read_text()
