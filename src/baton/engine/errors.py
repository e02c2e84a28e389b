"""Every error a client sees carries `extensions.code`; unexpected ones are masked.

A domain error (`BatonError`) keeps its message and code (`invalid_input`, `forbidden`, …); a
GraphQL syntax, validation or coercion error is `invalid_input`; anything else is logged with
its traceback and answered as `internal`, with no detail.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from graphql import GraphQLError

from baton.errors import BatonError

log = logging.getLogger("baton.api")

INTERNAL_MESSAGE = "Internal server error."


def coded(error: GraphQLError) -> GraphQLError:
    original = error.original_error
    if isinstance(original, BatonError):
        code = original.code
    elif original is None or isinstance(original, GraphQLError):
        code = (error.extensions or {}).get("code", "invalid_input")
    else:
        log.error("unexpected error in %s", error.path, exc_info=original)
        error = GraphQLError(
            INTERNAL_MESSAGE, error.nodes, error.source, error.positions, error.path
        )
        code = "internal"
    error.extensions = {**(error.extensions or {}), "code": code}
    return error


def formatted(errors: Iterable[GraphQLError]) -> list[dict[str, Any]]:
    return [dict(coded(error).formatted) for error in errors]
