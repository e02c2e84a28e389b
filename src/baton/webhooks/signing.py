"""Standard Webhooks signing of each message.

The signature of a message is
`v1,<base64 HMAC-SHA256(secret, "<webhook-id>.<webhook-timestamp>.<body>")>`, and
`webhook-signature` lists one such value per secret in force, space-separated (the new one and,
during a rotation's grace period, the old one). Signing is these few lines of the standard
library; the tests verify every delivery with the `standardwebhooks` reference library, an
independent implementation. Secrets, and how they are made and stored, are the endpoint's
(`baton.services.webhook_secrets`).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
from collections.abc import Sequence

from baton.services.webhook_secrets import PREFIX


@functools.lru_cache(maxsize=1024)  # an endpoint's messages are signed with the same few
def _key_bytes(secret: str) -> bytes:
    return base64.b64decode(secret.removeprefix(PREFIX))


def signature(secret: str, message_id: str, timestamp: int, body: bytes) -> str:
    mac = hmac.new(_key_bytes(secret), f"{message_id}.{timestamp}.".encode(), hashlib.sha256)
    mac.update(body)  # not joined to the rest first: a body may be large
    return "v1," + base64.b64encode(mac.digest()).decode()


def headers(
    secrets_in_force: Sequence[str], message_id: str, timestamp: int, body: bytes
) -> dict[str, str]:
    """The Standard Webhooks headers of one attempt: one signature per secret in force."""
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": " ".join(
            signature(s, message_id, timestamp, body) for s in secrets_in_force
        ),
    }
