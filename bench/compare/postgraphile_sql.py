"""What PostGraphile needs in the bench database to answer the workloads as Baton does.

- Visibility as row-level security for a role of its own (`role`), from the settings that the
  config's `pgSettings` puts on each transaction (`baton.kind`, `baton.handle`, `baton.owner`):
  the same rule as `Principal.sees` (an owner sees both sides of its agents' tasks, an agent the
  tasks it requested or was assigned, admin everything).
- Computed columns: `packetTask`, `dependencies` (in `dependsOn` order), `dependents` (by id).
- Mutations as SQL functions (SECURITY DEFINER, so the role needs no write grants), each the
  same guarded change Baton makes: the subject's advisory lock first (as Baton's), the row
  update guarded by the state and the caller's role, the event row, `pg_notify` on Baton's
  channel. `hand_off` also checks that the caller acts for the requester, is idempotent on its
  id like Baton's, and decides through the gate (the owner's rules, then the default: allow
  within one owner, ask across owners). What they leave out is said in bench/README.md.

The authorization-free reference (`free_install_sql`) reads the same tables as their owner, to
whom row-level security does not apply; its move is a plain function in a schema of its own
(`FREE_SCHEMA`): one UPDATE guarded by the state only and one INSERT of the event, no lock and
no notification.
"""

from __future__ import annotations

from baton.store.runs import RUN_APPEND_LOCK
from baton.store.tasks import EVENT_APPEND_LOCK

# The authorization-free reference's schema, and the moves it holds (under the names of the
# equal-work ones in `public`, which its config hides).
FREE_SCHEMA = "bench_free"
FREE_MOVES = ("accept_task",)

_KIND = "current_setting('baton.kind', true)"
_HANDLE = "current_setting('baton.handle', true)"
_OWNER = "current_setting('baton.owner', true)"


def install_sql(role: str) -> list[str]:
    """Statements that set up PostGraphile's view of the bench database for `role`."""
    sees = f"""{_KIND} = 'ADMIN'
        OR (requester_owner = {_OWNER} AND ({_KIND} = 'OWNER' OR requester = {_HANDLE}))
        OR (assignee_owner = {_OWNER} AND ({_KIND} = 'OWNER' OR assignee = {_HANDLE}))"""
    may_act = f"""({_KIND} = 'ADMIN'
        OR ({_KIND} = 'OWNER' AND split_part(h, '/', 1) = {_HANDLE})
        OR ({_KIND} = 'AGENT' AND h = {_HANDLE}))"""
    return [
        f'CREATE ROLE "{role}" NOLOGIN',
        f'GRANT USAGE ON SCHEMA public TO "{role}"',
        f'GRANT SELECT ON tasks, task_events, runs, run_events TO "{role}"',
        "ALTER TABLE tasks ENABLE ROW LEVEL SECURITY",
        "ALTER TABLE task_events ENABLE ROW LEVEL SECURITY",
        "ALTER TABLE runs ENABLE ROW LEVEL SECURITY",
        "ALTER TABLE run_events ENABLE ROW LEVEL SECURITY",
        f'CREATE POLICY bench_sees ON tasks FOR SELECT TO "{role}" USING ({sees})',
        f"""CREATE POLICY bench_sees ON task_events FOR SELECT TO "{role}"
            USING (EXISTS (SELECT 1 FROM tasks t WHERE t.id = task_id))""",
        f"""CREATE POLICY bench_sees ON runs FOR SELECT TO "{role}"
            USING ({_KIND} = 'ADMIN' OR owner = {_OWNER})""",
        f"""CREATE POLICY bench_sees ON run_events FOR SELECT TO "{role}"
            USING (EXISTS (SELECT 1 FROM runs r WHERE r.id = run_id))""",
        """CREATE FUNCTION tasks_packet_task(t tasks) RETURNS text
            LANGUAGE sql STABLE AS $$ SELECT t.packet->>'task' $$""",
        """CREATE FUNCTION tasks_dependencies(t tasks) RETURNS SETOF tasks
            LANGUAGE sql STABLE AS $$
            SELECT d.* FROM unnest(t.depends_on) WITH ORDINALITY AS w(id, n)
            JOIN tasks d ON d.id = w.id ORDER BY w.n $$""",
        # Row-level security keeps PostgreSQL from using the GIN index for `@>` (the operator is
        # not leakproof): a scan of every task per parent. So this one runs as its owner, with
        # the visibility rule written out.
        f"""CREATE FUNCTION tasks_dependents(t tasks) RETURNS SETOF tasks
            LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public AS $$
            SELECT d.* FROM tasks d WHERE d.depends_on @> ARRAY[t.id]
                AND ({sees.replace("requester", "d.requester").replace("assignee", "d.assignee")})
            ORDER BY d.id $$""",
        f"""CREATE FUNCTION bench_may_act_for(h text) RETURNS boolean
            LANGUAGE sql STABLE AS $$ SELECT {may_act} $$""",
        _ACCEPT,
        _HAND_OFF,
        _REACH,
    ]


def uninstall_sql(role: str) -> list[str]:
    """Statements that take out what `install_sql` made (the role lives outside the database)."""
    functions = [
        "tasks_packet_task(tasks)",
        "tasks_dependencies(tasks)",
        "tasks_dependents(tasks)",
        "bench_may_act_for(text)",
        "accept_task(text)",
        "hand_off(text, text, text, text, jsonb)",
        "reach_checkpoint(text)",
    ]
    tables = ("tasks", "task_events", "runs", "run_events")
    return [
        *(f"DROP FUNCTION IF EXISTS {f}" for f in functions),
        *(f"DROP POLICY IF EXISTS bench_sees ON {t}" for t in tables),
        *(f"ALTER TABLE {t} DISABLE ROW LEVEL SECURITY" for t in tables),
        f'DROP OWNED BY "{role}"',
        f'DROP ROLE IF EXISTS "{role}"',
    ]


def free_install_sql() -> list[str]:
    """Statements that set up the authorization-free reference's moves."""
    return [f"CREATE SCHEMA {FREE_SCHEMA}", _FREE_ACCEPT]


def free_uninstall_sql() -> list[str]:
    return [f"DROP SCHEMA IF EXISTS {FREE_SCHEMA} CASCADE"]


# The event's actor is the assignee: with no principal, the one the move is for.
_FREE_ACCEPT = f"""
CREATE FUNCTION {FREE_SCHEMA}.accept_task(id text) RETURNS public.tasks
LANGUAGE sql VOLATILE AS $$
    WITH moved AS (
        UPDATE public.tasks SET state = 'accepted', version = version + 1, updated_at = now()
        WHERE tasks.id = accept_task.id AND tasks.state = 'routed'
        RETURNING *
    ), event AS (
        INSERT INTO public.task_events (task_id, kind, move, from_state, to_state, actor,
            version, at, waiting_on, result, latest_checkpoint)
        SELECT id, 'moved', 'ACCEPT', 'routed', 'accepted', assignee, version, updated_at,
            waiting_on, result, latest_checkpoint
        FROM moved
    )
    SELECT * FROM moved
$$"""

_ACCEPT = f"""
CREATE FUNCTION accept_task(id text) RETURNS tasks
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = public AS $$
DECLARE
    t tasks;
    event_id bigint;
BEGIN
    -- As Baton's change: the task's own lock before the first write keeps its events in
    -- version order (see baton.store.eventlog); event ids come from the column's default.
    PERFORM pg_advisory_xact_lock({EVENT_APPEND_LOCK}, hashtext(accept_task.id));
    UPDATE tasks SET state = 'accepted', version = tasks.version + 1, updated_at = now()
    WHERE tasks.id = accept_task.id AND tasks.state = 'routed'
        AND ({_KIND} = 'ADMIN'
            OR ({_KIND} = 'OWNER' AND tasks.assignee_owner = {_HANDLE})
            OR ({_KIND} = 'AGENT' AND tasks.assignee = {_HANDLE}))
    RETURNING * INTO t;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'acceptTask refused for %', id USING ERRCODE = 'check_violation';
    END IF;
    INSERT INTO task_events (task_id, kind, move, from_state, to_state, actor, version, at,
        waiting_on, result, latest_checkpoint)
    VALUES (t.id, 'moved', 'ACCEPT', 'routed', 'accepted', {_HANDLE}, t.version, t.updated_at,
        t.waiting_on, t.result, t.latest_checkpoint)
    RETURNING task_events.id INTO event_id;
    PERFORM pg_notify('baton_task_events', event_id::text);
    RETURN t;
END $$"""

_HAND_OFF = f"""
CREATE FUNCTION hand_off(id text, project text, requester text, assignee text, packet jsonb)
RETURNS tasks
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = public AS $$
#variable_conflict use_variable
DECLARE
    t tasks;
    digest text := md5(jsonb_build_array(project, requester, assignee, packet)::text);
    decision text;
    target text;
    move text;
    event_id bigint;
BEGIN
    IF NOT bench_may_act_for(requester) THEN
        RAISE EXCEPTION 'only the requester agent or its owner may hand off in its name'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    SELECT r.decision INTO decision FROM gate_rules r
    WHERE r.owner = split_part(assignee, '/', 1)
        AND requester LIKE replace(r.requester, '*', '%')
        AND project LIKE replace(r.project, '*', '%')
        AND (r.deliverable_types = '{{}}' OR packet->>'deliverable_type' = ANY(r.deliverable_types))
    ORDER BY r.priority DESC, r.id LIMIT 1;
    decision := coalesce(decision, CASE WHEN split_part(requester, '/', 1)
        = split_part(assignee, '/', 1) THEN 'ALLOW' ELSE 'ASK' END);
    INSERT INTO tasks (id, project, state, requester, assignee, requester_owner,
        assignee_owner, deliverable_type, depends_on, packet, verification, version,
        input_digest, created_at, updated_at)
    VALUES (hand_off.id, project, 'requested', requester, assignee,
        split_part(requester, '/', 1), split_part(assignee, '/', 1),
        packet->>'deliverable_type',
        ARRAY(SELECT jsonb_array_elements_text(coalesce(packet->'depends_on', '[]'))),
        packet, 'AUTO', 1, digest, now(), now())
    ON CONFLICT ON CONSTRAINT tasks_pkey DO NOTHING
    RETURNING * INTO t;
    IF NOT FOUND THEN
        SELECT * INTO t FROM tasks WHERE tasks.id = hand_off.id;
        IF t.input_digest <> digest THEN
            RAISE EXCEPTION 'task % exists with another input', hand_off.id
                USING ERRCODE = 'unique_violation';
        END IF;
        RETURN t;
    END IF;
    INSERT INTO task_events (task_id, kind, to_state, actor, version, at)
    VALUES (t.id, 'created', 'requested', {_HANDLE}, 1, t.updated_at)
    RETURNING task_events.id INTO event_id;
    SELECT v.target, v.move INTO target, move FROM (VALUES
        ('ALLOW', 'routed', 'ROUTE'), ('ASK', 'waiting', 'HOLD'), ('DENY', 'rejected', 'REJECT')
    ) AS v(decision, target, move) WHERE v.decision = decision;
    IF target IS NOT NULL THEN
        UPDATE tasks SET state = target, version = 2, updated_at = now(),
            waiting_on = CASE WHEN target = 'waiting' THEN 'owner_approval' END
        WHERE tasks.id = t.id RETURNING * INTO t;
        INSERT INTO task_events (task_id, kind, move, from_state, to_state, actor, version, at,
            waiting_on)
        VALUES (t.id, 'moved', move, 'requested', target, {_HANDLE}, 2, t.updated_at,
            t.waiting_on)
        RETURNING task_events.id INTO event_id;
    END IF;
    PERFORM pg_notify('baton_task_events', event_id::text);
    RETURN t;
END $$"""

_REACH = f"""
CREATE FUNCTION reach_checkpoint(id text) RETURNS runs
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = public AS $$
DECLARE
    r runs;
    event_id bigint;
BEGIN
    PERFORM pg_advisory_xact_lock({RUN_APPEND_LOCK}, hashtext(reach_checkpoint.id));
    UPDATE runs SET phase = 'implementing', checkpoint = 'plans_complete',
        version = runs.version + 1, updated_at = now()
    WHERE runs.id = reach_checkpoint.id AND runs.status = 'in_progress'
        AND runs.phase = 'planning' AND runs.checkpoint = 'none'
        AND ({_KIND} = 'ADMIN' OR runs.owner = {_OWNER})
    RETURNING * INTO r;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'reachCheckpoint refused for %', id USING ERRCODE = 'check_violation';
    END IF;
    INSERT INTO run_events (run_id, kind, event, from_status, to_status, actor, details, phase,
        checkpoint, questions, answers, pull_request_url, failure_reason, version, at)
    VALUES (r.id, 'moved', 'CHECKPOINT_REACHED', 'in_progress', r.status, {_HANDLE},
        '{{"checkpoint": "plans_complete"}}', r.phase, r.checkpoint, r.questions, r.answers,
        r.pull_request_url, r.failure_reason, r.version, r.updated_at)
    RETURNING run_events.id INTO event_id;
    PERFORM pg_notify('baton_run_events', event_id::text);
    RETURN r;
END $$"""
