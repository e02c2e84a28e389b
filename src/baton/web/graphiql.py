"""The GraphiQL page served to a browser at GET /graphql."""

from __future__ import annotations

from functools import cache

from strawberry.http.ides import get_graphql_ide_html


@cache
def graphiql_page() -> bytes:
    return get_graphql_ide_html("graphiql").encode()
