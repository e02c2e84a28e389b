"""The GraphQL types every lifecycle gets from its declaration: a row's edge and connection, and
its log's entry, edge and connection.

A lifecycle declares its store `Layout` (which names the log's columns, and whose machine names
the states and moves) and the schema's words for it (`LifecycleSchema`); `lifecycle_types`
makes `<Node>Edge`, `<Node>Connection`, `<Event>`, `<Event>Edge` and `<Event>Connection` from
that alone. The node type itself (`Task`, `Run`) stays hand-written: its fields are the
lifecycle's own.

Deliberately no `from __future__ import annotations`: the generated resolvers' annotations
must be real types for Strawberry to read.
"""

import operator
import types
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from typing import Any, Generic, TypeVar

import strawberry

from baton.api.fields import converted, reader
from baton.api.pages import PageInfo
from baton.api.wrap import edges_of
from baton.store.lifecycle import Layout
from baton.store.tasks import Listed, encode_cursor

N = TypeVar("N")
R = TypeVar("R")

# A private attribute's annotation, built as a value for the generated classes.
PRIVATE: Any = strawberry.Private[Any]  # type: ignore[misc]  # mypy reads it as a type only


@dataclass(frozen=True)
class Extra:
    """One of the log's own columns (`Layout.extras`) on the event entry: its type and
    description (how its value reads is the layout's, `Layout.extra_reader`)."""

    annotation: Any
    description: str


@dataclass(frozen=True)
class LifecycleSchema:
    """The schema's words for a lifecycle; everything else comes from its `Layout`."""

    layout: Layout
    node: str  # the row's GraphQL type: Task, Run
    noun: str  # task, run: descriptions, and the entry's field holding the row
    nouns: str  # tasks, runs
    event: str  # the entry's GraphQL type: TaskEvent, RunEvent
    kind: type[Enum]  # what an entry records: created, moved…
    name: str  # the description of the move's name on an entry
    actor: str  # the description of `actor`
    extras: tuple[Extra, ...]  # one per `layout.extras`, in order
    to_required: bool = True  # whether the primary axis after the entry is never null


# Static faces of the generated classes, for the type checker: the classes themselves are made
# at import time, so modules name them through aliases to these (`if TYPE_CHECKING`).
class Edge(Generic[N]):
    node: N

    def __init__(self, *, node: N) -> None: ...


class Connection(Generic[N]):
    edges: list[Edge[N]]

    def __init__(
        self,
        *,
        edges: list[Edge[N]],
        rows: Sequence[Listed],
        more: bool,
        after: str | None,
        count_total: Callable[[], Awaitable[int]],
    ) -> None: ...


class Entry(Generic[R]):
    record: R

    def __init__(self, *, record: R) -> None: ...


class EventConnection(Generic[R]):
    page_info: PageInfo


@dataclass(frozen=True)
class LifecycleTypes:
    """What `lifecycle_types` made for one lifecycle."""

    schema: LifecycleSchema
    node: type
    edge: type
    connection: type
    event: type
    event_edge: type
    event_connection: type

    def events_page(self, rows: Sequence[Any], more: bool, *, has_previous: bool) -> Any:
        """A page of entries (`rows`: event records, oldest first). Its edges and page info
        are made when asked for: a page per task of a listing is common, and most ask for
        one of the two."""
        return self.event_connection(rows=rows, more=more, has_previous=has_previous)


_NODES: dict[str, type] = {}


def node_type(name: str) -> type:
    """The node type of the lifecycle declared as `name`: how one lifecycle's types wrap
    another's rows (a task's runs) without importing its module."""
    return _NODES[name]


def _strawberry_type(
    name: str, namespace: dict[str, Any], description: str | None = None, *, python: str = ""
) -> type:
    cls = types.new_class(python or name, (), {}, lambda ns: ns.update(namespace))
    cls.__module__ = __name__
    return strawberry.type(cls, name=name, description=description)


def lifecycle_types(schema: LifecycleSchema, node: type) -> LifecycleTypes:
    """The connection, edge and event types of the lifecycle `schema` declares, whose rows
    `node` (a Strawberry type with a `record`) shows."""
    _NODES[schema.node] = node
    edge = _edge(schema, node)
    event = _event(schema, node)
    event_edge = _event_edge(schema, event)
    return LifecycleTypes(
        schema=schema,
        node=node,
        edge=edge,
        connection=_connection(schema, edge),
        event=event,
        event_edge=event_edge,
        event_connection=_event_connection(schema, event_edge),
    )


def _edge(schema: LifecycleSchema, node: type) -> type:
    def cursor(self: Any) -> str:
        # Encoded only when asked for: most pages never read their edges' cursors.
        return encode_cursor(self.node.record)

    namespace = {"__annotations__": {"node": node}, "cursor": strawberry.field(resolver=cursor)}
    return _strawberry_type(f"{schema.node}Edge", namespace)


def _connection(schema: LifecycleSchema, edge: type) -> type:
    async def total_count(self: Any) -> int:
        return int(await self.count_total())

    def page_info(self: Any) -> PageInfo:
        # Made when asked for: a page read for its nodes alone need not read `updatedAt`.
        return PageInfo.of_listing(self.rows, self.more, after=self.after)

    namespace = {
        "__annotations__": {
            "edges": types.GenericAlias(list, (edge,)),  # `list[edge]`, of a class made here
            "rows": PRIVATE,
            "more": PRIVATE,
            "after": PRIVATE,
            "count_total": PRIVATE,
        },
        "page_info": strawberry.field(resolver=page_info),
        "total_count": strawberry.field(
            resolver=total_count,
            description=f"How many {schema.nouns} match the filter, across all pages.",
        ),
    }
    return _strawberry_type(f"{schema.node}Connection", namespace)


def _event(schema: LifecycleSchema, node: type) -> type:
    """`<Event>`: one entry of the log, wrapping its record, whose attributes are named as the
    log's columns (`Layout`): the subject's id, the move's name, the primary axis before and
    after, the extras, and the row right after the entry under `noun`."""
    layout, noun, kind = schema.layout, schema.noun, schema.kind
    machine = layout.machine
    states: Any = type(machine.initial)
    names: Any = type(machine.names()[0])
    event_name = schema.event

    def share_key(self: Any) -> tuple[str, int]:
        """Identifies this answer among subscription streams (see `baton.engine.sharing`)."""
        return (event_name, self.record.id)

    def id_of(self: Any) -> strawberry.ID:
        return strawberry.ID(str(self.record.id))

    kinds = {member.value: member for member in kind}

    def kind_of(self: Any) -> Any:
        value = self.record.kind
        return kinds.get(value) or kind(value)  # a look-up: the enum's call costs a microsecond

    kind_of.__annotations__["return"] = kind

    namespace: dict[str, Any] = {
        "__annotations__": {"record": PRIVATE},
        "share_key": share_key,
        "id": strawberry.field(
            resolver=id_of,
            description=f"A cursor: a decimal integer, strictly increasing along the {noun} "
            f"event log, one order for the whole server (every owner's {noun} events). The log "
            f"orders events by the transaction that wrote them, then by their place in it: one "
            f"{noun}'s events follow its versions, while two {schema.nouns}' events written at "
            "the same moment may stand in another order than they committed. Subscriptions and "
            "webhooks read the log only as far as it is final, so a cursor they gave never "
            "skips an event that commits later. An id is its transaction's number times "
            "1,048,576 plus its place: gaps between your own events show how many transactions "
            "the server ran in between, its overall activity, never whose, what or on which "
            f"{noun}. Baton accepts that, as any shared sequence does; a deployment whose "
            "tenants must not learn each other's volume runs one server (database) per tenant.",
        ),
        "kind": strawberry.field(resolver=kind_of),
        layout.subject: reader(f"record.{layout.subject}", strawberry.ID),
        layout.name: reader(f"record.{layout.name}", names | None, schema.name),
        layout.before: reader(f"record.{layout.before}", states | None),
        layout.after: reader(
            f"record.{layout.after}", states if schema.to_required else states | None
        ),
        "actor": reader("record.actor", str, schema.actor),
    }
    for column, extra in zip(layout.extras, schema.extras, strict=True):
        path = f"record.{column}"
        convert = layout.extra_reader(column)
        namespace[column] = (
            converted(path, convert, extra.annotation, extra.description)
            if convert
            else reader(path, extra.annotation, extra.description)
        )
    get_subject = operator.attrgetter(f"record.{noun}")

    def subject_of(self: Any) -> Any:
        return node(record=get_subject(self))

    subject_of.__annotations__["return"] = node
    namespace |= {
        "at": reader("record.at", datetime),
        "version": reader("record.version", int, f"The {noun}'s version right after this event."),
        noun: strawberry.field(
            resolver=subject_of, description=f"The {noun} as it was right after this event."
        ),
    }
    return _strawberry_type(
        event_name,
        namespace,
        f"One entry of a {noun}'s history.",
        python=f"{event_name}Entry",
    )


def _event_edge(schema: LifecycleSchema, event: type) -> type:
    def cursor(self: Any) -> str:
        return str(self.node.record.id)

    namespace = {
        "__annotations__": {"cursor": str, "node": event},
        "cursor": strawberry.field(resolver=cursor),
    }
    return _strawberry_type(f"{schema.event}Edge", namespace)


def _event_connection(schema: LifecycleSchema, event_edge: type) -> type:
    event = event_edge.__annotations__["node"]

    def edges(self: Any) -> Any:
        return edges_of(event_edge, event, self.rows)

    edges.__annotations__["return"] = types.GenericAlias(list, (event_edge,))

    def page_info(self: Any) -> PageInfo:
        cursors = [str(self.rows[0].id), str(self.rows[-1].id)] if self.rows else []
        return PageInfo.of_events(cursors, self.more, has_previous=self.has_previous)

    namespace = {
        "__annotations__": {"rows": PRIVATE, "more": PRIVATE, "has_previous": PRIVATE},
        "edges": strawberry.field(resolver=edges),
        "page_info": strawberry.field(resolver=page_info),
    }
    return _strawberry_type(f"{schema.event}Connection", namespace)
