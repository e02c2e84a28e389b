"""A change made where this process cannot hear of it (another process, or the database itself)
holds from the first message `RECHECK_SECONDS` after it: the running turn looks at its endpoint
again once it has trusted its last look that long."""

from __future__ import annotations

import asyncio

from baton.webhooks.worker import RECHECK_SECONDS
from tests.conftest import LiveServer
from tests.helpers import World
from tests.webhooks.conftest import Receiver
from tests.webhooks.test_changes import queued
from tests.webhooks.test_delivery import verified


async def test_a_change_the_process_did_not_hear_of_holds_from_the_next_check(
    webhook_server: LiveServer, world: World, receiver: Receiver
) -> None:
    _, made, ids = await queued(webhook_server, world, receiver, "/unheard")
    # What another process's API writes, without a word to this process's worker.
    await webhook_server.db.execute(
        "UPDATE webhook_endpoints SET url = $2, updated_at = now() WHERE id = $1",
        made["endpoint"]["id"],
        receiver.at("/moved"),
    )
    await asyncio.sleep(RECHECK_SECONDS * 2)
    receiver.holds["/unheard"].set()  # the message on its way is answered at the old URL
    messages = await receiver.wait_for("/moved", 3)
    got = [int(verified(made["secret"], m)["data"]["taskEvents"]["id"]) for m in messages]
    assert got == ids[1:]
    assert len(receiver.got["/unheard"]) == 1
