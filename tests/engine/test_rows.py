"""A level's plain leaves answered by the function made for its plan (`baton.engine.rows`)
are answered as the general per-field path (`_leaf`) answers them: the same data, the same
errors, and the same bytes charged to the response's budget, also where the made function
stops partway through a level and leaves the rest to that path."""

from __future__ import annotations

from typing import Any

import pytest
from graphql import GraphQLObjectType, get_named_type

from baton.engine import rows
from baton.engine.errors import formatted
from baton.engine.execute import Run, root
from baton.engine.limits import DEFAULT_LIMITS
from baton.engine.plans import TypePlan
from baton.engine.runner import Engine, Outcome, Request
from tests.engine.synthetic import SYNTHETIC, Item, Ledger

QUERIES = [
    # every parent's values pass: the made function answers the whole level
    "{ items(first: 2) { __typename code maybeCode size flag tint seen name number } }",
    "{ item { children(first: 4) { name code } } }",
    # it stops partway (a converted value, a null where non-null, a refused value, a raise)
    "{ items(first: 20) { number maybeCode flag seen } }",
    "{ items(first: 20) { maybeCode size } }",
    "{ items(first: 20) { name tint } }",
    "{ items(first: 9) { a: code b: maybeCode t: __typename } }",
    "{ item { holes { code size } } maybeItem(number: 7) { code } }",
    # objects built in the same pass, and the general path from where it stopped
    "{ items(first: 20) { name twin { code size maybeTwin { tint seen } } } }",
    "{ items(first: 20) { maybeTwin { maybeCode flag twin { t: __typename number } } } }",
]

BUDGET = 10**9


async def _answer(query: str) -> tuple[dict[str, Any], int]:
    engine = Engine(SYNTHETIC, DEFAULT_LIMITS)
    ready = await engine._ready(Request(query))
    assert not isinstance(ready, Outcome), ready
    assert ready.plan is not None and ready.compiler is not None
    run = Run(ready.compiler, Ledger(), ready.variables, BUDGET)
    data = await root(run, ready.plan, serial=False)
    return {"data": data, "errors": formatted(run.errors)}, BUDGET - run.bytes_left


@pytest.mark.parametrize("query", QUERIES)
async def test_plain_leaves_answer_and_charge_as_the_general_path_does(
    query: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = await _answer(query)
    with monkeypatch.context() as patched:
        # Every field by the general path, as before there was a made function.
        patched.setattr(rows, "_takes", lambda plan: False)
        general = await _answer(query)
    assert made == general
    assert made[1] > 0


async def _items_level(query: str) -> tuple[Any, TypePlan]:
    """`query`'s data, and the type plan of the items of its one root field (a list)."""
    engine = Engine(SYNTHETIC, DEFAULT_LIMITS)
    ready = await engine._ready(Request(query))
    assert not isinstance(ready, Outcome)
    assert ready.plan is not None and ready.compiler is not None
    run = Run(ready.compiler, Ledger(), ready.variables, BUDGET)
    data = await root(run, ready.plan, serial=False)
    [items] = ready.plan.fields
    item = get_named_type(items.return_type)
    assert isinstance(item, GraphQLObjectType)
    return data, items.child(item)


async def test_the_made_function_answers_parents_until_one_needs_the_general_path() -> None:
    _, child = await _items_level("{ items { code size tint } }")
    assert child.made is not None and child.made.fill is not None
    assert [f.key for f in child.made.inline] == ["code", "size", "tint"]
    assert not child.made.leaves and not child.made.others
    parents = [Item(name="i", number=n) for n in (1, 2, 4, 5)]
    answers = [child.template.copy() for _ in parents]
    done, weighed, keys = child.made.fill(parents, answers)
    # Item 4's size is over Int's range: the pass stops there, having answered the first two.
    assert done == 2
    assert answers[:2] == [
        {"code": "c1", "size": 1000, "tint": "RED"},
        {"code": "c2", "size": 2000, "tint": "GREEN"},
    ]
    assert answers[2:] == [{"code": None, "size": None, "tint": None}] * 2
    assert weighed == ["c1", "c2"]  # `code` is a String, weighed; Int and enums are not
    assert keys == 0  # it built no object below the level


async def test_an_object_read_from_its_parent_is_built_in_the_same_pass() -> None:
    data, child = await _items_level("{ items { name twin { t: __typename code } } }")
    assert child.made is not None and [f.key for f in child.made.inline] == ["name", "twin"]
    assert data == {
        "items": [
            {"name": f"item {n}", "twin": {"t": "Item", "code": f"c{n + 100}"}} for n in range(1, 5)
        ]
    }
