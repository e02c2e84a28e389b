"""Which URLs a webhook may call, and the address each attempt connects to.

A URL must be https (http only with `BATON_WEBHOOK_ALLOW_HTTP`), carry no credentials, and
resolve only to public (globally reachable) addresses: loopback, private, link-local,
site-local, unique-local, multicast, reserved, shared and unspecified addresses are refused,
and so are IPv6 addresses that embed an IPv4 one which is not public (IPv4-mapped,
IPv4-translated, IPv4-compatible, 6to4, Teredo, NAT64), unless `BATON_WEBHOOK_ALLOW_PRIVATE`
is set. The host is resolved when the endpoint is saved and again when messages go (at least
every `baton.webhooks.attempt.ROUTE_SECONDS`, and after a failed attempt), and an attempt
connects to the address that was checked (the `Host` header and TLS server name stay the
URL's), so a name that resolves to something else a moment later (DNS rebinding) cannot steer
a delivery inside the network.

A refusal names the kind of address a host name resolved to, never the address itself: the
text goes to the endpoint's owner, who has no business learning the network's inside.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import SplitResult, urlsplit, urlunsplit

from prometheus_client import Counter

from baton.metrics import REGISTRY

MAX_URL_LENGTH = 2048
RESOLVE_SECONDS = 5.0

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
IPv6 = ipaddress.IPv6Network

LOOKUPS = Counter(
    "baton_webhook_lookups",
    "Host names of webhook URLs looked up (saving an endpoint, each attempt), by outcome: "
    "resolved (to addresses allowed), refused (to one that is not), failed (no answer).",
    ["outcome"],
    registry=REGISTRY,
)

# IPv6 ranges whose addresses carry an IPv4 one, and where it sits (the last 32 bits unless
# the range has its own reader below). A packet to them ends at that IPv4 address, or at a
# relay or translator near it, so the IPv4 address is what is checked.
_MAPPED = IPv6("::ffff:0:0/96")
_TRANSLATED = IPv6("::ffff:0:0:0/96")  # SIIT (RFC 2765)
_COMPATIBLE = IPv6("::/96")  # deprecated (RFC 4291); :: and ::1 are checked as themselves
_NAT64 = IPv6("64:ff9b::/96")  # the well-known NAT64 prefix (RFC 6052)
_NAT64_LOCAL = IPv6("64:ff9b:1::/48")  # local-use NAT64 (RFC 8215): inside a network only
_SIX_TO_FOUR = IPv6("2002::/16")
_TEREDO = IPv6("2001::/32")
_SITE_LOCAL = IPv6("fec0::/10")  # deprecated (RFC 3879), still routed inside some networks


class Refused(Exception):
    """A URL a webhook may not call; the message says why."""


@dataclass(frozen=True)
class Policy:
    allow_private: bool = False
    allow_http: bool = False


@dataclass(frozen=True)
class Checked:
    """A URL that may be called now: its parts, and whether it resolved to an address that
    is not public (allowed only because the policy allows private addresses)."""

    parts: SplitResult
    private: bool


def parse(url: str, policy: Policy) -> SplitResult:
    """The URL's parts, or `Refused` for a URL no endpoint may have (before any look-up)."""
    if len(url) > MAX_URL_LENGTH:
        raise Refused(f"at most {MAX_URL_LENGTH} characters")
    if any(c.isspace() or ord(c) < 32 for c in url):
        raise Refused("contains whitespace or control characters")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  (raises ValueError for a port that is not a number)
    except ValueError as exc:
        raise Refused(f"not a valid URL ({exc})") from None
    schemes = ("https", "http") if policy.allow_http else ("https",)
    if parts.scheme not in schemes:
        allowed = " or ".join(f"{s}://" for s in schemes)
        raise Refused(
            f"must be an {allowed} URL"
            + ("" if policy.allow_http else " (http:// needs BATON_WEBHOOK_ALLOW_HTTP)")
        )
    if not parts.hostname:
        raise Refused("names no host")
    if parts.username is not None or parts.password is not None:
        raise Refused("must not carry credentials (user:password@)")
    if parts.fragment:
        raise Refused("must not have a #fragment")
    return parts


def embedded_ipv4(address: ipaddress.IPv6Address) -> list[tuple[str, ipaddress.IPv4Address]]:
    """The IPv4 addresses an IPv6 address carries, each with the form that carries it."""
    last = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address in _MAPPED:
        return [("IPv4-mapped", last)]
    if address in _TRANSLATED:
        return [("IPv4-translated", last)]
    if address in _COMPATIBLE and int(address) > 1:
        return [("IPv4-compatible", last)]
    if address in _NAT64:
        return [("NAT64", last)]
    if address in _SIX_TO_FOUR and address.sixtofour is not None:
        return [("6to4", address.sixtofour)]
    if address in _TEREDO and address.teredo is not None:
        server, client = address.teredo
        return [("Teredo", server), ("Teredo", client)]
    return []


def _kind(address: Address) -> str | None:
    """What kind of address that is not public `address` is (None: a public one)."""
    if isinstance(address, ipaddress.IPv6Address):
        if address in _SITE_LOCAL:
            return "site-local"
        if address in _NAT64_LOCAL:
            return "local-use NAT64"
    checks = (  # the most telling first: 0.0.0.0 is also "private"
        (address.is_unspecified, "unspecified"),
        (address.is_loopback, "loopback"),
        (address.is_link_local, "link-local"),
        (address.is_private, "private"),
        (address.is_multicast, "multicast"),
        (address.is_reserved, "reserved"),
    )
    for hit, kind in checks:
        if hit:
            return kind
    if not address.is_global:  # shared (100.64/10), documentation, benchmarking ranges…
        return "non-public"
    return None


def refused_kind(address: Address) -> str | None:
    """Why a webhook may not connect to `address` without BATON_WEBHOOK_ALLOW_PRIVATE: the
    kind of address it is, or of the IPv4 address it embeds (None: it may)."""
    if isinstance(address, ipaddress.IPv6Address):
        for form, inner in embedded_ipv4(address):
            kind = _kind(inner)
            if kind is not None:
                return f"{_a(form)} address embedding {_a(kind)} IPv4 address"
    kind = _kind(address)
    return f"{_a(kind)} address" if kind is not None else None


def _a(word: str) -> str:
    return ("an " if word[0] in "aeiouI" else "a ") + word


def refused_address(address: Address) -> str | None:
    """`refused_kind`, naming the address (for an address the caller wrote itself)."""
    kind = refused_kind(address)
    return f"resolves to {address}, {kind}" if kind is not None else None


def _port(parts: SplitResult) -> int:
    return parts.port or (443 if parts.scheme == "https" else 80)


async def _look_up(parts: SplitResult) -> list[Address]:
    """The addresses `parts`' host stands for: itself when it is an address, else what the
    name resolves to (`Refused` when it does not within `RESOLVE_SECONDS`)."""
    host = parts.hostname
    assert host is not None  # `parse` refuses URLs without one
    try:
        return [ipaddress.ip_address(host)]
    except ValueError:
        pass
    loop = asyncio.get_running_loop()
    try:
        async with asyncio.timeout(RESOLVE_SECONDS):
            infos = await loop.getaddrinfo(host, _port(parts), type=socket.SOCK_STREAM)
    except TimeoutError:
        LOOKUPS.labels(outcome="failed").inc()
        raise Refused(f"{host} did not resolve within {RESOLVE_SECONDS:g} s") from None
    except OSError as exc:
        LOOKUPS.labels(outcome="failed").inc()
        raise Refused(f"{host} does not resolve ({exc.strerror or exc})") from None
    return [ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in infos]


async def resolve(parts: SplitResult, policy: Policy) -> Address:
    """The address to connect to for `parts` (see `check_resolved`)."""
    return (await check_resolved(parts, policy))[0]


async def check_resolved(parts: SplitResult, policy: Policy) -> tuple[Address, bool]:
    """The address to connect to for `parts`, and whether any address the host resolved to
    is not public. Every address it resolves to must be allowed (one bad answer refuses it);
    the first is used."""
    host = parts.hostname
    assert host is not None
    literal = _is_literal(host)
    found = await _look_up(parts)
    if not found:
        LOOKUPS.labels(outcome="failed").inc()
        raise Refused(f"{host} does not resolve")
    private = False
    for address in found:
        kind = refused_kind(address)
        if kind is None:
            continue
        private = True
        if not policy.allow_private:
            if not literal:
                LOOKUPS.labels(outcome="refused").inc()
            what = f"resolves to {address}," if literal else f"{host} resolves to"
            raise Refused(
                f"{what} {kind} (allowed only with BATON_WEBHOOK_ALLOW_PRIVATE, for an "
                "endpoint saved with it)"
            )
    if not literal:
        LOOKUPS.labels(outcome="resolved").inc()
    return found[0], private


def _is_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


async def check(url: str, policy: Policy) -> Checked:
    parts = parse(url, policy)
    _, private = await check_resolved(parts, policy)
    return Checked(parts, private)


@dataclass(frozen=True)
class Pinned:
    """A request's URL with the host replaced by the checked address, and what keeps the
    request addressed to the URL's host (its `Host` header, and TLS server name for https)."""

    url: str
    host_header: str
    server_name: str | None


def pinned(parts: SplitResult, address: Address) -> Pinned:
    host = parts.hostname
    assert host is not None
    literal = f"[{address}]" if isinstance(address, ipaddress.IPv6Address) else str(address)
    netloc = f"{literal}:{_port(parts)}"
    default = _port(parts) == (443 if parts.scheme == "https" else 80)
    shown = f"[{host}]" if ":" in host else host
    return Pinned(
        url=urlunsplit(parts._replace(netloc=netloc, fragment="")),
        host_header=shown if default else f"{shown}:{_port(parts)}",
        server_name=host if parts.scheme == "https" else None,
    )
