"""Test helpers for pipeline runs: an owner of one's own, runs driven to any status."""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from typing import Any

from baton.access.principals import Principal
from baton.protocol.pipeline import RunCheckpoint, RunEvent, RunStatus
from baton.services.runs import RunService
from baton.store.records import RunRecord
from tests.helpers import agent, owner

# Arguments that fit each event's parameters.
ARGS: dict[RunEvent, dict[str, Any]] = {
    RunEvent.CHECKPOINT_REACHED: {"checkpoint": RunCheckpoint.plans_complete},
    RunEvent.PLAN_NEEDS_INPUT: {"questions": ["Which database?"]},
    RunEvent.USER_ANSWERED: {"answers": ["PostgreSQL"]},
    RunEvent.PR_OPENED: {"url": "https://example.com/acme/web/pull/7"},
    RunEvent.FAILED: {"reason": "tests kept failing"},
}


@dataclass
class Runs:
    """An owner unique to one test, its daemon agent, and an outsider."""

    service: RunService
    tag: str = field(default_factory=lambda: secrets.token_hex(4))

    def __post_init__(self) -> None:
        self.owner = owner(f"o{self.tag}")
        self.daemon = agent(f"o{self.tag}/daemon")
        self.outsider = owner(f"x{self.tag}")
        self.project = f"p{self.tag}"

    async def new(self, project: str | None = None) -> RunRecord:
        outcome = await self.service.create(
            self.owner, project=project or self.project, title="Fix the login page"
        )
        return outcome.run

    async def event(
        self, run: RunRecord, name: RunEvent, by: Principal | None = None, **args: Any
    ) -> RunRecord:
        outcome = await self.service.event(
            by or self._actor(name), name, run.id, args=args or ARGS.get(name, {})
        )
        return outcome.run

    def _actor(self, name: RunEvent) -> Principal:
        from baton.access.principals import SYSTEM
        from baton.protocol.pipeline import PIPELINE, RunActor

        actor = PIPELINE.named(name)[0].actor
        return {RunActor.RUNNER: self.daemon, RunActor.OWNER: self.owner}.get(actor, SYSTEM)

    async def run_in(self, status: RunStatus) -> RunRecord:
        """A fresh run driven through the protocol into `status` (at the planning phase when
        in progress, so every event out of `in_progress` is possible but the PR's)."""
        E, S = RunEvent, RunStatus
        run = await self.new()
        if status is S.backlog:
            return run
        if status is S.interrupted:
            return await self.event(run, E.USER_INTERRUPTED)
        run = await self.event(run, E.CLAIM)
        if status is S.in_progress:
            return run
        if status is S.awaiting_user:
            return await self.event(run, E.PLAN_NEEDS_INPUT)
        if status is S.waiting_for_agent:
            return await self.event(run, E.HOST_OFFLINE)
        if status is S.errored:
            return await self.event(run, E.FAILED)
        run = await self.event(run, E.CHECKPOINT_REACHED, checkpoint=RunCheckpoint.summary_complete)
        run = await self.event(run, E.PR_OPENED)
        if status is S.in_review:
            return run
        run = await self.event(run, E.PR_MERGED)
        assert run.status is status, (run.status, status)
        return run
