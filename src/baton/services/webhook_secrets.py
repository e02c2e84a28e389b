"""Webhook endpoints' signing secrets: how one is made, and how it is kept in the database.

A secret is `whsec_` and 32 random bytes in base64 (Standard Webhooks' form; the delivery door
signs with it, `baton.webhooks.signing`).

Sealing: with `BATON_WEBHOOK_SECRET_KEY` set, a secret is stored as `v1:` and the base64 of a
random nonce and its AES-256-GCM ciphertext, the endpoint's id bound in as associated data (a
sealed secret copied to another row does not open). Without the key it is stored as `plain:`
and the secret itself: a database dump then gives the secrets away, and the README says so.
Both forms open as long as the key that sealed them is configured.
"""

from __future__ import annotations

import base64
import hashlib
import os
import secrets

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

PREFIX = "whsec_"
SECRET_BYTES = 32
_PLAIN = "plain:"
_SEALED = "v1:"
_NONCE = 12


class SecretUnavailable(Exception):
    """A stored secret that cannot be opened with the key configured now."""


def new_secret() -> str:
    return PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


class SecretBox:
    """Seals secrets for storage and opens them again (see the module docstring)."""

    def __init__(self, key: str | None) -> None:
        # Any 32+ character setting becomes a 256-bit key by SHA-256 (it is checked for length
        # at start; a random value from `openssl rand -base64 32` is what the README suggests).
        self._aead = AESGCM(hashlib.sha256(key.encode()).digest()) if key else None

    @property
    def encrypts(self) -> bool:
        return self._aead is not None

    def seal(self, secret: str, endpoint_id: str) -> str:
        if self._aead is None:
            return _PLAIN + secret
        nonce = os.urandom(_NONCE)
        sealed = self._aead.encrypt(nonce, secret.encode(), endpoint_id.encode())
        return _SEALED + base64.b64encode(nonce + sealed).decode()

    def open(self, stored: str, endpoint_id: str) -> str:
        if stored.startswith(_PLAIN):
            return stored.removeprefix(_PLAIN)
        if not stored.startswith(_SEALED):
            raise SecretUnavailable("the stored secret has an unknown form")
        if self._aead is None:
            raise SecretUnavailable(
                "the signing secret is encrypted and BATON_WEBHOOK_SECRET_KEY is not set"
            )
        raw = base64.b64decode(stored.removeprefix(_SEALED))
        try:
            return self._aead.decrypt(raw[:_NONCE], raw[_NONCE:], endpoint_id.encode()).decode()
        except InvalidTag:
            raise SecretUnavailable(
                "the signing secret does not open with BATON_WEBHOOK_SECRET_KEY (another key "
                "sealed it)"
            ) from None
