"""A level's fields read from its parents, answered a parent at a time by one function made
for its plan.

The general path (`baton.engine.execute`) answers a level field by field, each for every
parent, and an object field as a level of its own: a page of fifty tasks with five leaves and
`packet { task }` went through three levels and some twenty passes over the page, each with
its checks at every value. The function made here takes one parent at a time: it reads the
leaves (an attribute, a `reads` getter, `__typename`) with each type's check written in line (a
`str` for String and ID, an `int` in range for Int, an enum member already seen, a UTC time),
and the object fields read the same way whose own fields are all of these kinds, recursively,
building their answers in place.

It answers parents in order while every value passes those checks, and stops at the first
parent with one that does not: a getter that raises, a null where the type is non-null, a value
its check refuses or its serialiser turns to null. That parent and the rest go to the general
path, which reports what it always reports; the stopping parent's fields are read again there,
which changes nothing, reads having no effects. The bytes it made (the keys of the objects it
built, the weighed values) are charged to the response's budget as the general path charges
them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast

import orjson
from graphql import GraphQLEnumType, GraphQLError, GraphQLObjectType, GraphQLScalarType

from baton.engine.leaves import INT_MAX, INT_MIN
from baton.engine.plans import Compiler, FieldPlan, Kind, TypePlan, unwrap

# (parents, their answers) -> how many parents it answered, the values of weighed leaves it
# placed, and the bytes of the keys of the objects it built below the level.
Fill = Callable[[Sequence[Any], list[Any]], tuple[int, list[Any], int]]


@dataclass(eq=False)
class Made:
    """How a type plan's level is answered: `fill` for the fields in `inline` (None when
    there are none), the general path for `leaves` and `others`."""

    fill: Fill | None
    inline: list[FieldPlan]
    leaves: list[FieldPlan]
    others: list[FieldPlan]


def made_for(plan: TypePlan, compiler: Compiler) -> Made:
    inline = [f for f in plan.fields if _takes(f)]
    if not inline:
        return Made(None, [], plan.leaves, plan.others)
    leaves = [f for f in plan.leaves if f not in inline]
    others = [f for f in plan.others if f not in inline]
    return Made(_Source(compiler).fill(inline), inline, leaves, others)


def _takes(plan: FieldPlan) -> bool:
    """Whether the made function answers `plan`: read from the parent, and a leaf or an
    object (not a list, not abstract) whose own fields it all answers."""
    if plan.kind is Kind.TYPENAME:
        return True
    if plan.kind is not Kind.ATTRIBUTE:
        return False
    if plan.leaf is not None:
        return True
    child = _child(plan)
    return child is not None and not child.introspects and all(_takes(f) for f in child.fields)


def _child(plan: FieldPlan) -> TypePlan | None:
    _, inner = unwrap(plan.return_type)
    if not isinstance(inner, GraphQLObjectType):
        return None
    try:
        return plan.child(inner)
    except GraphQLError:  # @skip/@include given null below it: the general path reports it
        return None


class _Source:
    """The source of one made function, and the names it uses."""

    def __init__(self, compiler: Compiler) -> None:
        self.compiler = compiler
        self.names: dict[str, Any] = {
            "INT_MIN": INT_MIN,
            "INT_MAX": INT_MAX,
            "datetime": datetime,
            "UTC": UTC,
            "dumps": orjson.dumps,
        }
        self.count = 0

    def name(self, prefix: str, value: Any = None) -> str:
        self.count += 1
        name = f"{prefix}{self.count}"
        if value is not None:
            self.names[name] = value
        return name

    def fill(self, fields: list[FieldPlan]) -> Fill:
        reads, stores = self.fields(fields, "s", "r")
        lines = [
            "def fill(sources, results):",
            "    w = []",
            "    keys = 0",
            "    n = 0",
            "    for s, r in zip(sources, results):",
            "        try:",
            *_indent(reads or ["pass"], 3),
            "        except Exception:",
            "            break",
            *_indent(stores, 2),
            "        n += 1",
            "    return n, w, keys",
        ]
        exec("\n".join(lines), self.names)  # its source is made above from the plan alone
        return cast(Fill, self.names["fill"])

    def fields(self, fields: list[FieldPlan], parent: str, answer: str) -> tuple[list[str], ...]:
        """The lines reading `fields` of `parent` (stopping the pass where one needs the
        general path), and those storing them in `answer`."""
        reads: list[str] = []
        stores: list[str] = []
        for plan in fields:
            nullable, _ = unwrap(plan.return_type)
            non_null = not nullable
            key = repr(plan.key)
            if plan.kind is Kind.TYPENAME:  # a String, weighed as `_leaf` weighs it
                typename = repr(plan.parent.name)
                stores += [f"{answer}[{key}] = {typename}", f"w.append({typename})"]
                continue
            value = self.name("v")
            reads.append(f"{value} = {self.name('g', plan.get)}({parent})")
            if plan.leaf is not None:
                leaf, _ = plan.leaf
                reads += self.checks(value, leaf, non_null)
                stores.append(f"{answer}[{key}] = {value}")
                if self.compiler.weighs(leaf):
                    kept = f"w.append({value})"
                    stores.append(kept if non_null else f"if {value} is not None: {kept}")
                continue
            child = _child(plan)
            assert child is not None
            built = self.name("c")
            inner_reads, inner_stores = self.fields(child.fields, value, built)
            make = [
                f"{built} = {self.name('t', child.template.copy)}()",
                *inner_stores,
                f"{answer}[{key}] = {built}",
                f"keys += {child.key_bytes}",
            ]
            if non_null:
                reads += [f"if {value} is None: break", *inner_reads]
                stores += make
            else:
                reads += [f"if {value} is not None:", *_indent(inner_reads or ["pass"], 1)]
                stores += [f"if {value} is not None:", *_indent(make, 1)]
        return reads, stores

    def checks(
        self, value: str, named: GraphQLScalarType | GraphQLEnumType, non_null: bool
    ) -> list[str]:
        """The lines that stop the pass unless `value` is answered as it is (String, ID,
        Boolean, Int) or as the type's serialiser turns it (any other type; an enum's member
        it has seen and a UTC time are turned in line, as that serialiser turns them)."""
        nullable = "" if non_null else f"{value} is not None and "
        if named.name in ("String", "ID"):
            return [f"if {nullable}type({value}) is not str: break"]
        if named.name == "Boolean":
            return [f"if {nullable}type({value}) is not bool: break"]
        if named.name == "Int":
            fits = f"type({value}) is int and INT_MIN <= {value} <= INT_MAX"
            return [f"if {nullable}not ({fits}): break"]
        serialize = self.name("z", self.compiler.serializer(named))
        # The general path refuses a serialiser's null; here it stops the pass.
        general = [f"x = {serialize}({value})", "if x is None: break"]
        if isinstance(named, GraphQLEnumType):
            members = self.name("m", self.compiler.members(named).get)
            turned = [f"x = {members}(id({value}))", "if x is None:", *_indent(general, 1)]
        elif named.name == "DateTime":
            utc = f"type({value}) is datetime and {value}.tzinfo is UTC"
            turned = [f"if {utc}:", f"    x = dumps({value})[1:-1].decode()", "else:"]
            turned += _indent(general, 1)
        else:
            turned = general
        turned.append(f"{value} = x")
        if non_null:
            return [f"if {value} is None: break", *turned]
        return [f"if {value} is not None:", *_indent(turned, 1)]


def _indent(lines: list[str], levels: int) -> list[str]:
    pad = "    " * levels
    return [f"{pad}{line}" for line in lines]
