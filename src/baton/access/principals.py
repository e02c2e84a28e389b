"""Who is calling, and what each kind of caller may see and do."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from baton.errors import InvalidInput
from baton.protocol.handoff import Actor
from baton.protocol.pipeline import RunActor
from baton.protocol.task_object import HANDLE_PATTERN, OWNER_PATTERN, check_not_reserved


class PrincipalKind(StrEnum):
    AGENT = "AGENT"
    OWNER = "OWNER"
    ADMIN = "ADMIN"


class Side(StrEnum):
    """Which of a task's two agents a role is about."""

    REQUESTER = "requester"
    ASSIGNEE = "assignee"


class Reach(StrEnum):
    ACTS_FOR = "acts_for"  # the agent itself, its owner, or admin
    OWNS = "owns"  # the agent's owner (not the agent), or admin


@dataclass(frozen=True)
class Role:
    """Who fills a protocol role: those `reach` gives of one `side`'s agent. With `not_the`,
    never that other side's agent itself, even when it is the same agent (a task an agent
    handed to itself): an agent does not verify its own work."""

    side: Side
    reach: Reach
    not_the: Side | None = None


# Who fills each protocol role, as data: `may_act_as` and the store's SQL guards both read it.
ROLES: dict[Actor, Role] = {
    Actor.GATE: Role(Side.ASSIGNEE, Reach.OWNS),
    Actor.ASSIGNEE: Role(Side.ASSIGNEE, Reach.ACTS_FOR),
    Actor.VERIFIER: Role(Side.REQUESTER, Reach.ACTS_FOR, not_the=Side.ASSIGNEE),
    Actor.REQUESTER: Role(Side.REQUESTER, Reach.ACTS_FOR),
    Actor.REQUESTER_OWNER: Role(Side.REQUESTER, Reach.OWNS),
}


def owner_of(agent: str) -> str:
    return agent.split("/", 1)[0]


@dataclass(frozen=True)
class Principal:
    kind: PrincipalKind
    handle: str  # `owner/agent`, `owner`, or `admin`

    @classmethod
    def parse(cls, text: str | None, *, admin: bool = False) -> Principal:
        if admin:
            return ADMIN
        if text is None:
            raise InvalidInput("principal", "give a principal or --admin")
        check_not_reserved(text.split("/", 1)[0], "principal")
        if HANDLE_PATTERN.fullmatch(text):
            return cls(PrincipalKind.AGENT, text)
        if OWNER_PATTERN.fullmatch(text):
            return cls(PrincipalKind.OWNER, text)
        raise InvalidInput("principal", "must be an agent owner/agent or an owner")

    @property
    def is_admin(self) -> bool:
        return self.kind is PrincipalKind.ADMIN

    @property
    def owner(self) -> str | None:
        """The owner this principal belongs to (None for admin)."""
        if self.kind is PrincipalKind.AGENT:
            return owner_of(self.handle)
        if self.kind is PrincipalKind.OWNER:
            return self.handle
        return None

    def acts_for(self, agent: str) -> bool:
        """The agent itself, its owner, or admin."""
        if self.kind is PrincipalKind.AGENT:
            return self.handle == agent
        if self.kind is PrincipalKind.OWNER:
            return owner_of(agent) == self.handle
        return True

    def owns(self, agent: str) -> bool:
        """The agent's owner (not the agent), or admin."""
        if self.kind is PrincipalKind.OWNER:
            return owner_of(agent) == self.handle
        return self.is_admin

    def may_act_as(self, actor: Actor, *, requester: str, assignee: str) -> bool:
        """Whether this principal fills the protocol role `actor` on a task."""
        role = ROLES[actor]
        agents = {Side.REQUESTER: requester, Side.ASSIGNEE: assignee}
        if role.not_the is not None and self.handle == agents[role.not_the]:
            return False
        agent = agents[role.side]
        return self.acts_for(agent) if role.reach is Reach.ACTS_FOR else self.owns(agent)

    def sees(self, *, requester: str, assignee: str) -> bool:
        return self.acts_for(requester) or self.acts_for(assignee)

    # --- runs: a run belongs to an owner ----------------------------------------------------

    def may_see_run(self, owner: str) -> bool:
        """The run's owner, its agents, and admin."""
        return self.is_admin or self.owner == owner

    def may_drive(self, actor: RunActor, *, owner: str) -> bool:
        """Whether this principal may make a run event of role `actor` on a run of `owner`."""
        if self.is_admin:
            return True
        if actor is RunActor.SYSTEM:
            return False
        if actor is RunActor.OWNER:
            return self.kind is PrincipalKind.OWNER and self.handle == owner
        return self.owner == owner


ADMIN = Principal(PrincipalKind.ADMIN, "admin")
# The server itself, for what it does on its own (a run's lease running out); never a token.
SYSTEM = Principal(PrincipalKind.ADMIN, "system")
