"""Id lists go to PostgreSQL as one array literal (`baton.store.sql.text_array`): whatever the
ids hold, PostgreSQL reads back exactly the list that was sent."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from baton.store.db import Database
from baton.store.sql import Params, text_array

AWKWARD = [
    [],
    [""],
    ["NULL", "null"],
    ['a"b', "c\\d", '\\"', '","', "{x}", "a,b", " padded ", "ünï", "😀"],
    ["plain", 'one "quote"'],
    ["back\\slash", "ends\\"],
]


@pytest.mark.parametrize("values", AWKWARD, ids=range(len(AWKWARD)))
async def test_an_array_literal_reads_back_as_the_list_sent(
    db: Database, values: list[str]
) -> None:
    p = Params()
    sql = f"SELECT {p.texts(values)}"
    async with db.connection() as conn:
        assert await conn.fetchval(sql, *p.values) == values


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(st.characters(exclude_characters="\x00")), max_size=8))
def test_the_literal_quotes_every_element(values: list[str]) -> None:
    """Parsed as PostgreSQL's array_in would read it: braces around elements each in double
    quotes, with backslash escaping quotes and backslashes (the database round trip above
    covers the awkward cases; this covers many more without one)."""
    literal = text_array(values)
    assert literal.startswith("{") and literal.endswith("}")
    parsed: list[str] = []
    body, i = literal[1:-1], 0
    while i < len(body):
        assert body[i] == '"'
        i += 1
        chars: list[str] = []
        while body[i] != '"':
            if body[i] == "\\":
                i += 1
            chars.append(body[i])
            i += 1
        parsed.append("".join(chars))
        i += 1
        if i < len(body):
            assert body[i] == ","
            i += 1
    assert parsed == values
