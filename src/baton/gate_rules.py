"""Owners' gate rules: who may manage them, and their storage."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from sqlalchemy import Table, delete, insert, select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from baton.access.gate import GateDecision, GateRule, check_rule_globs
from baton.access.principals import Principal, PrincipalKind
from baton.errors import Forbidden, InvalidInput, NotFound
from baton.protocol import task_object
from baton.protocol.task_object import DeliverableType
from baton.store.tables import GateRuleRow

RULES = cast(Table, GateRuleRow.__table__)  # type: ignore[attr-defined]  # set by SQLModel


def _rule(row: Any) -> GateRule:
    return GateRule(
        id=row["id"],
        owner=row["owner"],
        requester=row["requester"],
        project=row["project"],
        deliverable_types=tuple(DeliverableType(d) for d in row["deliverable_types"]),
        decision=GateDecision(row["decision"]),
        priority=row["priority"],
    )


def _rule_owner(principal: Principal, owner: str | None) -> str:
    """Whose rules `principal` manages: its own as an owner; the named owner's as admin."""
    if principal.is_admin:
        if owner is None:
            raise InvalidInput("owner", "admin must name the owner whose rules these are")
        task_object.check_string(owner, task_object.OWNER_PATTERN, "owner", "an owner handle")
        return owner
    if principal.kind is not PrincipalKind.OWNER:
        raise Forbidden("agents cannot manage gate rules")
    if owner is not None and owner != principal.handle:
        raise Forbidden("an owner manages only its own gate rules")
    return principal.handle


async def rules_of(conn: AsyncConnection, owner: str) -> list[GateRule]:
    """An owner's rules in the order the gate tries them."""
    rows = await conn.execute(select(RULES).where(RULES.c.owner == owner))
    return sorted((_rule(r) for r in rows.mappings()), key=lambda r: (-r.priority, r.id))


class GateRules:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def list(self, principal: Principal, owner: str | None) -> list[GateRule]:
        owner = _rule_owner(principal, owner)
        async with self.engine.connect() as conn:
            return await rules_of(conn, owner)

    async def set(
        self,
        principal: Principal,
        *,
        owner: str | None,
        requester: str,
        project: str,
        deliverable_types: Sequence[DeliverableType],
        decision: GateDecision,
        priority: int,
        rule_id: int | None = None,
    ) -> GateRule:
        """Add a rule, or replace rule `rule_id`."""
        owner = _rule_owner(principal, owner)
        check_rule_globs(requester, project)
        values = {
            "owner": owner,
            "requester": requester,
            "project": project,
            "deliverable_types": sorted({d.value for d in deliverable_types}),
            "decision": decision.value,
            "priority": priority,
        }
        async with self.engine.begin() as conn:
            if rule_id is None:
                added = await conn.execute(insert(RULES).values(**values).returning(RULES))
                return _rule(added.mappings().one())
            await self._owned(conn, principal, rule_id)
            replaced = await conn.execute(
                RULES.update().where(RULES.c.id == rule_id).values(**values).returning(RULES)
            )
            return _rule(replaced.mappings().one())

    async def delete(self, principal: Principal, rule_id: int) -> GateRule:
        async with self.engine.begin() as conn:
            rule = await self._owned(conn, principal, rule_id)
            await conn.execute(delete(RULES).where(RULES.c.id == rule_id))
        return rule

    @staticmethod
    async def _owned(conn: AsyncConnection, principal: Principal, rule_id: int) -> GateRule:
        row = (await conn.execute(select(RULES).where(RULES.c.id == rule_id))).mappings().first()
        if row is None or not (principal.is_admin or principal.owner == row["owner"]):
            raise NotFound("gate rule", str(rule_id))
        if principal.kind is PrincipalKind.AGENT:
            raise Forbidden("agents cannot manage gate rules")
        return _rule(row)
