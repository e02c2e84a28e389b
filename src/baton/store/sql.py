"""Building SQL with numbered parameters ($1, $2, …), as asyncpg takes them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


class Params:
    """Collects parameter values; calling it with a value returns that value's placeholder."""

    def __init__(self, start: int = 0) -> None:
        self.start = start
        self.values: list[Any] = []

    def __call__(self, value: Any) -> str:
        self.values.append(value)
        return f"${self.start + len(self.values)}"

    def texts(self, values: Sequence[str]) -> str:
        """A `text[]` of `values`: sent as one array literal, which costs a fraction of what
        asyncpg spends encoding a list (two `abc` checks for every element)."""
        return f"{self(text_array(values))}::text::text[]"


def text_array(values: Sequence[str]) -> str:
    """PostgreSQL's literal of the text array of `values`, every element quoted."""
    joined = '","'.join(values)
    if "\\" in joined or joined.count('"') != 2 * (len(values) - 1):  # a quote of its own
        joined = '","'.join(v.replace("\\", "\\\\").replace('"', '\\"') for v in values)
    return f'{{"{joined}"}}' if values else "{}"


def quote_identifier(name: str) -> str:
    """`name` as a quoted SQL identifier, for the statements that cannot take it as a
    parameter (CREATE DATABASE, NOTIFY); an empty name or one with NUL is refused."""
    if not name or "\x00" in name:
        raise ValueError(f"not an SQL identifier: {name!r}")
    return '"' + name.replace('"', '""') + '"'


def quote_literal(text: str) -> str:
    """`text` as an escape string literal, read the same whatever `standard_conforming_strings`
    says; text with NUL, which no SQL string holds, is refused."""
    if "\x00" in text:
        raise ValueError("an SQL string cannot hold the NUL character")
    return "E'" + text.replace("\\", "\\\\").replace("'", "''") + "'"
