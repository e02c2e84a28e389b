"""The A2A door, loaded when it is first asked for.

The A2A SDK's server modules cannot be imported one by one: the packages
`a2a.server.request_handlers` and `a2a.server.events` import the SDK's own request handler, task
stores (their SQLAlchemy models), event queues and 0.3 compatibility layer with them. Imported
with the app, they cost every `baton serve` about 250 modules and 0.4 s of CPU before its first
answer, A2A or not (1.1 s of wall time on a busy 2-core machine). The app holds the door as a
`DeferredDoor` instead: the first request under `/a2a` (or for Baton's card) loads it in a
worker thread, so the event loop keeps serving meanwhile (that request waits for it, 0.7 s
there), and later ones go straight to it. A2A push notifications are rendered by `render`,
which loads `baton.a2a.push` the same way on the first A2A delivery.
"""

from __future__ import annotations

import asyncio
import importlib
import threading
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import TYPE_CHECKING

from starlette.types import Receive, Scope, Send

from baton.access.grants import TokenCache
from baton.services.context import Context
from baton.services.task_contexts import TaskContexts
from baton.settings import Settings
from baton.store.records import EventRecord
from baton.store.webhooks import EndpointRecord

if TYPE_CHECKING:
    from baton.a2a.handler import ContextFactory
    from baton.a2a.http import A2ADoor

# The header a push notification carries its config's token in (`baton.a2a.push.TOKEN_HEADER`;
# a test holds the two equal).
TOKEN_HEADER = "X-A2A-Notification-Token"

_loaded: dict[str, ModuleType] = {}  # what a worker thread imported whole
_importing = threading.Lock()  # one import at a time: two threads importing could deadlock


def _import(name: str) -> ModuleType:
    with _importing:
        return importlib.import_module(name)


async def _load(name: str) -> ModuleType:
    """Module `name`, imported in a worker thread the first time."""
    module = _loaded.get(name)
    if module is None:
        module = _loaded[name] = await asyncio.to_thread(_import, name)
    return module


class DeferredDoor:
    """`A2ADoor.from_settings(...)`, built on its first request."""

    def __init__(
        self,
        settings: Settings,
        tokens: TokenCache,
        context: ContextFactory,
        contexts: Callable[[], TaskContexts],
    ) -> None:
        self._args = (settings, tokens, context, contexts)
        self._door: A2ADoor | None = None
        self._stopping = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        door = self._door
        if door is None:
            module = await _load("baton.a2a.http")
            door = self._door
            if door is None:
                door = self._door = module.A2ADoor.from_settings(*self._args)
                if self._stopping:
                    door.stop_soon()
        await door(scope, receive, send)

    def stop_soon(self) -> None:
        """The server is stopping (`A2ADoor.stop_soon`); a door not built yet has no streams."""
        self._stopping = True
        if self._door is not None:
            self._door.stop_soon()


async def render(
    context: Context, endpoint: EndpointRecord, events: Sequence[EventRecord]
) -> list[list[bytes]]:
    """`baton.a2a.push.render`, loaded on the first A2A push notification."""
    push = await _load("baton.a2a.push")
    rendered: list[list[bytes]] = await push.render(context, endpoint, events)
    return rendered
