"""Owners' webhook endpoints: who may manage them, input checks, secrets, pings, redeliveries.

An owner manages its own endpoints; admin manages everyone's (naming the owner when it creates
one); agents manage none. An endpoint another owner holds is `NotFound`, as a task one may not
see is, and answers exactly as a missing one: who may act on an endpoint is settled before
anything else is done with the request (a URL is looked up only for the endpoint's owner or
admin, so its look-up tells nothing to anyone else). Deliveries are made by
`baton.webhooks.worker`; this service only asks for them, at most `MAX_PENDING_MANUAL` pings
and redeliveries waiting per endpoint.

Endpoints scoped to one task (A2A's push notification configs) are managed apart, by whoever
may see the task (`task_webhooks`, whose operations this service has too); the operations
here never see them: one answers as a missing endpoint.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from baton.access.principals import Principal, PrincipalKind
from baton.errors import Forbidden, InvalidInput, NotFound
from baton.live.filters import EventFilter, RunEventFilter
from baton.protocol import task_object
from baton.services.task_webhooks import TaskEndpoints
from baton.services.webhook_addresses import Policy, Refused, check, parse
from baton.services.webhook_secrets import SecretBox, new_secret
from baton.store import webhooks as store
from baton.store.db import Connection, Database
from baton.store.webhooks import (
    MAX_PENDING_MANUAL,
    DeliveryKind,
    DeliveryRecord,
    DeliveryStatus,
    EndpointRecord,
)

MAX_DESCRIPTION = 500
MAX_GRACE_SECONDS = 7 * 86400
DEFAULT_GRACE_SECONDS = 86400
_UNCHANGED: Any = object()


@dataclass(frozen=True)
class WithSecret:
    """An endpoint and its new signing secret, shown this once."""

    endpoint: EndpointRecord
    secret: str


def _check_filters(
    task_filter: Mapping[str, Any] | None, run_filter: Mapping[str, Any] | None
) -> None:
    if task_filter is None and run_filter is None:
        raise InvalidInput(
            "taskEvents", "give taskEvents, runEvents or both (a filter, {} for all)"
        )
    # The same conversion the worker makes: bounds (values per list) are checked here.
    if task_filter is not None:
        EventFilter.from_stored(task_filter)
    if run_filter is not None:
        RunEventFilter.from_stored(run_filter)


class WebhookService(TaskEndpoints):
    def __init__(
        self,
        db: Database,
        box: SecretBox,
        policy: Policy,
        on_change: Callable[[], None] | None = None,
    ) -> None:
        self.db = db
        self.box = box
        self.policy = policy
        self.on_change = on_change or (lambda: None)

    # --- who ------------------------------------------------------------------------------------

    @staticmethod
    def _manager(principal: Principal) -> None:
        if principal.kind is PrincipalKind.AGENT:
            raise Forbidden("agents cannot manage webhook endpoints; their owner can")

    def _owner_for(self, principal: Principal, owner: str | None) -> str:
        """Whose endpoint `principal` creates: its own as an owner; the named owner's as admin."""
        self._manager(principal)
        if principal.is_admin:
            if owner is None:
                raise InvalidInput("owner", "admin must name the owner whose endpoint this is")
            task_object.check_owner(owner, "owner")
            return owner
        if owner is not None and owner != principal.handle:
            raise Forbidden("an owner manages only its own webhook endpoints")
        return principal.handle

    async def _held(
        self, conn: Connection, principal: Principal, id: str, *, lock: bool = False
    ) -> EndpointRecord:
        self._manager(principal)
        found = await store.endpoint(conn, id, lock=lock)
        if (
            found is None
            or found.scoped  # a task's push notification config: see `task_webhooks`
            or not (principal.is_admin or principal.owner == found.owner)
        ):
            raise NotFound("webhook endpoint", id)
        return found

    # --- checks ---------------------------------------------------------------------------------

    def _parsed(self, url: str) -> None:
        """The URL's form alone (no look-up)."""
        try:
            parse(url, self.policy)
        except Refused as exc:
            raise InvalidInput("url", str(exc)) from None

    async def _url(self, url: str) -> dict[str, Any]:
        """The columns a URL sets, once it is checked (looked up): the URL, and whether it
        needed BATON_WEBHOOK_ALLOW_PRIVATE (kept with the endpoint: see `baton.store.webhooks`).
        Only ever called for a caller who may manage the endpoint."""
        try:
            checked = await check(url, self.policy)
        except Refused as exc:
            raise InvalidInput("url", str(exc)) from None
        return {"url": url, "allow_private": checked.private}

    async def _room_for_manual(self, conn: Connection, id: str) -> None:
        """A ping or redelivery may wait only if fewer than `MAX_PENDING_MANUAL` do (the
        caller holds the endpoint's row lock, so the count holds)."""
        if await store.pending_manual_count(conn, id) >= MAX_PENDING_MANUAL:
            raise InvalidInput(
                "id",
                f"at most {MAX_PENDING_MANUAL} pings and redeliveries wait per endpoint; "
                "wait for them to be sent (see its deliveries)",
            )

    @staticmethod
    def _description(text: str) -> str:
        if len(text) > MAX_DESCRIPTION:
            raise InvalidInput("description", f"at most {MAX_DESCRIPTION} characters")
        return text

    # --- endpoints ------------------------------------------------------------------------------

    async def create(
        self,
        principal: Principal,
        *,
        owner: str | None,
        url: str,
        description: str,
        task_filter: dict[str, Any] | None,
        run_filter: dict[str, Any] | None,
    ) -> WithSecret:
        """A new endpoint, enabled, taking events committed from now on."""
        who = self._owner_for(principal, owner)
        self._description(description)
        _check_filters(task_filter, run_filter)
        checked = await self._url(url)
        id = "wh_" + secrets.token_hex(10)
        secret = new_secret()
        async with self.db.transaction() as conn:
            created = await store.insert_endpoint(
                conn,
                id=id,
                owner=who,
                url=url,
                description=description,
                task_filter=task_filter,
                run_filter=run_filter,
                secret=self.box.seal(secret, id),
                allow_private=checked["allow_private"],
            )
        if created is None:
            raise InvalidInput("owner", f"an owner has at most {store.MAX_ENDPOINTS} endpoints")
        self.on_change()
        return WithSecret(created, secret)

    async def update(
        self,
        principal: Principal,
        id: str,
        *,
        url: str | None = None,
        description: str | None = None,
        task_filter: dict[str, Any] | None = _UNCHANGED,
        run_filter: dict[str, Any] | None = _UNCHANGED,
        enabled: bool | None = None,
    ) -> EndpointRecord:
        """Change what is given; `enabled: true` on a disabled endpoint resumes it where it
        stopped (the event that failed is tried again at once). A turn of the delivery worker
        sends nothing more from the endpoint as it was once this has answered (see
        `TURN_TRUSTS_SECONDS`)."""
        changes: dict[str, Any] = {}
        if url is not None:
            self._parsed(url)
            async with self.db.connection() as conn:
                await self._held(conn, principal, id)  # before the URL is looked up
            changes.update(await self._url(url))
        if description is not None:
            changes["description"] = self._description(description)
        if task_filter is not _UNCHANGED:
            changes["task_filter"] = task_filter
        if run_filter is not _UNCHANGED:
            changes["run_filter"] = run_filter
        async with self.db.transaction() as conn:
            current = await self._held(conn, principal, id, lock=True)
            if "task_filter" in changes or "run_filter" in changes:
                _check_filters(
                    changes.get("task_filter", current.task_filter),
                    changes.get("run_filter", current.run_filter),
                )
            updated = await store.update_endpoint(conn, id, changes)
            if enabled is not None and enabled != updated.enabled:
                updated = await store.set_enabled(conn, id, enabled)
            held = await self._changed(conn, [id])
        await self._settled(held)
        return updated

    async def delete(self, principal: Principal, id: str) -> EndpointRecord:
        async with self.db.transaction() as conn:
            found = await self._held(conn, principal, id, lock=True)
            held = await self._changed(conn, [id])
            await store.delete_endpoint(conn, id)
        await self._settled(held)
        return found

    async def rotate(self, principal: Principal, id: str, grace_seconds: int) -> WithSecret:
        """A new secret signs from now on; the one it replaces signs too, beside it, for
        `grace_seconds` (a secret replaced earlier stops at once)."""
        if not 0 <= grace_seconds <= MAX_GRACE_SECONDS:
            raise InvalidInput("graceSeconds", f"must be between 0 and {MAX_GRACE_SECONDS}")
        secret = new_secret()
        async with self.db.transaction() as conn:
            current = await self._held(conn, principal, id, lock=True)
            until = datetime.now(UTC) + timedelta(seconds=grace_seconds)
            updated = await store.update_endpoint(
                conn,
                id,
                {
                    "secret": self.box.seal(secret, id),
                    "previous_secret": current.secret if grace_seconds > 0 else None,
                    "previous_secret_until": until if grace_seconds > 0 else None,
                },
            )
            held = await self._changed(conn, [id])
        await self._settled(held)
        return WithSecret(updated, secret)

    async def get(self, principal: Principal, id: str) -> EndpointRecord | None:
        """The endpoint if the caller may manage it, else None (an agent manages none)."""
        if principal.kind is PrincipalKind.AGENT:
            return None
        async with self.db.connection() as conn:
            try:
                return await self._held(conn, principal, id)
            except NotFound:
                return None

    async def endpoints(
        self, principal: Principal, owner: str | None, first: int, after: str | None
    ) -> list[EndpointRecord]:
        self._manager(principal)
        if not principal.is_admin:
            if owner is not None and owner != principal.handle:
                raise Forbidden("an owner sees only its own webhook endpoints")
            owner = principal.handle
        return await store.endpoints(self.db, owner, first, after)

    # --- deliveries -----------------------------------------------------------------------------

    async def ping(self, principal: Principal, id: str) -> DeliveryRecord:
        """Ask for one `ping` message to the endpoint, enabled or not: at once, or when the
        endpoint's backoff ends if it is failing."""
        async with self.db.transaction() as conn:
            await self._held(conn, principal, id, lock=True)
            await self._room_for_manual(conn, id)
            ping = await store.add_manual(
                conn, id, DeliveryKind.PING, f"msg_{id}_ping_{secrets.token_hex(8)}"
            )
        self.on_change()
        return ping

    async def redeliver(self, principal: Principal, delivery_id: int) -> DeliveryRecord:
        """Ask for one more attempt at an event delivery (same `webhook-id`), or at a ping."""
        self._manager(principal)  # an agent learns nothing of which deliveries exist
        found = await store.delivery(self.db, delivery_id)
        if found is None:
            raise NotFound("webhook delivery", str(delivery_id))
        async with self.db.transaction() as conn:
            try:
                await self._held(conn, principal, found.endpoint_id, lock=True)
            except NotFound:
                raise NotFound("webhook delivery", str(delivery_id)) from None
            await self._room_for_manual(conn, found.endpoint_id)
            if found.kind is DeliveryKind.PING:
                again = await store.add_manual(
                    conn,
                    found.endpoint_id,
                    DeliveryKind.PING,
                    f"msg_{found.endpoint_id}_ping_{secrets.token_hex(8)}",
                )
            else:
                again = await store.add_manual(
                    conn,
                    found.endpoint_id,
                    DeliveryKind.REDELIVERY,
                    found.message_id,
                    found.log,
                    found.event_id,
                )
        self.on_change()
        return again

    async def deliveries(
        self,
        endpoint_ids: list[str],
        first: int,
        before: int | None,
        status: DeliveryStatus | None,
    ) -> dict[str, list[DeliveryRecord]]:
        """Deliveries of endpoints the caller was already shown (the API reads them through
        an endpoint it resolved for that caller)."""
        return await store.deliveries(self.db, endpoint_ids, first, before, status)
