"""The store's SQL for "who fills this role" and `Principal.may_act_as` give the same answer for
every role, caller and task shape, a task an agent handed to itself included."""

from __future__ import annotations

import itertools

from baton.access.principals import ADMIN, Principal, PrincipalKind
from baton.protocol.handoff import Actor
from baton.store.db import Database
from baton.store.sql import Params
from baton.store.tasks import role_sql

AGENTS = ["ann/a", "ann/b", "bob/c"]
CALLERS = [
    *(Principal(PrincipalKind.AGENT, a) for a in AGENTS),
    Principal(PrincipalKind.OWNER, "ann"),
    Principal(PrincipalKind.OWNER, "bob"),
    ADMIN,
]
# Every (requester, assignee) pair, the same agent on both sides included.
TASKS = list(itertools.product(AGENTS, repeat=2))


async def test_the_role_sql_agrees_with_may_act_as_everywhere(db: Database) -> None:
    disagreements = []
    async with db.connection() as conn:
        for actor, caller, (requester, assignee) in itertools.product(Actor, CALLERS, TASKS):
            p = Params()
            row = (
                f"SELECT {p(requester)}::text AS requester, {p(requester.split('/')[0])}::text"
                f" AS requester_owner, {p(assignee)}::text AS assignee,"
                f" {p(assignee.split('/')[0])}::text AS assignee_owner"
            )
            condition = role_sql(caller, actor, p, "t")
            in_sql = await conn.fetchval(f"SELECT {condition} FROM ({row}) t", *p.values)
            in_python = caller.may_act_as(actor, requester=requester, assignee=assignee)
            if in_sql is not in_python:
                disagreements.append((actor, caller.handle, requester, assignee, in_sql))
    assert disagreements == []


def test_an_agent_never_verifies_a_task_it_handed_to_itself() -> None:
    me = Principal(PrincipalKind.AGENT, "ann/a")
    assert not me.may_act_as(Actor.VERIFIER, requester="ann/a", assignee="ann/a")
    assert me.may_act_as(Actor.VERIFIER, requester="ann/a", assignee="ann/b")
    # Its owner, a person, still may; and the agent may still cancel what it asked for.
    owner = Principal(PrincipalKind.OWNER, "ann")
    assert owner.may_act_as(Actor.VERIFIER, requester="ann/a", assignee="ann/a")
    assert me.may_act_as(Actor.REQUESTER, requester="ann/a", assignee="ann/a")
