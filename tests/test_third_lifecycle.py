"""A third lifecycle, declared here only, gets its event records, its GraphQL types, its move
results, its live filter and its MCP tools from its declaration alone: a ticket, `open` →
`closed` by one move.

The GraphQL types run in a schema of their own (no database); the filter's SQL and the store's
guarded change run on PostgreSQL over temporary tables, so the layout is a working one.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, ClassVar

import pytest
import strawberry
from graphql import GraphQLEnumType, GraphQLNonNull, GraphQLObjectType, GraphQLUnionType
from strawberry.types import Info

from baton.access.principals import Principal, PrincipalKind
from baton.api.errors import InvalidStateError
from baton.api.lifecycle import Extra, LifecycleSchema, lifecycle_types
from baton.api.results import MOVE_ERRORS, move_results
from baton.live.filters import Condition, FilterSchema, LogFilter, check_filter
from baton.mcp.tools import EVERYONE, Door
from baton.protocol.machine import Machine, Move, StateInfo
from baton.protocol.params import Kind, Param
from baton.store.db import Database
from baton.store.lifecycle import Layout, change_statement, check_event_record
from baton.store.records import event_builder
from baton.store.sql import Params


class TicketState(StrEnum):
    open = "open"
    closed = "closed"


class TicketMove(StrEnum):
    CLOSE = "CLOSE"


class TicketActor(StrEnum):
    OWNER = "owner"


class TicketEventKind(StrEnum):
    created = "created"
    moved = "moved"


TICKETS = Machine(
    name="ticket",
    states=(
        StateInfo(TicketState.open, "Somebody has something to say.", initial=True),
        StateInfo(TicketState.closed, "Said and done.", terminal=True),
    ),
    moves=(
        Move(
            TicketMove.CLOSE,
            TicketState.open,
            TicketState.closed,
            TicketActor.OWNER,
            "closeTicket",
            params=(Param("reason", Kind.TEXT, required=False, description="Why."),),
        ),
    ),
)
LAYOUT = Layout(
    machine=TICKETS,
    table="tickets",
    events="ticket_events",
    subject="ticket_id",
    columns=("state",),
    name="move",
    before="from_state",
    after="to_state",
    copies=(),
    extras=("reason",),
    lock=73_001,
)


# --- records, as the store would read them ---------------------------------------------------


@dataclass(frozen=True)
class TicketRecord:
    id: str
    owner: str
    state: TicketState
    version: int
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class TicketEventRecord:
    id: int
    kind: str
    ticket_id: str
    move: TicketMove | None
    from_state: TicketState | None
    to_state: TicketState
    actor: str
    reason: str | None
    version: int
    at: datetime
    ticket: TicketRecord


def _ticket(row: Any) -> TicketRecord:
    return TicketRecord(
        id=row["id"],
        owner=row["owner"],
        state=TicketState(row["state"]),
        version=row["version"],
        created_at=row["updated_at"],
        updated_at=row["updated_at"],
    )


check_event_record(LAYOUT, TicketEventRecord, "ticket")
ticket_event = event_builder(TicketEventRecord, _ticket, TICKETS, LAYOUT.extras)


# --- the declarations: all a ticket needs beside its table and layout ------------------------


@strawberry.type(description="A ticket.")
class Ticket:
    record: strawberry.Private[TicketRecord]

    @strawberry.field
    def id(self) -> strawberry.ID:
        return strawberry.ID(self.record.id)

    @strawberry.field
    def state(self) -> TicketState:
        return self.record.state


TICKET_SCHEMA = LifecycleSchema(
    layout=LAYOUT,
    node="Ticket",
    noun="ticket",
    nouns="tickets",
    event="TicketEvent",
    kind=TicketEventKind,
    name="The move made, or null for `created`.",
    actor="Who made it.",
    extras=(Extra(str | None, "Why, if said."),),
)
TYPES = lifecycle_types(TICKET_SCHEMA, Ticket)
MOVES = move_results(
    TYPES, prefix="Ticket", description="The ticket moved.", refusal=InvalidStateError
)

TICKET_EVENTS = FilterSchema(
    noun="ticket",
    alias="k",
    visible_sql=lambda principal, p: f"k.owner = {p(principal.owner)}",
    may_see=lambda principal, ticket: ticket.owner == principal.owner,
    conditions=(
        Condition("ticket_ids", log=LAYOUT.subject),
        Condition("states", log=LAYOUT.after),
        Condition("owner", row="owner", many=False),
    ),
)


@dataclass(frozen=True)
class TicketEventFilter(LogFilter[TicketEventRecord]):
    schema: ClassVar[FilterSchema] = TICKET_EVENTS

    ticket_ids: frozenset[str] | None = None
    states: frozenset[TicketState] | None = None
    owner: str | None = None


check_filter(TicketEventFilter)


async def _close(context: Any, name: Any, values: Any, args: dict[str, Any]) -> dict[str, Any]:
    return {"closed": values["id"], "reason": args["reason"]}


DOOR = Door(
    TICKETS,
    subject="ticket",
    subject_id={"type": "string", "description": "The ticket."},
    shown_to=lambda actor: EVERYONE,
    describe=lambda name: f"{name.value}: open → closed.",
    make=_close,
)


# --- a schema holding the generated types, answering from memory -----------------------------

AT = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
OPEN = TicketRecord("k1", "alice", TicketState.open, 1, AT, AT)
CLOSED = TicketRecord("k1", "alice", TicketState.closed, 2, AT, AT)
EVENTS = [
    TicketEventRecord(7, "created", "k1", None, None, TicketState.open, "alice", None, 1, AT, OPEN),
    TicketEventRecord(
        9, "moved", "k1", TicketMove.CLOSE, TicketState.open, TicketState.closed,
        "alice", "done", 2, AT, CLOSED,
    ),
]  # fmt: skip


@strawberry.type
class Query:
    @strawberry.field
    def ticket_events(self, info: Info[Any, None]) -> TYPES.event_connection:  # type: ignore[valid-type]
        return TYPES.events_page(EVENTS, False, has_previous=False)

    @strawberry.field
    def tickets(self) -> TYPES.connection:  # type: ignore[valid-type]
        async def total() -> int:
            return 1

        return TYPES.connection(
            edges=[TYPES.edge(node=Ticket(record=CLOSED))],
            rows=[CLOSED],
            more=False,
            after=None,
            count_total=total,
        )

    @strawberry.field
    def close(self) -> MOVES.union:  # type: ignore[valid-type]
        return MOVES.of(CLOSED, EVENTS[1:])


SCHEMA = strawberry.Schema(query=Query)


def _object(name: str) -> GraphQLObjectType:
    found = SCHEMA._schema.type_map[name]
    assert isinstance(found, GraphQLObjectType), name
    return found


def _field_types(name: str) -> dict[str, str]:
    return {key: str(f.type) for key, f in _object(name).fields.items()}


def test_the_declaration_makes_every_type_under_the_lifecycle_s_names() -> None:
    for name in ("TicketEdge", "TicketConnection", "TicketEvent", "TicketEventEdge"):
        assert name in SCHEMA._schema.type_map
    assert _field_types("TicketEdge") == {"node": "Ticket!", "cursor": "String!"}
    assert _field_types("TicketConnection") == {
        "edges": "[TicketEdge!]!",
        "pageInfo": "PageInfo!",
        "totalCount": "Int!",
    }
    assert _object("TicketConnection").fields["totalCount"].description == (
        "How many tickets match the filter, across all pages."
    )
    assert _field_types("TicketEventEdge") == {"cursor": "String!", "node": "TicketEvent!"}
    assert _field_types("TicketEventConnection") == {
        "edges": "[TicketEventEdge!]!",
        "pageInfo": "PageInfo!",
    }


def test_the_event_type_names_its_fields_after_the_layout_s_columns() -> None:
    assert _field_types("TicketEvent") == {
        "id": "ID!",
        "kind": "TicketEventKind!",
        "ticketId": "ID!",
        "move": "TicketMove",
        "fromState": "TicketState",
        "toState": "TicketState!",
        "actor": "String!",
        "reason": "String",
        "at": "DateTime!",
        "version": "Int!",
        "ticket": "Ticket!",
    }
    event = _object("TicketEvent")
    assert event.description == "One entry of a ticket's history."
    assert event.fields["reason"].description == "Why, if said."
    states = SCHEMA._schema.type_map["TicketState"]
    assert isinstance(states, GraphQLEnumType)
    assert list(states.values) == [s.value for s in TicketState]


def test_the_move_result_is_the_success_its_refusal_and_the_common_errors() -> None:
    union = SCHEMA._schema.type_map["TicketMoveResult"]
    assert isinstance(union, GraphQLUnionType)
    assert [t.name for t in union.types] == [
        "TicketMoveSuccess",
        "InvalidStateError",
        *(t.__name__ for t in MOVE_ERRORS),
    ]
    assert _field_types("TicketMoveSuccess") == {"ticket": "Ticket!", "events": "[TicketEvent!]!"}
    assert isinstance(_object("TicketMoveSuccess").fields["ticket"].type, GraphQLNonNull)


async def test_the_generated_types_answer_from_the_records() -> None:
    result = await SCHEMA.execute(
        """{
          ticketEvents {
            edges { cursor node { id kind ticketId move fromState toState actor reason version
                                  ticket { id state } } }
            pageInfo { hasNextPage startCursor endCursor }
          }
          tickets { edges { node { id } } totalCount pageInfo { hasNextPage hasPreviousPage } }
          close { __typename ... on TicketMoveSuccess { ticket { state } events { move } } }
        }"""
    )
    assert result.errors is None, result.errors
    assert result.data is not None
    page = result.data["ticketEvents"]
    assert page["pageInfo"] == {"hasNextPage": False, "startCursor": "7", "endCursor": "9"}
    closing = page["edges"][1]
    assert closing["cursor"] == "9"
    assert closing["node"] == {
        "id": "9",
        "kind": "moved",
        "ticketId": "k1",
        "move": "CLOSE",
        "fromState": "open",
        "toState": "closed",
        "actor": "alice",
        "reason": "done",
        "version": 2,
        "ticket": {"id": "k1", "state": "closed"},
    }
    assert page["edges"][0]["node"]["move"] is None
    assert result.data["tickets"] == {
        "edges": [{"node": {"id": "k1"}}],
        "totalCount": 1,
        "pageInfo": {"hasNextPage": False, "hasPreviousPage": False},
    }
    assert result.data["close"] == {
        "__typename": "TicketMoveSuccess",
        "ticket": {"state": "closed"},
        "events": [{"move": "CLOSE"}],
    }


def test_an_event_record_that_does_not_follow_its_layout_is_refused() -> None:
    @dataclass(frozen=True)
    class Swapped:
        id: int
        kind: str
        ticket_id: str
        from_state: TicketState | None
        move: TicketMove | None
        to_state: TicketState
        actor: str
        reason: str | None
        version: int
        at: datetime
        ticket: TicketRecord

    with pytest.raises(TypeError, match="its layout needs"):
        check_event_record(LAYOUT, Swapped, "ticket")


def test_a_filter_whose_fields_are_not_its_conditions_is_refused() -> None:
    @dataclass(frozen=True)
    class Wrong(LogFilter[TicketEventRecord]):
        schema: ClassVar[FilterSchema] = TICKET_EVENTS
        ticket_ids: frozenset[str] | None = None

    with pytest.raises(TypeError, match="has fields"):
        check_filter(Wrong)


def test_the_filter_s_where_is_made_from_the_layout_s_columns() -> None:
    alice = Principal(PrincipalKind.OWNER, "alice")
    p = Params(start=2)
    where = TicketEventFilter(
        ticket_ids=frozenset({"k2", "k1"}), states=frozenset({TicketState.closed}), owner="alice"
    ).where(alice, p)
    assert where == (
        "(k.owner = $3) AND e.ticket_id = ANY($4::text[]) AND e.to_state = ANY($5::text[]) "
        "AND k.owner = $6"
    )
    assert p.values == ["alice", ["k1", "k2"], ["closed"], "alice"]
    assert TicketEventFilter().where(alice, Params()) == "(k.owner = $1)"


def test_the_filter_matches_live_events_by_the_same_conditions() -> None:
    alice, bob = (Principal(PrincipalKind.OWNER, o) for o in ("alice", "bob"))
    closing = EVENTS[1]
    assert TicketEventFilter().matches(closing, alice)
    assert not TicketEventFilter().matches(closing, bob)
    assert TicketEventFilter(states=frozenset({TicketState.closed})).matches(closing, alice)
    assert not TicketEventFilter(states=frozenset({TicketState.open})).matches(closing, alice)
    assert not TicketEventFilter(ticket_ids=frozenset({"k2"})).matches(closing, alice)
    assert not TicketEventFilter(owner="bob").matches(closing, alice)


async def test_the_layout_moves_a_ticket_and_the_filter_reads_its_log(db: Database) -> None:
    """The store's guarded change and the filter's SQL, on real (temporary) tables."""
    async with db.transaction() as conn:
        await conn.execute(
            """CREATE TEMP TABLE tickets (
                   id text PRIMARY KEY, owner text NOT NULL, state text NOT NULL,
                   version int NOT NULL, updated_at timestamptz NOT NULL
               ) ON COMMIT DROP;
               CREATE TEMP TABLE ticket_events (
                   id bigserial PRIMARY KEY, ticket_id text NOT NULL, kind text NOT NULL,
                   move text, from_state text, to_state text NOT NULL, actor text NOT NULL,
                   reason text, version int NOT NULL, at timestamptz NOT NULL
               ) ON COMMIT DROP;
               INSERT INTO tickets VALUES
                   ('k1', 'alice', 'open', 1, now()), ('k2', 'bob', 'open', 1, now());"""
        )
        moved = []
        for ticket in ("k1", "k2"):
            p = Params()
            sql = change_statement(
                LAYOUT,
                p,
                pairs=TICKETS.changes(TicketMove.CLOSE),
                select=f"id = {p(ticket)}",
                subject="id",
                name=f"{p(TicketMove.CLOSE.value)}::text",
                actor=p("owner"),
                extras={"reason": p("done")},
            )
            row = await conn.fetchrow(sql, *p.values)
            assert row is not None
            moved.append(ticket_event(row))
        assert [(e.ticket_id, e.from_state, e.to_state, e.version) for e in moved] == [
            ("k1", TicketState.open, TicketState.closed, 2),
            ("k2", TicketState.open, TicketState.closed, 2),
        ]
        again = Params()
        sql = change_statement(
            LAYOUT,
            again,
            pairs=TICKETS.changes(TicketMove.CLOSE),
            select=f"id = {again('k1')}",
            subject="id",
            name="'CLOSE'",
        )
        assert await conn.fetchrow(sql, *again.values) is None  # closed has no way out

        alice = Principal(PrincipalKind.OWNER, "alice")
        for where in (
            TicketEventFilter(),
            TicketEventFilter(states=frozenset({TicketState.closed})),
            TicketEventFilter(ticket_ids=frozenset({"k2"})),
            TicketEventFilter(owner="bob"),
        ):
            p = Params()
            condition = where.where(alice, p)
            rows = await conn.fetch(
                f"SELECT e.id FROM ticket_events e JOIN tickets k ON k.id = e.ticket_id "
                f"WHERE {condition} ORDER BY e.id",
                *p.values,
            )
            assert [r["id"] for r in rows] == [e.id for e in moved if where.matches(e, alice)]


def test_the_door_makes_a_tool_per_move_with_its_input_schema() -> None:
    tools = DOOR.tools()
    assert [t.name for t in tools] == ["closeTicket"]
    tool = tools[0]
    assert tool.lifecycle == "ticket"
    assert tool.move is TicketMove.CLOSE
    assert tool.description == "CLOSE: open → closed. In closed: Said and done."
    schema = tool.input_schema
    assert list(schema["properties"]) == ["id", "expectedVersion", "reason"]
    assert schema["properties"]["id"] == {"type": "string", "description": "The ticket."}
    assert schema["properties"]["reason"]["description"] == "Why."
    assert schema["required"] == ["id"]


async def test_the_door_s_tool_calls_the_declared_move() -> None:
    tool = DOOR.tools()[0]
    answer = await tool.call(None, {"id": "k1", "reason": "done"})  # type: ignore[arg-type]
    assert answer == {"closed": "k1", "reason": "done"}


def test_the_ticket_event_shape_follows_the_declaration_too() -> None:
    from baton.mcp.shapes import event_shape

    shape = event_shape(LAYOUT)(EVENTS[1])
    assert list(shape) == [
        "id",
        "kind",
        "ticketId",
        "move",
        "fromState",
        "toState",
        "actor",
        "reason",
        "at",
        "version",
    ]
    assert operator.itemgetter("move", "toState", "reason")(shape) == ("CLOSE", "closed", "done")
