"""The owner's permission gate: rules that decide what happens to a handoff on arrival."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from fnmatch import fnmatchcase

from baton.access.principals import owner_of
from baton.errors import InvalidInput
from baton.protocol.handoff import MoveName
from baton.protocol.task_object import DeliverableType


class GateDecision(StrEnum):
    ALLOW = "ALLOW"
    ASK = "ASK"
    DENY = "DENY"
    EXTERNAL = "EXTERNAL"


# The move each decision makes at hand-off; EXTERNAL leaves the task in `requested` for the
# owner's own integration to route, hold or reject.
DECISION_MOVES: dict[GateDecision, MoveName | None] = {
    GateDecision.ALLOW: MoveName.ROUTE,
    GateDecision.ASK: MoveName.HOLD,
    GateDecision.DENY: MoveName.REJECT,
    GateDecision.EXTERNAL: None,
}

_NAME_GLOB = r"[a-z0-9*](?:[a-z0-9*-]){0,38}"
REQUESTER_GLOB = re.compile(rf"{_NAME_GLOB}/{_NAME_GLOB}|\*")
PROJECT_GLOB = re.compile(_NAME_GLOB)


@dataclass(frozen=True)
class GateRule:
    id: int
    owner: str
    requester: str  # glob over `owner/agent`
    project: str  # glob over the project name
    deliverable_types: tuple[DeliverableType, ...]  # empty: any
    decision: GateDecision
    priority: int

    def matches(self, *, requester: str, project: str, deliverable_type: DeliverableType) -> bool:
        return (
            fnmatchcase(requester, self.requester)
            and fnmatchcase(project, self.project)
            and (not self.deliverable_types or deliverable_type in self.deliverable_types)
        )


def check_rule_globs(requester: str, project: str) -> None:
    if not REQUESTER_GLOB.fullmatch(requester):
        raise InvalidInput("requester", "must be a glob like */*, bob/* or bob/reviewer")
    if not PROJECT_GLOB.fullmatch(project):
        raise InvalidInput("project", "must be a glob like *, web-* or site")


def decide(
    rules: Iterable[GateRule],
    *,
    requester: str,
    assignee: str,
    project: str,
    deliverable_type: DeliverableType,
) -> GateDecision:
    """The first matching rule, highest priority first (oldest first on a tie), decides.

    With no match, a handoff between agents of one owner is allowed and any other is held
    for the owner's approval.
    """
    ordered = sorted(rules, key=lambda r: (-r.priority, r.id))
    for rule in ordered:
        if rule.matches(requester=requester, project=project, deliverable_type=deliverable_type):
            return rule.decision
    if owner_of(requester) == owner_of(assignee):
        return GateDecision.ALLOW
    return GateDecision.ASK
