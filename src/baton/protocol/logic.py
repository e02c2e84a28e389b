"""Guards, invariants and effects as small declarative objects.

A lifecycle's table is read three ways: the validator evaluates it, the docs page says it in
prose, and the database guard needs it as SQL. A lambda can only be evaluated, so conditions and
effects are data: each object evaluates itself, says itself, and, when it depends on the position
alone, writes itself as a SQL expression.

A position is seen here as a mapping from axis name to value (`None` where an optional axis is
unset); a move's arguments as a mapping from parameter name to value.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum

Value = Enum | None
Values = Mapping[str, Value]
Args = Mapping[str, object]
# How prose states a condition on an axis: "the phase is", "the task waits on".
Phrase = Callable[[str], str]
# The SQL column that holds an axis.
Column = Callable[[str], str]
# The axes whose columns may be NULL.
Nullable = frozenset[str]


class Undefined(Exception):
    """A function of the table has no value for its argument (e.g. `next(notified)`)."""


def code(value: Value) -> str:
    return "nothing" if value is None else f"`{value.value}`"


def alternatives(words: list[str]) -> str:
    """`a`, `b` or `c`."""
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} or {words[-1]}"


def _literal(value: Value) -> str:
    assert value is not None
    return f"'{value.value}'"


def _order(value: Enum) -> int:
    # An ordered axis is its enum in declaration order (checked when the lifecycle is declared).
    return list(type(value)).index(value)


# --- Conditions: guards and invariants -----------------------------------------------------


class Condition(ABC):
    @abstractmethod
    def holds(self, position: Values, args: Args) -> bool: ...

    @abstractmethod
    def prose(self, phrase: Phrase) -> str: ...

    @abstractmethod
    def sql(self, column: Column, nullable: Nullable = frozenset()) -> str:
        """A boolean SQL expression that is never NULL; only for position-only conditions."""

    @abstractmethod
    def axes(self) -> frozenset[str]: ...

    def params(self) -> frozenset[str]:
        return frozenset()


@dataclass(frozen=True, init=False)
class Is(Condition):
    """The axis has one of the values (`None`: the axis is unset)."""

    axis: str
    values: tuple[Value, ...]

    def __init__(self, axis: str, *values: Value) -> None:
        object.__setattr__(self, "axis", axis)
        object.__setattr__(self, "values", values)

    def holds(self, position: Values, args: Args) -> bool:
        return position[self.axis] in self.values

    def prose(self, phrase: Phrase) -> str:
        return f"{phrase(self.axis)} {alternatives([code(v) for v in self.values])}"

    def sql(self, column: Column, nullable: Nullable = frozenset()) -> str:
        col = column(self.axis)
        known = [_literal(v) for v in self.values if v is not None]
        test = f"{col} = {known[0]}" if len(known) == 1 else f"{col} IN ({', '.join(known)})"
        if None in self.values:
            return f"({col} IS NULL OR {test})" if known else f"{col} IS NULL"
        # NULL = 'x' is NULL, not false: where the column may be NULL, say that it is set.
        return f"({col} IS NOT NULL AND {test})" if self.axis in nullable else test

    def axes(self) -> frozenset[str]:
        return frozenset({self.axis})


@dataclass(frozen=True)
class Not(Condition):
    inner: Condition

    def holds(self, position: Values, args: Args) -> bool:
        return not self.inner.holds(position, args)

    def prose(self, phrase: Phrase) -> str:
        return f"not ({self.inner.prose(phrase)})"

    def sql(self, column: Column, nullable: Nullable = frozenset()) -> str:
        return f"NOT ({self.inner.sql(column, nullable)})"

    def axes(self) -> frozenset[str]:
        return self.inner.axes()

    def params(self) -> frozenset[str]:
        return self.inner.params()


@dataclass(frozen=True, init=False)
class All(Condition):
    """Every part holds; with no parts, always."""

    parts: tuple[Condition, ...]

    def __init__(self, *parts: Condition) -> None:
        object.__setattr__(self, "parts", parts)

    def holds(self, position: Values, args: Args) -> bool:
        return all(p.holds(position, args) for p in self.parts)

    def prose(self, phrase: Phrase) -> str:
        return " and ".join(p.prose(phrase) for p in self.parts) if self.parts else "always"

    def sql(self, column: Column, nullable: Nullable = frozenset()) -> str:
        if not self.parts:
            return "TRUE"
        return f"({' AND '.join(p.sql(column, nullable) for p in self.parts)})"

    def axes(self) -> frozenset[str]:
        return frozenset().union(*(p.axes() for p in self.parts))

    def params(self) -> frozenset[str]:
        return frozenset().union(*(p.params() for p in self.parts))


ALWAYS = All()


@dataclass(frozen=True)
class Implies(Condition):
    premise: Condition
    conclusion: Condition

    def holds(self, position: Values, args: Args) -> bool:
        return not self.premise.holds(position, args) or self.conclusion.holds(position, args)

    def prose(self, phrase: Phrase) -> str:
        return f"when {self.premise.prose(phrase)}, {self.conclusion.prose(phrase)}"

    def sql(self, column: Column, nullable: Nullable = frozenset()) -> str:
        premise, conclusion = (
            self.premise.sql(column, nullable),
            self.conclusion.sql(column, nullable),
        )
        return f"(NOT ({premise}) OR {conclusion})"

    def axes(self) -> frozenset[str]:
        return self.premise.axes() | self.conclusion.axes()

    def params(self) -> frozenset[str]:
        return self.premise.params() | self.conclusion.params()


@dataclass(frozen=True)
class Iff(Condition):
    left: Condition
    right: Condition

    def holds(self, position: Values, args: Args) -> bool:
        return self.left.holds(position, args) == self.right.holds(position, args)

    def prose(self, phrase: Phrase) -> str:
        return f"{self.left.prose(phrase)} exactly when {self.right.prose(phrase)}"

    def sql(self, column: Column, nullable: Nullable = frozenset()) -> str:
        return f"(({self.left.sql(column, nullable)}) = ({self.right.sql(column, nullable)}))"

    def axes(self) -> frozenset[str]:
        return self.left.axes() | self.right.axes()

    def params(self) -> frozenset[str]:
        return self.left.params() | self.right.params()


@dataclass(frozen=True)
class Later(Condition):
    """The argument `param` comes after the position's value on the ordered axis `axis`."""

    param: str
    axis: str

    def holds(self, position: Values, args: Args) -> bool:
        given, now = args.get(self.param), position[self.axis]
        if not isinstance(given, Enum) or now is None or type(given) is not type(now):
            return False
        return _order(given) > _order(now)

    def prose(self, phrase: Phrase) -> str:
        return f"the given `{self.param}` is later than the current one"

    def sql(self, column: Column, nullable: Nullable = frozenset()) -> str:
        raise TypeError(f"Later({self.param!r}) depends on a move's argument; it has no SQL")

    def axes(self) -> frozenset[str]:
        return frozenset({self.axis})

    def params(self) -> frozenset[str]:
        return frozenset({self.param})


# --- Effects: what a move does to an attribute ---------------------------------------------


@dataclass(frozen=True)
class Function:
    """A named total-or-partial map between axis values, declared once as a table."""

    name: str
    table: tuple[tuple[Enum, Enum], ...]
    label: str = ""  # a column heading when the docs show the table, e.g. "Resting phase"
    description: str = ""  # a sentence when the docs say it instead

    def __call__(self, value: Value) -> Enum:
        for key, result in self.table:
            if key is value:
                return result
        raise Undefined(f"{self.name}({code(value)}) is undefined")


class Expr(ABC):
    @abstractmethod
    def value(self, position: Values, args: Args) -> Value: ...

    @abstractmethod
    def prose(self) -> str: ...

    def axes(self) -> frozenset[str]:
        return frozenset()

    def params(self) -> frozenset[str]:
        return frozenset()


@dataclass(frozen=True)
class Const(Expr):
    constant: Value

    def value(self, position: Values, args: Args) -> Value:
        return self.constant

    def prose(self) -> str:
        return code(self.constant)


@dataclass(frozen=True)
class Now(Expr):
    """The position's current value on `axis`."""

    axis: str

    def value(self, position: Values, args: Args) -> Value:
        return position[self.axis]

    def prose(self) -> str:
        return self.axis

    def axes(self) -> frozenset[str]:
        return frozenset({self.axis})


@dataclass(frozen=True)
class Arg(Expr):
    """The move's argument `param` (a choice among the axis's values)."""

    param: str

    def value(self, position: Values, args: Args) -> Value:
        given = args.get(self.param)
        if given is not None and not isinstance(given, Enum):
            raise Undefined(f"argument {self.param} is not a choice")
        return given

    def prose(self) -> str:
        return f"given {self.param}"

    def params(self) -> frozenset[str]:
        return frozenset({self.param})


@dataclass(frozen=True)
class Apply(Expr):
    function: Function
    argument: Expr

    def value(self, position: Values, args: Args) -> Value:
        return self.function(self.argument.value(position, args))

    def prose(self) -> str:
        return f"{self.function.name}({self.argument.prose()})"

    def axes(self) -> frozenset[str]:
        return self.argument.axes()

    def params(self) -> frozenset[str]:
        return self.argument.params()


@dataclass(frozen=True)
class Keep:
    """The attribute stays as it is."""

    def prose(self) -> str:
        return "kept"


KEEP = Keep()
Effect = Expr | Keep
