"""Signing, sealing, URL checks and the retry schedule, without a server."""

from __future__ import annotations

import random
from datetime import UTC, datetime

import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from baton.services import webhook_addresses as addresses
from baton.services import webhook_secrets
from baton.webhooks import attempt, schedule, signing


def test_signatures_verify_with_the_reference_library() -> None:
    secret = webhook_secrets.new_secret()
    body = b'{"type":"ping","data":{}}'
    now = int(datetime.now(UTC).timestamp())
    headers = signing.headers([secret], "msg_1", now, body)
    assert Webhook(secret).verify(body, headers) == {"type": "ping", "data": {}}
    with pytest.raises(WebhookVerificationError):
        Webhook(webhook_secrets.new_secret()).verify(body, headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(body + b" ", headers)


def test_two_secrets_sign_during_a_rotation() -> None:
    old, new = webhook_secrets.new_secret(), webhook_secrets.new_secret()
    body = b"{}"
    headers = signing.headers([new, old], "msg_2", int(datetime.now(UTC).timestamp()), body)
    assert len(headers["webhook-signature"].split(" ")) == 2
    Webhook(old).verify(body, headers)
    Webhook(new).verify(body, headers)


def test_sealed_secrets_open_only_with_their_key_and_row() -> None:
    box = webhook_secrets.SecretBox("k" * 32)
    secret = webhook_secrets.new_secret()
    sealed = box.seal(secret, "wh_1")
    assert secret not in sealed and sealed.startswith("v1:")
    assert box.open(sealed, "wh_1") == secret
    with pytest.raises(webhook_secrets.SecretUnavailable):
        box.open(sealed, "wh_2")  # the endpoint id is bound in
    with pytest.raises(webhook_secrets.SecretUnavailable):
        webhook_secrets.SecretBox("j" * 32).open(sealed, "wh_1")
    with pytest.raises(webhook_secrets.SecretUnavailable, match="BATON_WEBHOOK_SECRET_KEY"):
        webhook_secrets.SecretBox(None).open(sealed, "wh_1")
    plain = webhook_secrets.SecretBox(None).seal(secret, "wh_1")
    assert plain == "plain:" + secret
    assert box.open(plain, "wh_1") == secret  # stored before a key was set: still opens


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "10.0.0.1",
        "172.16.5.4",
        "192.168.1.1",
        "169.254.169.254",
        "::1",
        "fe80::1",
        "fc00::1",
        "::ffff:10.0.0.1",
        "0.0.0.0",
        "224.0.0.1",
        "100.64.0.1",
    ],
)
def test_addresses_inside_a_network_are_refused(address: str) -> None:
    import ipaddress

    assert addresses.refused_address(ipaddress.ip_address(address)) is not None


def test_public_addresses_are_allowed() -> None:
    import ipaddress

    for address in ("93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946"):
        assert addresses.refused_address(ipaddress.ip_address(address)) is None


async def test_private_addresses_are_allowed_only_by_the_setting() -> None:
    parts = addresses.parse("https://127.0.0.1:8443/x", addresses.Policy())
    with pytest.raises(addresses.Refused, match="loopback"):
        await addresses.resolve(parts, addresses.Policy())
    allowed = addresses.Policy(allow_private=True)
    assert str(await addresses.resolve(parts, allowed)) == "127.0.0.1"
    with pytest.raises(addresses.Refused, match="https://"):
        addresses.parse("http://127.0.0.1/x", allowed)
    addresses.parse("http://127.0.0.1/x", addresses.Policy(allow_http=True))


def test_an_attempt_connects_to_the_checked_address_with_the_urls_host() -> None:
    import ipaddress

    parts = addresses.parse("https://hooks.example.com/in?x=1", addresses.Policy())
    pin = addresses.pinned(parts, ipaddress.ip_address("93.184.216.34"))
    assert pin.url == "https://93.184.216.34:443/in?x=1"
    assert pin.host_header == "hooks.example.com" and pin.server_name == "hooks.example.com"
    parts = addresses.parse("http://h.example:8080/", addresses.Policy(allow_http=True))
    pin = addresses.pinned(parts, ipaddress.ip_address("2606:2800:220:1::1"))
    assert pin.url == "http://[2606:2800:220:1::1]:8080/"
    assert pin.host_header == "h.example:8080" and pin.server_name is None


def test_the_default_schedule_spans_about_a_day() -> None:
    delays = schedule.nominal(11, 5.0)
    assert delays[:4] == [5.0, 20.0, 80.0, 320.0]
    assert max(delays) == schedule.CAP_SECONDS
    assert 24 * 3600 <= sum(delays) <= 27 * 3600
    rng = random.Random(7)
    for failures in range(1, 11):
        nominal = delays[failures - 1]
        for _ in range(50):
            assert 0.8 * nominal <= schedule.delay(failures, 5.0, rng=rng) <= 1.2 * nominal


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("ok", "ok"),
        ("ok\x00done", "ok\ufffddone"),
        ("é\ud800x", "é?x"),
        ("ünï\x00", "ünï\ufffd"),
    ],
)
def test_an_answers_text_is_kept_as_postgresql_can_hold_it(text: str, kept: str) -> None:
    out = attempt.storable(text)
    assert out == kept
    out.encode("utf-8")  # no surrogate left
    assert "\x00" not in out
