"""A level's plain leaves, answered for each parent by one function made for its plan.

A leaf is plain when its value is an attribute of the parent (`Kind.ATTRIBUTE`: an attribute
or a `reads` getter) or `__typename`. `_leaf` in `baton.engine.execute` answers one field for
every parent, with the general checks at each value; a page of fifty tasks asking for five of
them ran that loop five times, some 0.4 µs a value. The function made here reads one parent's
plain leaves at a time with each type's check written in line (a `str` for String and ID, an
`int` in range for Int), so a value costs its read, a test and a store.

It answers parents in order while every value passes those checks, and stops at the first
parent with one that does not: a getter that raises, a null where the type is non-null, a value
its fast check refuses or its serialiser turns to null. That parent and the rest go to `_leaf`
as before, which reports what the general path reports; the stopping parent's leaves are read
again there, which changes nothing, attributes having no effects. What it answered is
placed in the parents' answers; the values the response's byte budget weighs are returned, one
list per field, for `_leaf` to go on with, so the budget is charged as `_leaf` alone would.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, cast

import orjson
from graphql import GraphQLEnumType, GraphQLNamedType

from baton.engine.leaves import INT_MAX, INT_MIN
from baton.engine.plans import Compiler, FieldPlan, Kind

# (parents, their answers) -> how many were answered, and the weighed values of each field
# that is weighed, in plan order.
Fill = Callable[[Sequence[Any], list[Any]], tuple[int, list[list[Any]]]]


def compile_fill(plans: Sequence[FieldPlan], compiler: Compiler) -> Fill:
    """The function that answers `plans` (a type plan's `plain` leaves) for each parent."""
    names: dict[str, Any] = {
        "INT_MIN": INT_MIN,
        "INT_MAX": INT_MAX,
        "datetime": datetime,
        "UTC": UTC,
        "dumps": orjson.dumps,
    }
    reads: list[str] = []
    stores: list[str] = []
    weighed: list[str] = []
    for n, plan in enumerate(plans):
        assert plan.leaf is not None
        named, non_null = plan.leaf
        if plan.kind is Kind.TYPENAME:
            value = repr(plan.parent.name)
        else:
            value = f"v{n}"
            names[f"g{n}"] = plan.get
            reads.append(f"{value} = g{n}(s)")
            names[f"z{n}"] = compiler.serializer(named)
            if isinstance(named, GraphQLEnumType):
                names[f"m{n}"] = compiler.members(named).get
            reads += _checks(value, named, non_null, n)
        stores.append(f"r[{plan.key!r}] = {value}")
        if compiler.weighs(named):
            weighed.append(f"w{n}")
            kept = f"w{n}.append({value})"
            stores.append(kept if non_null else f"if {value} is not None: {kept}")
    lines = [
        "def fill(sources, results):",
        *(f"    {w} = []" for w in weighed),
        "    n = 0",
        "    for s, r in zip(sources, results):",
        "        try:",
        *(f"            {line}" for line in reads or ["pass"]),
        "        except Exception:",
        "            break",
        *(f"        {line}" for line in stores),
        "        n += 1",
        f"    return n, [{', '.join(weighed)}]",
    ]
    exec("\n".join(lines), names)  # its source is made above from the plan alone
    return cast(Fill, names["fill"])


def _checks(value: str, named: GraphQLNamedType, non_null: bool, n: int) -> list[str]:
    """The lines that stop the pass unless `value` is answered as it is (String, ID, Boolean,
    Int) or as serialiser `z{n}` turns it (any other type; an enum's member known to `m{n}`
    and a UTC time are turned in line, as that serialiser turns them)."""
    nullable = "" if non_null else f"{value} is not None and "
    if named.name in ("String", "ID"):
        return [f"if {nullable}type({value}) is not str: break"]
    if named.name == "Boolean":
        return [f"if {nullable}type({value}) is not bool: break"]
    if named.name == "Int":
        fits = f"type({value}) is int and INT_MIN <= {value} <= INT_MAX"
        return [f"if {nullable}not ({fits}): break"]
    # The general path refuses a serialiser's null; here it stops the pass.
    general = [f"x = z{n}({value})", "if x is None: break"]
    if isinstance(named, GraphQLEnumType):
        turned = [f"x = m{n}(id({value}))", "if x is None:", *_indent(general)]
    elif named.name == "DateTime":
        utc = f"type({value}) is datetime and {value}.tzinfo is UTC"
        turned = [f"if {utc}:", f"    x = dumps({value})[1:-1].decode()", "else:"]
        turned += _indent(general)
    else:
        turned = general
    turned.append(f"{value} = x")
    if non_null:
        return [f"if {value} is None: break", *turned]
    return [f"if {value} is not None:", *_indent(turned)]


def _indent(lines: list[str]) -> list[str]:
    return [f"    {line}" for line in lines]
