"""Names and texts quoted into statements that take no parameters (CREATE DATABASE, NOTIFY):
PostgreSQL reads back exactly what was quoted, whatever it holds, and text with NUL, which no
SQL string can hold, is refused before it is sent."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from baton.store.db import Database
from baton.store.sql import quote_identifier, quote_literal

TEXTS = st.text(st.characters(exclude_characters="\x00", exclude_categories=["Cs"]), max_size=40)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=TEXTS)
async def test_a_quoted_literal_reads_back_as_the_text(db: Database, text: str) -> None:
    async with db.connection() as conn:
        assert await conn.fetchval(f"SELECT {quote_literal(text)}") == text
        # and so whatever standard_conforming_strings says
        await conn.execute("SET standard_conforming_strings = off")
        try:
            assert await conn.fetchval(f"SELECT {quote_literal(text)}") == text
        finally:
            await conn.execute("RESET standard_conforming_strings")


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(name=TEXTS.filter(lambda n: 0 < len(n.encode()) < 64))
async def test_a_quoted_identifier_names_exactly_the_name(db: Database, name: str) -> None:
    async with db.connection() as conn:
        record = await conn.fetchrow(f"SELECT 1 AS {quote_identifier(name)}")
    assert list(record.keys()) == [name]


@pytest.mark.parametrize("quote", [quote_literal, quote_identifier])
def test_nul_is_refused_before_anything_is_sent(quote: Callable[[str], str]) -> None:
    with pytest.raises(ValueError, match=r"NUL|identifier"):
        quote("a\x00b")


def test_an_empty_identifier_is_refused() -> None:
    with pytest.raises(ValueError, match="identifier"):
        quote_identifier("")
