"""Owners' gate rules: who may manage them, and their storage."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from baton.access.gate import GateDecision, GateRule, check_rule_globs
from baton.access.principals import Principal, PrincipalKind
from baton.errors import Forbidden, InvalidInput, NotFound
from baton.protocol import task_object
from baton.protocol.task_object import DeliverableType
from baton.store.db import Connection, Database

_COLUMNS = "id, owner, requester, project, deliverable_types, decision, priority"
MAX_RULES = 200  # per owner: the gate reads them all on every hand-off


def _rule(row: Mapping[str, Any]) -> GateRule:
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
        task_object.check_owner(owner, "owner")
        return owner
    if principal.kind is not PrincipalKind.OWNER:
        raise Forbidden("agents cannot manage gate rules")
    if owner is not None and owner != principal.handle:
        raise Forbidden("an owner manages only its own gate rules")
    return principal.handle


@dataclass(frozen=True)
class Ruleset:
    """An owner's rules in the order the gate tries them, at one version of them."""

    owner: str
    version: int
    rules: tuple[GateRule, ...]


# An owner's rules and their version, read together: one row per rule, or one with only the
# version when the owner has none.
_RULESET = f"""
SELECT v.version, r.* FROM (
    SELECT coalesce(max(version), 0) AS version FROM gate_rule_versions WHERE owner = $1
) v LEFT JOIN (SELECT {_COLUMNS} FROM gate_rules WHERE owner = $1) r ON TRUE
ORDER BY r.priority DESC, r.id
"""
KEPT_RULES = 10_000  # the most rules a server keeps, over all owners


class GateRules:
    def __init__(self, db: Database) -> None:
        self.db = db
        self._kept: OrderedDict[str, Ruleset] = OrderedDict()
        self._kept_rules = 0

    async def current(self, owner: str, *, fresh: bool = False) -> Ruleset:
        """The owner's rules as this server last read them (or now, when `fresh`). They may be
        stale: whoever acts on them checks the version in the same statement (see
        `baton.store.tasks.hand_off_function_sql`)."""
        kept = self._kept.get(owner)
        if kept is not None and not fresh:
            self._kept.move_to_end(owner)
            return kept
        rows = await self.db.fetch(_RULESET, owner)
        ruleset = Ruleset(
            owner, rows[0]["version"], tuple(_rule(r) for r in rows if r["id"] is not None)
        )
        self._keep(ruleset)
        return ruleset

    def _keep(self, ruleset: Ruleset) -> None:
        old = self._kept.pop(ruleset.owner, None)
        if old is not None:
            self._kept_rules -= len(old.rules)
        self._kept[ruleset.owner] = ruleset
        self._kept_rules += len(ruleset.rules)
        while self._kept_rules > KEPT_RULES or len(self._kept) > KEPT_RULES:
            _, dropped = self._kept.popitem(last=False)
            self._kept_rules -= len(dropped.rules)

    @property
    def kept(self) -> int:
        """How many owners' rules this server keeps."""
        return len(self._kept)

    async def of(self, owner: str) -> list[GateRule]:
        """An owner's rules in the order the gate tries them (higher priority first, older
        first on a tie)."""
        rows = await self.db.fetch(
            f"SELECT {_COLUMNS} FROM gate_rules WHERE owner = $1 ORDER BY priority DESC, id",
            owner,
        )
        return [_rule(r) for r in rows]

    async def list(self, principal: Principal, owner: str | None) -> list[GateRule]:
        return await self.of(_rule_owner(principal, owner))

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
        values = (
            owner,
            requester,
            project,
            sorted({d.value for d in deliverable_types}),
            decision.value,
            priority,
        )
        async with self.db.transaction() as conn:
            if rule_id is None:
                # One owner's rule additions at a time, so the cap holds under concurrency.
                await conn.execute("SELECT pg_advisory_xact_lock(7412010, hashtext($1))", owner)
                held = await conn.fetchval(
                    "SELECT count(*) FROM gate_rules WHERE owner = $1", owner
                )
                if held >= MAX_RULES:
                    raise InvalidInput("owner", f"an owner has at most {MAX_RULES} gate rules")
                added = await conn.fetchrow(
                    "INSERT INTO gate_rules (owner, requester, project, deliverable_types, "
                    f"decision, priority) VALUES ($1, $2, $3, $4, $5, $6) RETURNING {_COLUMNS}",
                    *values,
                )
                assert added is not None
                return _rule(added)
            await self._owned(conn, principal, rule_id)
            replaced = await conn.fetchrow(
                "UPDATE gate_rules SET owner = $1, requester = $2, project = $3, "
                "deliverable_types = $4, decision = $5, priority = $6 "
                f"WHERE id = $7 RETURNING {_COLUMNS}",
                *values,
                rule_id,
            )
            assert replaced is not None  # locked by `_owned` in this transaction
            return _rule(replaced)

    async def delete(self, principal: Principal, rule_id: int) -> GateRule:
        async with self.db.transaction() as conn:
            rule = await self._owned(conn, principal, rule_id)
            await conn.execute("DELETE FROM gate_rules WHERE id = $1", rule_id)
        return rule

    @staticmethod
    async def _owned(conn: Connection, principal: Principal, rule_id: int) -> GateRule:
        row = await conn.fetchrow(
            f"SELECT {_COLUMNS} FROM gate_rules WHERE id = $1 FOR UPDATE", rule_id
        )
        if row is None or not (principal.is_admin or principal.owner == row["owner"]):
            raise NotFound("gate rule", str(rule_id))
        if principal.kind is PrincipalKind.AGENT:
            raise Forbidden("agents cannot manage gate rules")
        return _rule(row)
