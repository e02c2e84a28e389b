"""What every door says about each move and event: a GraphQL mutation's description and the
MCP tool's are the same text, made here from the tables and the rules beside them.
"""

from __future__ import annotations

from baton.protocol.handoff import AFTER_VERIFYING, HANDOFF, MoveName, TaskState, check_move
from baton.protocol.logic import Keep
from baton.protocol.pipeline import PIPELINE, RunEvent
from baton.store.runs import FENCED

# What `leaseId` means, on runHeartbeat and every runner event on a claimed run.
LEASE_ID = (
    "The lease your claim took (`claimRun` → `lease { id }`). Optional: without it, the lease's "
    "holder principal alone is checked, which cannot tell apart two daemons sharing one "
    "principal (after one's lease ran out and the other claimed the run, the first one's late "
    "call would pass). With it, the call succeeds only while that very lease is live; "
    "otherwise LeaseLostError. Daemons should always send it."
)


def describe_move(name: MoveName) -> str:
    """A handoff move: the states it leaves and reaches, who makes it, what follows it."""
    pairs = ", ".join(f"{m.source.value} → {m.target.value}" for m in HANDOFF.named(name))
    actor = HANDOFF.named(name)[0].actor.value.replace("_", " ")
    text = f"{pairs} (who: {actor})."
    if name is MoveName.SUBMIT_RESULT:
        for mode, follow in AFTER_VERIFYING.items():
            if follow is None:
                text += f" {mode.value}: rests in verifying for the requester."
            else:
                then = check_move(TaskState.verifying, None, follow).target.value
                text += f" {mode.value}: then verifying → {then} in the same call."
    return text


def describe_event(name: RunEvent) -> str:
    """A pipeline event: where it goes from, what it sets, who makes it, and the lease rules."""
    rows = PIPELINE.named(name)
    move = rows[0]
    sources = ", ".join(m.source.value for m in rows)
    effects = [
        f"{axis} := {effect.prose()}"
        for axis, effect in move.effects
        if not isinstance(effect, Keep)
    ]
    text = f"{name.value}: {sources} → {move.target.value} (who: {move.actor.value})"
    if effects:
        text += "; " + ", ".join(effects).replace("`", "")
    if name is RunEvent.CLAIM:
        text += (
            ". Without `id`, claims the oldest claimable run (backlog or waiting_for_agent) of "
            "the caller's owner, of `project` when given, never the same run to two callers; "
            "NotFoundError when there is none. A claim holds a lease (`lease { id expiresAt }` "
            "in the answer) that `runHeartbeat` extends; while it is live only its holder "
            "makes the runner's events on the run; when it runs out it is lost, and the run "
            "moves to waiting_for_agent (HOST_OFFLINE, actor `system`)"
        )
    if name in FENCED:
        text += (
            ". On a claimed run only the holder of its live lease may make it (admin too, "
            "unless it names a lease); anyone else, or a holder whose lease ran out or is not "
            "`leaseId`, gets LeaseLostError"
        )
    return text + "."
