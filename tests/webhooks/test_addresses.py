"""IPv6 spellings of addresses inside a network are refused as those addresses are: site-local,
and every form that carries an IPv4 address (mapped, translated, compatible, 6to4, Teredo,
NAT64) when the IPv4 address is not public."""

from __future__ import annotations

import ipaddress

import pytest

from baton.access.principals import Principal, PrincipalKind
from baton.services import webhook_addresses as addresses
from tests.conftest import LiveServer
from tests.helpers import World
from tests.webhooks.conftest import create_endpoint, graphql

INSIDE = [
    ("fec0::1", "site-local"),
    ("fec0:1234::5", "site-local"),
    ("2002:7f00:1::", "6to4 address embedding a loopback"),
    ("2002:a00:1::1", "6to4 address embedding a private"),
    ("2002:a9fe:a9fe::", "6to4 address embedding a link-local"),  # 169.254.169.254
    ("2001:0:4136:e378:8000:63bf:3fff:fdd2", "Teredo"),
    ("2001:0:7f00:1::", "Teredo address embedding a loopback"),  # its server is 127.0.0.1
    ("64:ff9b::7f00:1", "NAT64 address embedding a loopback"),
    ("64:ff9b::a9fe:a9fe", "NAT64 address embedding a link-local"),
    ("64:ff9b:1::a00:1", "local-use NAT64"),
    ("::ffff:10.0.0.1", "IPv4-mapped address embedding a private"),
    ("::ffff:0:7f00:1", "IPv4-translated address embedding a loopback"),
    ("::7f00:1", "IPv4-compatible address embedding a loopback"),
    ("::a00:1", "IPv4-compatible address embedding a private"),
]


@pytest.mark.parametrize(("address", "why"), INSIDE)
def test_ipv6_spellings_of_inside_addresses_are_refused(address: str, why: str) -> None:
    reason = addresses.refused_kind(ipaddress.ip_address(address))
    assert reason is not None and why in reason, reason


def test_a_6to4_address_of_a_public_ipv4_address_is_as_public_as_it() -> None:
    assert addresses.refused_kind(ipaddress.ip_address("2002:808:808::1")) is None
    assert addresses.refused_kind(ipaddress.ip_address("2606:4700::1111")) is None


@pytest.mark.parametrize(
    ("address", "why"),
    [("fec0::1", "site-local"), ("2002:7f00:1::", "6to4"), ("64:ff9b::a9fe:a9fe", "NAT64")],
)
async def test_a_server_refuses_them_when_an_endpoint_is_saved(
    live_server: LiveServer, world: World, address: str, why: str
) -> None:
    token = await live_server.token(Principal(PrincipalKind.OWNER, world.req_owner))
    made = await create_endpoint(live_server, token, f"https://[{address}]/hook")
    assert made["__typename"] == "InvalidInputError" and made["field"] == "url", made
    assert why in made["message"]
    listed = await graphql(live_server, token, "{ webhookEndpoints { id } }")
    assert listed["webhookEndpoints"] == []


async def test_they_are_allowed_only_by_the_setting() -> None:
    parts = addresses.parse("https://[2002:7f00:1::]/x", addresses.Policy())
    with pytest.raises(addresses.Refused, match="6to4"):
        await addresses.resolve(parts, addresses.Policy())
    _, private = await addresses.check_resolved(parts, addresses.Policy(allow_private=True))
    assert private
