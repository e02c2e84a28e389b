"""Agent Cards: Baton's own, and one for every agent principal.

- Baton's card, at `/.well-known/agent-card.json`, names the way to every agent: its card is at
  `/a2a/agents/{owner}/{agent}/.well-known/agent-card.json`. Baton itself is an agent too, at
  `/a2a`, with one skill: delegate a task to the agent a data part names as `assignee`.
- An agent's card (`owner/agent`) declares its two bindings at the same URL,
  `/a2a/agents/{owner}/{agent}` (JSON-RPC: POST there; HTTP+JSON: `/message:send`, `/tasks/...`
  under it), Baton's bearer tokens as its security, streaming and push notifications, and one
  skill per deliverable type (every type: which ones an owner lets through is its gate's
  business, decided per hand-off).

Any well-formed `owner/agent` has a card, as `handOff` takes any well-formed assignee: a card
says nothing about whether the agent exists, so cards need no token (a client reads from it how
to authenticate). URLs are made from the request's own scheme and `Host`.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentProvider,
    AgentSkill,
    HTTPAuthSecurityScheme,
    SecurityRequirement,
    SecurityScheme,
    StringList,
)
from a2a.utils.constants import PROTOCOL_VERSION_CURRENT, TransportProtocol

from baton.a2a.mapping import DEFAULT_DELIVERABLE, JSON, TEXT
from baton.protocol.task_object import DeliverableType

PREFIX = "/a2a"
AGENTS = f"{PREFIX}/agents"
CARD_PATH = "/.well-known/agent-card.json"
SCHEME = "baton"  # the security scheme's name in every card

SKILL_WORDS: dict[DeliverableType, str] = {
    DeliverableType.code: "Write or change code.",
    DeliverableType.doc: "Write a document.",
    DeliverableType.answer: "Answer a question.",
    DeliverableType.screenshots: "Take screenshots.",
    DeliverableType.reviewed_pr: "Review a pull request.",
    DeliverableType.design: "Make a design.",
    DeliverableType.data: "Produce data.",
    DeliverableType.other: "Anything else.",
}
HOW = (
    "A message hands a task off: its text is the task; a data part (application/json) may "
    "carry the hand-off packet's fields (deliverableType, acceptanceCriteria, context, files, "
    "dependsOn), project, verification (AUTO, REVIEW, SIGN_OFF) and requester (with an "
    "owner's token); file parts by URL are its files. The receiving owner's permission gate "
    "decides: a held task is AUTH_REQUIRED until that owner approves it."
)


def _version() -> str:
    try:
        return version("baton")
    except PackageNotFoundError:  # run from a source tree that is not installed
        return "0"


VERSION = _version()


def base_url(origin: str, agent: str | None) -> str:
    return f"{origin}{AGENTS}/{agent}" if agent is not None else f"{origin}{PREFIX}"


def _card(
    origin: str, agent: str | None, name: str, description: str, skills: list[AgentSkill]
) -> AgentCard:
    base = base_url(origin, agent)
    bearer = HTTPAuthSecurityScheme(
        scheme="bearer", description="A Baton API token (`baton token create`)."
    )
    return AgentCard(
        name=name,
        description=description,
        supported_interfaces=[
            AgentInterface(
                url=base,
                protocol_binding=binding.value,
                protocol_version=PROTOCOL_VERSION_CURRENT,
            )
            for binding in (TransportProtocol.JSONRPC, TransportProtocol.HTTP_JSON)
        ],
        provider=AgentProvider(organization="Baton", url=origin),
        version=VERSION,
        capabilities=AgentCapabilities(
            streaming=True, push_notifications=True, extended_agent_card=False
        ),
        security_schemes={SCHEME: SecurityScheme(http_auth_security_scheme=bearer)},
        security_requirements=[SecurityRequirement(schemes={SCHEME: StringList()})],
        default_input_modes=[TEXT, JSON],
        default_output_modes=[TEXT, JSON],
        skills=skills,
    )


def agent_card(origin: str, agent: str) -> AgentCard:
    """The card of agent `owner/agent`."""
    skills = [
        AgentSkill(
            id=kind.value,
            name=kind.value,
            description=f"{SKILL_WORDS[kind]} Name it as the message's `metadata.skill`, or as "
            "`deliverableType` in a data part"
            + (" (the default)." if kind is DEFAULT_DELIVERABLE else "."),
            tags=[kind.value],
        )
        for kind in DeliverableType
    ]
    description = (
        f"The Baton agent {agent}, reached through Baton. {HOW} The task's status follows "
        "the hand-off; its result and evidence are its artifacts, checkpoints its status "
        "messages."
    )
    return _card(origin, agent, agent, description, skills)


def baton_card(origin: str) -> AgentCard:
    """Baton's own card: where each agent's card is, and delegation to a named agent."""
    template = f"{origin}{AGENTS}/{{owner}}/{{agent}}{CARD_PATH}"
    delegate = AgentSkill(
        id="delegate",
        name="delegate",
        description="Hand a task off to one of Baton's agents, named as `assignee` "
        f"(owner/agent) in a data part. {HOW}",
        tags=["delegate"],
    )
    description = (
        "Baton hands tasks off between agents through their owners' permission gates, with "
        f"checkpoints, verified results and an audit log. Every agent owner/agent has its own "
        f"card at {template}; messages sent here are delegated to the agent they name."
    )
    return _card(origin, None, "Baton", description, [delegate])
