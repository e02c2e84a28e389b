"""A small schema of edge cases, for holding the engine to graphql-core's executor.

Baton's own schema rarely fails: its resolvers return what their types promise. This one fails
on purpose, in every way a resolver can: raising (sync and async, in batches), returning null
for a non-null field, a value no leaf can serialise, an object its union does not hold, lists
with holes; plus arguments with defaults, nullable variables in non-null positions, input
objects, enums, interfaces and unions, mutations with side effects (recorded, so a test can see
which ran) and subscriptions whose source or items fail.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from typing import Annotated, Any

import strawberry
from strawberry.types import Info

from baton.engine.plans import batched, reads
from baton.errors import Forbidden, InvalidInput


@dataclass
class Ledger:
    """What one execution's mutations did, in order (the context of every resolver)."""

    done: list[str] = field(default_factory=list)


@strawberry.enum
class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


@strawberry.input
class Range:
    low: int = 0
    high: int | None = None
    tags: list[str] | None = None


@strawberry.interface
class Named:
    name: str


def _kind(value: Any) -> str:
    return type(value).__name__


async def _batch_labels(context: Any, parents: Sequence[Item], prefix: str = "#") -> list[str]:
    await asyncio.sleep(0)
    if any(p.number == 13 for p in parents):
        raise InvalidInput("labelled", "unlucky")
    return [f"{prefix}{p.number}" for p in parents]


# Read from the parent without a resolver call (`reads`): the leaves the engine answers a
# level's parents at a time (`baton.engine.rows`). Most items' values pass its checks; some
# parents' are ones it leaves to the general path: a value the type's serialiser converts, a
# null for a non-null field, one no serialiser takes, a getter that raises.
_ODD_CODES: dict[int, Any] = {3: 3, 5: None, 8: 2.0}
_ODD_MAYBE: dict[int, Any] = {9: 4.5, 11: True, 13: b"bytes"}
_ODD_SIZES: dict[int, Any] = {4: 2**40, 6: True, 8: 3.0, 10: "12"}
_ODD_TINTS: dict[int, Any] = {12: "violet", 14: None}
_UTC_TIME = datetime(2026, 12, 5, 1, 2, 3, 456789, tzinfo=UTC)
_ODD_TIMES: dict[int, Any] = {
    2: datetime(2026, 12, 5, 1, 2, 3),  # naive: written by `isoformat()`
    15: datetime(2026, 12, 5, 1, 2, 3, tzinfo=timezone(timedelta(hours=2))),
    16: "not a time",
}


def _code(item: Item) -> Any:
    if item.number == 7:
        raise InvalidInput("code", "item 7 has none")
    return _ODD_CODES.get(item.number, f"c{item.number}")


def _maybe_code(item: Item) -> Any:
    return _ODD_MAYBE.get(item.number, None if item.number % 2 == 0 else f"m{item.number}")


def _size(item: Item) -> Any:
    return _ODD_SIZES.get(item.number, item.number * 1000)


def _tint(item: Item) -> Any:
    return _ODD_TINTS.get(item.number, Color.RED if item.number % 2 else Color.GREEN)


def _seen(item: Item) -> Any:
    return _ODD_TIMES.get(item.number, _UTC_TIME + timedelta(minutes=item.number))


def _twin(item: Item) -> Item | None:
    if item.number == 17:
        return None  # for a non-null object
    return Item(name=f"twin {item.number}", number=item.number + 100)


def _maybe_twin(item: Item) -> Item | None:
    return None if item.number % 4 == 0 else Item(name="maybe", number=item.number + 200)


@strawberry.type
class Item(Named):
    number: int

    @strawberry.field(metadata=reads(_twin))
    def twin(self) -> Item:
        return _twin(self)  # type: ignore[return-value]

    @strawberry.field(metadata=reads(_maybe_twin))
    def maybe_twin(self) -> Item | None:
        return _maybe_twin(self)

    @strawberry.field(metadata=reads(_code))
    def code(self) -> str:
        return _code(self)  # type: ignore[no-any-return]

    @strawberry.field(metadata=reads(_maybe_code))
    def maybe_code(self) -> str | None:
        return _maybe_code(self)  # type: ignore[no-any-return]

    @strawberry.field(metadata=reads(_size))
    def size(self) -> int:
        return _size(self)  # type: ignore[no-any-return]

    @strawberry.field(metadata=reads(lambda item: item.number % 3 == 0 or None))
    def flag(self) -> bool | None:
        return self.number % 3 == 0 or None

    @strawberry.field(metadata=reads(_tint))
    def tint(self) -> Color:
        return _tint(self)  # type: ignore[no-any-return]

    @strawberry.field(metadata=reads(_seen))
    def seen(self) -> datetime | None:
        return _seen(self)  # type: ignore[no-any-return]

    @strawberry.field
    def twice(self) -> int:
        return self.number * 2

    @strawberry.field
    async def later(self) -> str:
        await asyncio.sleep(0)
        return f"later {self.number}"

    @strawberry.field
    def fails(self) -> str | None:
        raise InvalidInput("fails", f"item {self.number} fails")

    @strawberry.field
    def must(self) -> str:
        if self.number % 2:
            raise Forbidden(f"odd item {self.number}")
        return "even"

    @strawberry.field
    async def must_later(self) -> str:
        await asyncio.sleep(0)
        if self.number % 3 == 0:
            raise Forbidden(f"item {self.number} is a multiple of three")
        return "fine"

    @strawberry.field
    def null_from_resolver(self) -> str:
        return None  # type: ignore[return-value]  # the bug under test

    @strawberry.field
    def crash(self) -> str | None:
        raise ZeroDivisionError("an unexpected failure")

    @strawberry.field
    def huge(self) -> int | None:
        return 2**40  # not an Int: a serialisation error

    @strawberry.field
    def color(self) -> Color | None:
        return Color.RED if self.number % 2 else "violet"  # type: ignore[return-value]

    @strawberry.field
    def children(self, first: int = 3) -> list[Item]:
        if first < 0:
            raise InvalidInput("first", "must not be negative")
        count = min(first, 4)  # generated documents ask for anything
        return [Item(name=f"{self.name}.{i}", number=self.number * 10 + i) for i in range(count)]

    @strawberry.field
    def holes(self) -> list[Item | None]:
        return [Item(name="a", number=1), None, Item(name="c", number=3)]

    @strawberry.field
    def strict(self) -> list[Item]:
        return [Item(name="a", number=2), None, Item(name="c", number=4)]  # type: ignore[list-item]

    @strawberry.field
    def twins(self) -> list[Item]:
        # A list given as another iterable (graphql-core takes any): not the engine's fast path.
        return (Item(name="x", number=self.number), Item(name="y", number=self.number + 1))  # type: ignore[return-value]

    @strawberry.field
    def matrix(self) -> list[list[int | None]] | None:
        return [[1, None], [], [3]]

    @strawberry.field(metadata=batched(_batch_labels))
    async def label(self, info: Info, prefix: str = "#") -> str:
        [one] = await _batch_labels(info.context, [self], prefix)
        return one

    @strawberry.field
    def echo(
        self,
        first: int = 50,
        maybe: int | None = 7,
        color: Color = Color.GREEN,
        range: Range | None = None,
        words: list[str] | None = None,
    ) -> str:
        shown = None if range is None else (range.low, range.high, range.tags)
        return f"{first}|{maybe}|{color.value}|{shown}|{words}"


@strawberry.type
class Robot(Named):
    serial: str


@strawberry.type
class Ghost:
    boo: str


Thing = Annotated[Item | Robot, strawberry.union("Thing")]


@strawberry.type
class SyntheticQuery:
    @strawberry.field
    def item(self, number: int = 1) -> Item:
        return Item(name=f"item {number}", number=number)

    @strawberry.field
    def maybe_item(self, number: int | None = None) -> Item | None:
        return None if number is None else Item(name=f"item {number}", number=number)

    @strawberry.field
    def items(self, first: int = 4) -> list[Item]:
        count = min(first, 20)  # generated documents ask for anything
        return [Item(name=f"item {i}", number=i) for i in range(1, count + 1)]

    @strawberry.field
    def things(self) -> list[Thing]:
        return [Item(name="i", number=2), Robot(name="r", serial="R2")]

    @strawberry.field
    def named(self) -> list[Named]:
        return [Robot(name="r", serial="R2"), Item(name="i", number=4)]

    @strawberry.field
    def stray(self) -> Thing | None:
        return Ghost(boo="!")  # type: ignore[return-value]  # not a member of the union

    @strawberry.field
    def echo(self, first: int = 50, flag: bool = False, text: str | None = None) -> str:
        return f"{first}|{flag}|{text}"

    @strawberry.field
    async def slow_fail(self) -> str:
        await asyncio.sleep(0)
        raise InvalidInput("slowFail", "no")


def _record(info: Info, what: str) -> None:
    ledger: Ledger = info.context
    ledger.done.append(what)


@strawberry.type
class SyntheticMutation:
    @strawberry.mutation
    def bump(self, info: Info, label: str = "bump") -> Item:
        _record(info, label)
        return Item(name=label, number=len(info.context.done))

    @strawberry.mutation
    async def bump_later(self, info: Info, label: str = "later") -> Item:
        await asyncio.sleep(0)
        _record(info, label)
        return Item(name=label, number=len(info.context.done))

    @strawberry.mutation
    def refuse(self, info: Info) -> Item:
        _record(info, "refuse")
        raise Forbidden("not allowed")

    @strawberry.mutation
    def maybe_refuse(self, info: Info) -> Item | None:
        _record(info, "maybe_refuse")
        raise Forbidden("not allowed, nullably")


@strawberry.type
class SyntheticSubscription:
    @strawberry.subscription
    async def count(self, to: int = 3, fail_at: int | None = None) -> AsyncGenerator[int, None]:
        for i in range(1, min(to, 10) + 1):
            if i == fail_at:
                raise InvalidInput("failAt", f"failed at {i}")
            yield i

    @strawberry.subscription
    async def items(self, to: int = 3) -> AsyncGenerator[Item, None]:
        for i in range(1, min(to, 10) + 1):
            yield Item(name=f"item {i}", number=i)

    @strawberry.subscription
    async def maybe_items(self) -> AsyncGenerator[Item | None, None]:
        yield Item(name="one", number=1)
        yield None
        yield Item(name="three", number=3)


SYNTHETIC = strawberry.Schema(
    query=SyntheticQuery,
    mutation=SyntheticMutation,
    subscription=SyntheticSubscription,
    types=[Robot],
)
