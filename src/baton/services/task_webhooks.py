"""Webhook endpoints scoped to one task: A2A's push notification configs, below the door.

A config is an endpoint (`baton.store.webhooks`) that takes one task's events only, until the
task's final one, named by a config id among its owner's configs on that task. Whoever may see
the task manages its owner's configs on it: an agent's configs are its owner's, shared with
the owner's other agents that see the task; admin sees and deletes every owner's and makes
none. Another owner's config answers as a missing one; a task the caller may not see answers
as a missing task, settled before a URL is looked up. URLs are held to the owners' endpoints'
policy (`webhook_addresses`), and delivered by the same worker, at least once, with the same
retries. The token and the authentication credentials are sealed as signing secrets are
(`webhook_secrets`), bound to the endpoint and to which of the two each is; they are opened
only for the endpoint's requests and never answered back.

Bounds: at most `MAX_TASK_ENDPOINTS` live configs per owner (a config stops being live when its
task's final event has been delivered, or when failures disable it) and
`MAX_ENDPOINTS_PER_TASK` per task and owner.
"""

from __future__ import annotations

import asyncio
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from baton.access.principals import Principal
from baton.errors import Forbidden, InvalidInput, NotFound
from baton.protocol.handoff import HANDOFF
from baton.services.webhook_secrets import SecretBox, new_secret
from baton.store import tasks as task_store
from baton.store import webhooks as store
from baton.store.db import Connection, Database
from baton.store.records import TaskRecord
from baton.store.webhooks import (
    MAX_ENDPOINTS_PER_TASK,
    MAX_TASK_ENDPOINTS,
    EndpointRecord,
    PayloadFormat,
)

# A task-scoped endpoint's own values. Each goes into a request header, so only printable
# ASCII (no line breaks: nothing can be added to the request) within a bound.
MAX_CONFIG_ID = 128
MAX_TOKEN = 1024
MAX_CREDENTIALS = 4096
_CONFIG_ID = re.compile(r"[A-Za-z0-9._:~-]+")
_SCHEME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}")  # an HTTP token (RFC 9110 5.6.2)
_HEADER_VALUE = re.compile(r"[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?")


@dataclass(frozen=True)
class Authentication:
    """What a task-scoped endpoint's requests carry as `Authorization: <scheme> <credentials>`
    (nothing without credentials)."""

    scheme: str
    credentials: str | None = None


def _config_id(config_id: str | None, task_id: str) -> str:
    """The id named, or the task's id when none is (a retried create without one then
    replaces the config it made rather than adding another)."""
    if not config_id:
        return task_id
    if len(config_id) > MAX_CONFIG_ID or not _CONFIG_ID.fullmatch(config_id):
        raise InvalidInput(
            "id", f"at most {MAX_CONFIG_ID} letters, digits and . _ : ~ - characters"
        )
    return config_id


def _header_value(field: str, value: str | None, bound: int) -> str | None:
    if not value:
        return None
    if len(value) > bound or not _HEADER_VALUE.fullmatch(value):
        raise InvalidInput(
            field,
            f"at most {bound} printable ASCII characters, not starting or ending with a space",
        )
    return value


def _authentication(given: Authentication | None) -> Authentication | None:
    if given is None or not (given.scheme or given.credentials):
        return None
    if not _SCHEME.fullmatch(given.scheme):
        raise InvalidInput(
            "authentication.scheme", "an HTTP authentication scheme (Bearer, Basic…)"
        )
    credentials = _header_value("authentication.credentials", given.credentials, MAX_CREDENTIALS)
    return Authentication(given.scheme, credentials)


def _bound(endpoint_id: str, what: str) -> str:
    # Sealed values are bound to the endpoint and to what each is, so they cannot trade places.
    return f"{endpoint_id}/{what}"


def opened(box: SecretBox, endpoint: EndpointRecord) -> tuple[str | None, str | None]:
    """A task-scoped endpoint's token and authentication credentials, opened: for its requests
    only (`SecretUnavailable` when the key that sealed one is not configured)."""
    token, credentials = endpoint.token, endpoint.auth_credentials
    return (
        None if token is None else box.open(token, _bound(endpoint.id, "token")),
        None if credentials is None else box.open(credentials, _bound(endpoint.id, "credentials")),
    )


# How long a delivery turn goes on trusting its last look at its endpoint before it looks again
# (`baton.webhooks.worker`: a look is a round trip, once per message it cost a tenth of one). A
# change to an endpoint that a turn holds answers only after as long, so that once it has
# answered nothing more is sent from the endpoint as it was, whichever process runs the turn
# (a message already on its way excepted). Endpoints change rarely; messages go all the time.
TURN_TRUSTS_SECONDS = 0.1


class TaskEndpoints:
    """The task-scoped operations of `WebhookService` (which supplies what is declared here:
    its database, its secret box, its wake-up, and its URL checks)."""

    db: Database
    box: SecretBox
    on_change: Callable[[], None]

    async def _changed(self, conn: Connection, ids: list[str]) -> bool:
        """Before the change to `ids` commits: whether a turn holds one of them (then
        `_settled` waits for it to look again)."""
        return await store.leased(conn, ids)

    async def _settled(self, held: bool) -> None:
        """After the change committed: this process's worker is told at once; a turn of
        another process's sees it within `TURN_TRUSTS_SECONDS`, which this waits out."""
        self.on_change()
        if held:
            await asyncio.sleep(TURN_TRUSTS_SECONDS)

    def _parsed(self, url: str) -> None:
        raise NotImplementedError

    async def _url(self, url: str) -> dict[str, Any]:
        raise NotImplementedError

    @staticmethod
    async def _task(conn: Connection, principal: Principal, task_id: str) -> TaskRecord:
        """The task, if `principal` may see it; one statement whether it is missing or hidden,
        so neither the answer nor its cost says which."""
        task = await task_store.load_visible(conn, principal, task_id)
        if task is None:
            raise NotFound("task", task_id)
        return task

    async def create_for_task(
        self,
        principal: Principal,
        task_id: str,
        *,
        config_id: str | None,
        url: str,
        token: str | None = None,
        authentication: Authentication | None = None,
        payload_format: PayloadFormat = PayloadFormat.A2A,
    ) -> EndpointRecord:
        """A config for a task the caller may see, its owner's: new, or, if its owner has one
        of this id on the task, that one with the URL, token and authentication given (and
        resumed, if it was disabled, unless the task has ended). It takes the task's events
        committed from now on, until the task's final one; made for a task that has ended,
        it sends nothing."""
        owner = principal.owner
        if owner is None:
            raise Forbidden(
                "a push notification config belongs to an owner: use an owner's or an agent's token"
            )
        name = _config_id(config_id, task_id)
        token = _header_value("token", token, MAX_TOKEN)
        auth = _authentication(authentication)
        self._parsed(url)
        async with self.db.connection() as conn:
            await self._task(conn, principal, task_id)  # before the URL is looked up
        checked = await self._url(url)
        async with self.db.transaction() as conn:
            await store.lock_owner(conn, owner)
            found = await store.task_endpoints(conn, task_id, owner, config_id=name, lock=True)
            # The cursor is taken before the task is read: an event the read does not see
            # (the task's end, say) commits after it, so it is past the cursor and is sent.
            cursor = await store.readable_through(conn, "task")
            task = await self._task(conn, principal, task_id)
            ended = HANDOFF.is_terminal(task.state)
            live, on_task = await store.task_endpoint_counts(conn, owner, task_id)
            current = found[0] if found else None
            resumes = not ended and (current is None or not current.enabled)
            if resumes and live >= MAX_TASK_ENDPOINTS:
                raise InvalidInput(
                    "taskId",
                    f"an owner has at most {MAX_TASK_ENDPOINTS} push notification configs "
                    "on tasks that have not ended; delete one first",
                )
            if current is None and on_task >= MAX_ENDPOINTS_PER_TASK:
                raise InvalidInput(
                    "taskId",
                    f"an owner has at most {MAX_ENDPOINTS_PER_TASK} push notification "
                    "configs per task",
                )
            if current is None:
                id = "wh_" + secrets.token_hex(10)
                created = await store.insert_task_endpoint(
                    conn,
                    id=id,
                    owner=owner,
                    task_id=task_id,
                    config_id=name,
                    url=url,
                    secret=self.box.seal(new_secret(), id),
                    token=self._seal(token, id, "token"),
                    auth_scheme=auth.scheme if auth else None,
                    auth_credentials=self._seal(
                        auth.credentials if auth else None, id, "credentials"
                    ),
                    payload_format=payload_format,
                    allow_private=checked["allow_private"],
                    task_cursor=cursor,
                    run_cursor=await store.readable_through(conn, "run"),
                    ended=ended,
                )
            else:
                changes: dict[str, Any] = {
                    **checked,
                    "token": self._seal(token, current.id, "token"),
                    "auth_scheme": auth.scheme if auth else None,
                    "auth_credentials": self._seal(
                        auth.credentials if auth else None, current.id, "credentials"
                    ),
                    "payload_format": payload_format.value,
                }
                if resumes:
                    changes.update(
                        enabled=True,
                        disabled_reason=None,
                        disabled_at=None,
                        failures=0,
                        next_attempt_at=None,
                    )
                created = await store.update_endpoint(conn, current.id, changes)
            held = current is not None and await self._changed(conn, [current.id])
        await self._settled(held)
        return created

    def _seal(self, value: str | None, id: str, what: str) -> str | None:
        return None if value is None else self.box.seal(value, _bound(id, what))

    async def for_task(self, principal: Principal, task_id: str, config_id: str) -> EndpointRecord:
        """The caller's owner's config `config_id` on a task the caller may see (admin: any
        owner's, the first by id)."""
        async with self.db.connection() as conn:
            await self._task(conn, principal, task_id)
            found = await store.task_endpoints(
                conn, task_id, principal.owner, config_id=config_id, first=1
            )
        if not found:
            raise NotFound("push notification config", config_id)
        return found[0]

    async def list_for_task(
        self, principal: Principal, task_id: str, first: int, after: str | None
    ) -> tuple[list[EndpointRecord], str | None]:
        """A page of the caller's owner's configs on a task the caller may see (admin: every
        owner's), by id; and the cursor of the next page, if one may follow."""
        first = min(max(first, 1), MAX_ENDPOINTS_PER_TASK)
        async with self.db.connection() as conn:
            await self._task(conn, principal, task_id)
            found = await store.task_endpoints(
                conn, task_id, principal.owner, first=first + 1, after=after
            )
        more = len(found) > first
        return found[:first], found[first - 1].id if more else None

    async def delete_for_task(self, principal: Principal, task_id: str, config_id: str) -> int:
        """Delete the caller's owner's config `config_id` on a task the caller may see (admin:
        every owner's of that id); deleting one that is not there is no error. Nothing more
        is sent to it once this has answered. How many were deleted."""
        async with self.db.transaction() as conn:
            await self._task(conn, principal, task_id)
            found = await store.task_endpoints(
                conn, task_id, principal.owner, config_id=config_id, lock=True
            )
            held = bool(found) and await self._changed(conn, [e.id for e in found])
            for endpoint in found:
                await store.delete_endpoint(conn, endpoint.id)
        if found:
            await self._settled(held)
        return len(found)
