"""Fields that answer an attribute of their parent's record, as it is or converted.

Each is a Strawberry field with a resolver, for graphql-core's executor and the schema, and
metadata (`baton.engine.plans.reads`) that lets Baton's engine read the attribute itself, in C,
rather than call the resolver for every row of a page.

Deliberately no `from __future__ import annotations`: the resolvers' return annotations must be
the types themselves, which Strawberry reads.
"""

import operator
from collections.abc import Callable
from typing import Any

import strawberry

from baton.engine.plans import reads


def reader(path: str, annotation: Any, description: str | None = None) -> Any:
    """A field answering `self.<path>` (a dotted attribute path) as it is."""
    get = operator.attrgetter(path)

    def resolve(self: Any) -> Any:
        return get(self)

    resolve.__annotations__["return"] = annotation
    return strawberry.field(resolver=resolve, description=description, metadata=reads(get))


def converted(
    path: str, convert: Callable[[Any], Any], annotation: Any, description: str | None = None
) -> Any:
    """A field answering `convert(self.<path>)`."""
    get = operator.attrgetter(path)

    def resolve(self: Any) -> Any:
        return convert(get(self))

    resolve.__annotations__["return"] = annotation
    return strawberry.field(resolver=resolve, description=description)
