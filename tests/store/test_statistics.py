"""The planner is told that a project's tasks share their owners (migration 0010): without it,
an owner's listing by project and state ANDed the owner's whole side with the project and sorted
it, where one ordered scan of the project's index stops after the page."""

from __future__ import annotations

from baton.store.db import Database


async def test_tasks_carry_dependency_statistics_on_project_and_owners(db: Database) -> None:
    async with db.connection() as conn:
        rows = await conn.fetch(
            "SELECT s.stxkind::text[] AS kinds, array_agg(a.attname ORDER BY a.attname) AS columns"
            " FROM pg_statistic_ext s"
            " JOIN pg_attribute a ON a.attrelid = s.stxrelid AND a.attnum = ANY(s.stxkeys)"
            " WHERE s.stxrelid = 'tasks'::regclass AND s.stxname = 'tasks_project_owners'"
            " GROUP BY s.stxkind::text[]"
        )
    assert [(r["kinds"], sorted(r["columns"])) for r in rows] == [
        (["f"], ["assignee_owner", "project", "requester_owner"])
    ]
