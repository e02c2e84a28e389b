"""The comparison's data, written straight into Baton's tables with a few set-based statements.

Owners, agents and projects follow one pattern: project `i` belongs to owner `i % OWNERS`; a
task's requester is one of that owner's agents and its assignee another of them, or (one task
in five) an agent of the next owner. Every task carries a realistic packet; it sits in one of
the ten states and has the events of the shortest path of moves from `requested` to that state
(about 3.6 events a task). A task depends on up to two earlier tasks of its project.

Two pools are kept apart (project `pool-<tag>`, owner 0, agent `a0` as assignee and runner):
`routed` tasks that W3 accepts, and claimed runs (in_progress, planning) whose first checkpoint
W6 reaches. `reset_pools` puts the consumed ones back between measurements.

The database guards allow only protocol moves; the seed writes finished histories at once, so
it runs with `session_replication_role = replica` (triggers off; superuser only). Constraints
still hold.
"""

from __future__ import annotations

import secrets
from collections import deque
from dataclasses import dataclass, field

import asyncpg  # type: ignore[import-untyped, unused-ignore]

from baton.protocol.handoff import HANDOFF, MoveName, TaskState
from baton.protocol.machine import Position
from baton.protocol.pipeline import RunEvent
from baton.protocol.task_object import DeliverableType

OWNERS = 10
AGENTS = 5
PROJECTS = 40
# Percent of tasks in each state: busy boards, a third of the history finished.
STATE_MIX: dict[TaskState, int] = {
    TaskState.requested: 6,
    TaskState.routed: 12,
    TaskState.accepted: 8,
    TaskState.working: 20,
    TaskState.waiting: 12,
    TaskState.verifying: 5,
    TaskState.approval: 3,
    TaskState.completed: 20,
    TaskState.rejected: 8,
    TaskState.cancelled: 6,
}
assert sum(STATE_MIX.values()) == 100 and set(STATE_MIX) == set(TaskState)
HAS_RESULT = (TaskState.verifying, TaskState.approval, TaskState.completed)


@dataclass(frozen=True)
class Seeded:
    """Who and what the workloads use."""

    tag: str
    tasks: int
    pool: int  # routed tasks for W3, and as many claimed runs for W6
    owners: list[str] = field(default_factory=list)
    warm_pool: int = 0  # the first ones, for warm-ups

    def owner(self, i: int = 0) -> str:
        return self.owners[i]

    def agent(self, owner: int = 0, agent: int = 0) -> str:
        return f"{self.owners[owner]}/a{agent}"

    def project(self, i: int) -> str:
        return f"p{i}-{self.tag}"

    def projects_of(self, owner: int) -> list[str]:
        return [self.project(i) for i in range(PROJECTS) if i % OWNERS == owner]

    @property
    def pool_project(self) -> str:
        return f"pool-{self.tag}"

    @property
    def handoff_project(self) -> str:
        return f"handoffs-{self.tag}"

    def task_id(self, i: int) -> str:
        return f"s{self.tag}{i:08d}"

    def pool_task_id(self, i: int) -> str:
        return f"q{self.tag}{i:08d}"

    def pool_run_id(self, i: int) -> str:
        return f"r{self.tag}{i:08d}"


Step = tuple[MoveName, TaskState, TaskState, str | None]  # move, from, to, waiting_on after


def shortest_paths() -> dict[TaskState, list[Step]]:
    """For every state, the moves of a shortest path from `requested` that Baton's table allows
    (over whole positions, so guards on `waiting_on` hold)."""
    start = HANDOFF.reachable()[0]
    paths: dict[Position[TaskState], list[Step]] = {start: []}
    queue = deque([start])
    while queue:
        position = queue.popleft()
        for t in HANDOFF.transitions():
            if t.source == position and t.target not in paths:
                waiting = t.target["waiting_on"]
                step = (t.move.name, position.state, t.target.state, waiting and waiting.value)
                paths[t.target] = [*paths[position], step]
                queue.append(t.target)
    by_state: dict[TaskState, list[Step]] = {}
    for position, path in paths.items():
        by_state.setdefault(position.state, path)
    return by_state


def _paths_sql() -> str:
    """VALUES (state, step, move, from, to, waiting_on) for every step of every path; step 1
    is the `created` event."""

    def text(value: object) -> str:
        return "NULL" if value is None else f"'{value}'"

    rows = []
    for state, path in shortest_paths().items():
        rows.append(f"('{state.value}', 1, NULL, NULL, 'requested', NULL)")
        for number, (move, source, target, waiting) in enumerate(path, start=2):
            values = [move.value, source.value, target.value, waiting]
            rows.append(f"('{state.value}', {number}, " + ", ".join(map(text, values)) + ")")
    return "VALUES " + ", ".join(rows)


def _state_sql(i: str) -> str:
    """SQL mapping the task number `i` to its state, spread evenly by STATE_MIX."""
    cases, upto = [], 0
    for state, share in STATE_MIX.items():
        upto += share
        cases.append(f"WHEN ({i} * 37) % 100 < {upto} THEN '{state.value}'")
    return "CASE " + " ".join(cases) + " END"


_TYPES = "ARRAY[" + ", ".join(f"'{t.value}'" for t in DeliverableType) + "]"

# The number, owner, agents, project and state of task n (1 … count).
_PLAN = f"""
    SELECT n,
        n % {PROJECTS} AS project_no,
        (n % {PROJECTS}) % {OWNERS} AS owner_no,
        format('o%s-%s/a%s', (n % {PROJECTS}) % {OWNERS}, $2::text, n % {AGENTS}) AS requester,
        CASE WHEN n % 5 = 0
            THEN format('o%s-%s/a%s', ((n % {PROJECTS}) % {OWNERS} + 1) % {OWNERS}, $2::text,
                        (n / 5) % {AGENTS})
            ELSE format('o%s-%s/a%s', (n % {PROJECTS}) % {OWNERS}, $2::text, (n + 1) % {AGENTS})
        END AS assignee,
        {_state_sql("n")} AS state
    FROM generate_series(1, $1::int) AS n
"""

_PACKET = f"""jsonb_build_object(
    'task', format('Update the %s module so that request %s is handled end to end', q.project,
                   q.n),
    'deliverable_type', ({_TYPES})[1 + q.n % {len(DeliverableType)}],
    'acceptance_criteria', jsonb_build_array('the change is covered by a test',
        format('the %s checklist passes', q.project), 'the docs say what changed'),
    'context', repeat('Background the assignee needs before starting; ', 8),
    'files', jsonb_build_array(format('src/%s/handlers.py', q.project),
        format('tests/%s/test_handlers.py', q.project), 'docs/changes.md'),
    'depends_on', to_jsonb(q.depends_on))"""

_RESULT = """jsonb_build_object(
    'summary', 'Done: handled end to end, with tests',
    'evidence', jsonb_build_array(jsonb_build_object('kind', 'test_output',
        'summary', '42 passed', 'content', repeat('.', 42) || ' 42 passed in 1.2s')),
    'provenance', 'agent_generated', 'returned_by', p.assignee,
    'returned_at', to_char(p.updated_at - interval '1 minute', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'))"""


def _insert_tasks(prefix: str, project: str | None) -> str:
    """INSERT … SELECT of `$1` tasks numbered 1 … $1 with ids `<prefix><tag><n>`; all in
    `project` and routed when given (a pool), else by the plan above."""
    ids = f"'{prefix}' || $2::text || lpad(n::text, 8, '0')"
    if project is None:
        plan = f"""SELECT pl.*, format('p%s-%s', pl.project_no, $2::text) AS project,
            ARRAY(SELECT {ids.replace("n::text", "d::text")} FROM unnest(ARRAY[
                CASE WHEN n % 4 IN (1, 2) AND n > {PROJECTS} THEN n - {PROJECTS} END,
                CASE WHEN n % 4 = 2 AND n > {2 * PROJECTS} THEN n - {2 * PROJECTS} END,
                CASE WHEN n % 4 = 3 AND n > {3 * PROJECTS} THEN n - {3 * PROJECTS} END])
                AS d WHERE d IS NOT NULL) AS depends_on
            FROM ({_PLAN}) pl"""
    else:
        plan = f"""SELECT n, format('o0-%s/a1', $2::text) AS requester,
            format('o0-%s/a0', $2::text) AS assignee, 'routed' AS state,
            '{project}' AS project, ARRAY[]::text[] AS depends_on
            FROM generate_series(1, $1::int) AS n"""
    return f"""
    INSERT INTO tasks (id, project, state, waiting_on, requester, assignee, requester_owner,
        assignee_owner, deliverable_type, depends_on, packet, result, latest_checkpoint,
        verification, version, input_digest, created_at, updated_at)
    SELECT p.id, p.project, p.state,
        (SELECT waiting_on FROM paths WHERE paths.state = p.state ORDER BY step DESC LIMIT 1),
        p.requester, p.assignee, split_part(p.requester, '/', 1),
        split_part(p.assignee, '/', 1), p.packet->>'deliverable_type', p.depends_on, p.packet,
        CASE WHEN p.state IN ({", ".join(f"'{s.value}'" for s in HAS_RESULT)}) THEN {_RESULT} END,
        NULL, 'AUTO', (SELECT count(*) FROM paths WHERE paths.state = p.state), md5(p.id),
        p.updated_at - interval '1 hour', p.updated_at
    FROM (SELECT q.*, {_PACKET} AS packet FROM (
        SELECT pl.*, {ids} AS id,
            now() - ($1::int - pl.n) * interval '1 second' AS updated_at
        FROM ({plan}) pl) q) p
    """


_EVENTS = f"""
    INSERT INTO task_events (task_id, kind, move, from_state, to_state, actor, reason, version,
        at, waiting_on, result, latest_checkpoint)
    SELECT t.id, CASE WHEN s.step = 1 THEN 'created' ELSE 'moved' END, s.move, s.from_state,
        s.to_state,
        CASE WHEN s.step = 1 OR s.move IN ('ROUTE', 'HOLD', 'REJECT', 'CANCEL')
             THEN t.requester ELSE t.assignee END,
        NULL, s.step, t.updated_at - (t.version - s.step) * interval '1 minute',
        s.waiting_on,
        CASE WHEN s.to_state IN ({", ".join(f"'{s.value}'" for s in HAS_RESULT)})
             THEN t.result END,
        NULL
    FROM tasks t JOIN paths s ON s.state = t.state
    WHERE t.id LIKE $1
    ORDER BY t.updated_at, t.id, s.step
"""


_RUNS = """
    INSERT INTO runs (id, owner, project, task_id, title, status, phase, checkpoint, created_by,
        version, created_at, updated_at)
    SELECT 'r' || $2::text || lpad(n::text, 8, '0'), format('o0-%s', $2::text), $3, NULL,
        format('Fix flaky test %s', n), 'in_progress', 'planning', 'none',
        format('o0-%s', $2::text), 2, now() - interval '10 minutes', now()
    FROM generate_series(1, $1::int) AS n
"""
_RUN_EVENTS = f"""
    INSERT INTO run_events (run_id, kind, event, from_status, to_status, actor, details, phase,
        checkpoint, version, at)
    SELECT r.id, e.kind, e.event, e.from_status, e.to_status, e.actor, NULL, e.phase, 'none',
        e.version, r.created_at + e.version * interval '1 second'
    FROM runs r CROSS JOIN LATERAL (VALUES
        ('created', NULL, NULL, 'backlog', r.owner, 'idle', 1),
        ('moved', '{RunEvent.CLAIM.value}', 'backlog', 'in_progress', r.owner || '/a0',
         'planning', 2)) AS e(kind, event, from_status, to_status, actor, phase, version)
    WHERE r.project = $1
    ORDER BY r.id, e.version
"""
_LEASES = """
    INSERT INTO run_leases (run_id, holder, expires_at, id)
    SELECT id, owner || '/a0', now() + interval '1 day', 'l' || substr(md5(id), 1, 24)
    FROM runs WHERE project = $1
"""


async def seed(
    conn: asyncpg.Connection, tasks: int, pool: int, warm_pool: int = 0, tag: str | None = None
) -> Seeded:
    """Write `tasks` tasks with their events, `pool` routed tasks and `pool` claimed runs (the
    first `warm_pool` of each for warm-ups)."""
    tag = tag or secrets.token_hex(2)
    world = Seeded(tag, tasks, pool, [f"o{i}-{tag}" for i in range(OWNERS)], warm_pool)
    async with conn.transaction():
        await conn.execute("SET LOCAL session_replication_role = replica")
        await conn.execute(
            f"CREATE TEMP TABLE paths (state, step, move, from_state, to_state, waiting_on) "
            f"ON COMMIT DROP AS {_paths_sql()}"
        )
        await conn.execute(_insert_tasks("s", None), tasks, tag)
        await conn.execute(_insert_tasks("q", world.pool_project), pool, tag)
        await conn.execute(_EVENTS, f"s{tag}%")
        await conn.execute(_EVENTS, f"q{tag}%")
        await conn.execute(_RUNS, pool, tag, world.pool_project)
        await conn.execute(_RUN_EVENTS, world.pool_project)
        await conn.execute(_LEASES, world.pool_project)
    # VACUUM too: it empties the GIN index's pending list, as autovacuum would on a live database.
    await conn.execute("VACUUM (ANALYZE) tasks, task_events, runs, run_events")
    return world


async def reset_pools(conn: asyncpg.Connection, world: Seeded) -> tuple[int, int]:
    """Put the pool's accepted tasks back to `routed` and its runs back to the first phase
    (without events: the bench's own bookkeeping). Returns how many of each were reset."""
    async with conn.transaction():
        await conn.execute("SET LOCAL session_replication_role = replica")
        tasks = await conn.execute(
            "UPDATE tasks SET state = 'routed', version = version + 1, updated_at = now() "
            "WHERE project = $1 AND state <> 'routed'",
            world.pool_project,
        )
        runs = await conn.execute(
            "UPDATE runs SET phase = 'planning', checkpoint = 'none', version = version + 1, "
            "updated_at = now() WHERE project = $1 AND checkpoint <> 'none'",
            world.pool_project,
        )
    return int(tasks.split()[-1]), int(runs.split()[-1])
