"""The store behind a real PgBouncer in transaction mode (Debian's 1.18: no prepared statement
tracking, unknown startup parameters refused), where a client's transactions each get
whichever server session is free: Baton tells a pooler from a direct connection, prepares no
statement that another transaction could miss or another client could find, migrates through
it from one process after another, and will not LISTEN through it."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator

import asyncpg  # type: ignore[import-untyped]
import pytest
from bench.pgbouncer import PgBouncer

from baton.live.backends import PostgresBackend, SessionNeeded
from baton.protocol.handoff import TaskState
from baton.services.tasks import TaskService
from baton.store import migrate
from baton.store.db import Database, libpq_url, probe_pooler
from baton.store.eventlog import SEQ_BITS
from tests import helpers
from tests.helpers import World
from tests.pgbouncer import pgbouncer_in_front


@pytest.fixture(scope="module")
def one_session(server_url: str) -> Iterator[PgBouncer]:
    """Every client's transactions share one server session: what one leaves there, the
    next one finds."""
    with pgbouncer_in_front(server_url, pool_size=1) as bouncer:
        yield bouncer


@pytest.fixture(scope="module")
def few_sessions(server_url: str) -> Iterator[PgBouncer]:
    """Three server sessions for many clients: each transaction may land in any of them."""
    with pgbouncer_in_front(server_url, pool_size=3) as bouncer:
        yield bouncer


@pytest.fixture
async def fresh_database(server_url: str) -> AsyncIterator[str]:
    """A new, empty database of its own (no migration applied)."""
    async with helpers.fresh_database(server_url, "baton_pgb") as url:
        yield url


async def prepared_statements(url: str) -> list[str]:
    """The names of the statements prepared in the server session a transaction gets."""
    conn = await asyncpg.connect(libpq_url(url), statement_cache_size=0)
    try:
        return [r["name"] for r in await conn.fetch("SELECT name FROM pg_prepared_statements")]
    finally:
        await conn.close()


async def forget_prepared_statements(url: str) -> None:
    conn = await asyncpg.connect(libpq_url(url), statement_cache_size=0)
    try:
        await conn.execute("DEALLOCATE ALL")
    finally:
        await conn.close()


async def test_a_pooler_is_told_apart_from_a_direct_connection(
    database_url: str, few_sessions: PgBouncer
) -> None:
    assert await probe_pooler(database_url) is False
    assert await probe_pooler(few_sessions.url(database_url)) is True
    db = await Database.connect(few_sessions.url(database_url), min_size=1, max_size=2)
    try:
        assert db.pooled
    finally:
        await db.close()


async def test_many_clients_through_few_server_sessions_each_get_their_own_answers(
    database_url: str, few_sessions: PgBouncer
) -> None:
    """Twelve connections take turns on three server sessions; each statement, of several
    shapes and parameter types, answers its own arguments (a named statement prepared in one
    session would be missing, or another client's, in the next)."""
    db = await Database.connect(few_sessions.url(database_url), min_size=12, max_size=12)
    shapes = [
        ("SELECT $1::int * 2", lambda n: n, lambda n: n * 2),
        ("SELECT $1::text || '!'", str, lambda n: f"{n}!"),
        ("SELECT array_length($1::text[], 1)", lambda n: ["x"] * (n % 5 + 1), lambda n: n % 5 + 1),
        ("SELECT ($1::jsonb)->>'n'", lambda n: {"n": n}, str),
    ]

    async def ask(n: int) -> bool:
        sql, argument, expected = shapes[n % len(shapes)]
        async with db.connection() as conn:
            return bool(await conn.fetchval(sql, argument(n)) == expected(n))

    try:
        answers = await asyncio.gather(*(ask(n) for n in range(400)))
    finally:
        await db.close()
    assert all(answers)


async def test_the_pool_leaves_no_prepared_statement_in_the_poolers_session(
    database_url: str, service: TaskService, one_session: PgBouncer
) -> None:
    """What Baton's pool leaves in a server session, the next client of any program gets:
    asyncpg numbers its statements from 1 in every process, so a statement left there makes
    the next process's first one fail ("prepared statement __asyncpg_stmt_1__ already
    exists")."""
    url = one_session.url(database_url)
    await forget_prepared_statements(url)
    db = await Database.connect(url, min_size=2, max_size=4)
    try:
        world = World(TaskService(db))
        await asyncio.gather(*(world.task_in(TaskState.completed) for _ in range(3)))
        assert await prepared_statements(url) == []
        # The probe sees what a caching client leaves (the check above can fail).
        cached = await asyncpg.connect(libpq_url(url))
        try:
            await cached.fetchval("SELECT $1::int", 1)
        finally:
            await cached.close()
        assert len(await prepared_statements(url)) == 1
    finally:
        await db.close()
        await forget_prepared_statements(url)


async def test_a_whole_hand_off_through_the_pooler_commits_each_move_once(
    database_url: str, few_sessions: PgBouncer
) -> None:
    """Hand-offs, gate rules and moves (transactions with transaction-level advisory locks),
    many at once, through three server sessions."""
    db = await Database.connect(few_sessions.url(database_url), min_size=2, max_size=8)
    try:
        service = TaskService(db)
        worlds = [World(service) for _ in range(6)]
        tasks = await asyncio.gather(*(w.task_in(TaskState.completed) for w in worlds))
        for task in tasks:
            versions = await db.fetch(
                "SELECT version FROM task_events WHERE task_id = $1 ORDER BY id", task.id
            )
            assert [r["version"] for r in versions] == list(range(1, len(versions) + 1))
            assert task.state is TaskState.completed
    finally:
        await db.close()


async def test_migrations_run_through_the_pooler_from_one_process_after_another(
    fresh_database: str, one_session: PgBouncer
) -> None:
    """Each `baton migrate` is a new process whose statement names start again at 1, in the
    one server session the last one left its statements in."""
    url = one_session.url(fresh_database)
    env = {**os.environ, "BATON_DATABASE_URL": url, "BATON_LOG_LEVEL": "warning"}
    for _ in range(2):
        done = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "baton.cli", "migrate"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        assert f"database at revision {migrate.head_revision()}" in done.stderr


async def test_listening_through_a_pooler_is_refused(
    database_url: str, few_sessions: PgBouncer
) -> None:
    """A LISTEN through a pooler would listen in a session that then serves other clients."""
    backend = PostgresBackend(libpq_url(few_sessions.url(database_url)))
    with pytest.raises(SessionNeeded, match="pooler"):
        await backend.connect()
    await backend.disconnect()


async def test_a_pool_through_a_pooler_says_when_statements_have_no_time_limit(
    database_url: str, few_sessions: PgBouncer, caplog: pytest.LogCaptureFixture
) -> None:
    """Through a pooler the pool cannot set `statement_timeout` on its connections (PgBouncer
    refuses it at start, and a SET would reach whichever session ran it)."""
    direct = await asyncpg.connect(libpq_url(database_url))
    try:
        assert await direct.fetchval("SELECT current_setting('statement_timeout')") == "0"
    finally:
        await direct.close()
    with caplog.at_level(logging.WARNING, logger="baton.store"):
        db = await Database.connect(few_sessions.url(database_url), min_size=1, max_size=1)
        await db.close()
    assert any("statement_timeout" in r.getMessage() for r in caplog.records)


async def test_changes_made_together_through_the_pooler_each_apply_once(
    database_url: str, few_sessions: PgBouncer
) -> None:
    """Checkpoints that wait for each other go in one transaction (`baton.store.together`):
    its lock statement and pipelined changes keep to one server session through the pooler."""
    db = await Database.connect(few_sessions.url(database_url), min_size=2, max_size=8)
    try:
        service = TaskService(db)
        world = World(service)
        tasks = [await world.task_in(TaskState.working) for _ in range(6)]
        me = helpers.agent(world.assignee)
        checkpoint = {
            "progress": "half way",
            "decisions": [],
            "files_touched": [],
            "next_steps": [],
            "open_questions": [],
        }
        outcomes = await asyncio.gather(
            *(service.save_checkpoint(me, t.id, checkpoint) for t in tasks)
        )
    finally:
        await db.close()
    events = [outcome.events[-1] for outcome in outcomes]
    assert [e.task.id for e in events] == [t.id for t in tasks]
    assert [e.task.version for e in events] == [t.version + 1 for t in tasks]
    # The first alone, the five that waited for it in one transaction.
    assert len({e.id >> SEQ_BITS for e in events}) == 2
