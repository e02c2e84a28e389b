"""Paging shared by every connection: page sizes, event cursors and `PageInfo`."""

from __future__ import annotations

from collections.abc import Sequence

import strawberry

from baton.engine.cost import checked, parses
from baton.errors import InvalidInput
from baton.numbers import MAX_BIGINT, ascii_int
from baton.store.tasks import Listed, encode_cursor

MAX_PAGE = 100


def check_page_size(first: int) -> None:
    if first < 0 or first > MAX_PAGE:
        raise InvalidInput("first", f"must be between 0 and {MAX_PAGE}")


def parse_event_cursor(cursor: str) -> int:
    event_id = ascii_int(cursor, MAX_BIGINT)
    if event_id is None:
        raise InvalidInput("after", "is not an event cursor")
    return event_id


# Arguments checked before the operation runs (see `baton.engine.cost.checked`).
EVENT_PAGE_ARGUMENTS = checked(after=parses(parse_event_cursor))


@strawberry.type
class PageInfo:
    has_next_page: bool
    has_previous_page: bool
    start_cursor: str | None
    end_cursor: str | None

    @classmethod
    def of_listing(cls, rows: Sequence[Listed], more: bool, *, after: str | None) -> PageInfo:
        """A page of a listing ordered by recency (tasks, runs)."""
        return cls(
            has_next_page=more,
            has_previous_page=after is not None,
            start_cursor=encode_cursor(rows[0]) if rows else None,
            end_cursor=encode_cursor(rows[-1]) if rows else None,
        )

    @classmethod
    def of_events(cls, cursors: Sequence[str], more: bool, *, has_previous: bool) -> PageInfo:
        """A page of a log, oldest first."""
        return cls(
            has_next_page=more,
            has_previous_page=has_previous,
            start_cursor=cursors[0] if cursors else None,
            end_cursor=cursors[-1] if cursors else None,
        )
