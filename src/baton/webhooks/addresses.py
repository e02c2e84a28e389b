"""Which URLs a webhook may call, and the address each attempt connects to.

A URL must be https (http only with `BATON_WEBHOOK_ALLOW_HTTP`), carry no credentials, and
resolve only to public (globally reachable) addresses: loopback, private, link-local,
unique-local, multicast, reserved, shared and unspecified addresses (IPv4-mapped IPv6 ones
included) are refused unless `BATON_WEBHOOK_ALLOW_PRIVATE` is set. The host is resolved when
the endpoint is saved and again at every attempt, and the attempt connects to the address that
was checked (the `Host` header and TLS server name stay the URL's), so a name that resolves to
something else a moment later (DNS rebinding) cannot steer a delivery inside the network.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import SplitResult, urlsplit, urlunsplit

MAX_URL_LENGTH = 2048
RESOLVE_SECONDS = 5.0

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


class Refused(Exception):
    """A URL a webhook may not call; the message says why."""


@dataclass(frozen=True)
class Policy:
    allow_private: bool = False
    allow_http: bool = False


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


def refused_address(address: Address) -> str | None:
    """Why a webhook may not connect to `address` without BATON_WEBHOOK_ALLOW_PRIVATE."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
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
            return f"resolves to {address}, a {kind} address"
    if not address.is_global:  # shared (100.64/10), documentation, benchmarking ranges…
        return f"resolves to {address}, a non-public address"
    return None


def _port(parts: SplitResult) -> int:
    return parts.port or (443 if parts.scheme == "https" else 80)


async def resolve(parts: SplitResult, policy: Policy) -> Address:
    """The address to connect to for `parts`: every address the host resolves to must be
    allowed (one bad answer refuses it); the first is used."""
    host = parts.hostname
    assert host is not None  # `parse` refuses URLs without one
    try:
        found: list[Address] = [ipaddress.ip_address(host)]
    except ValueError:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(RESOLVE_SECONDS):
                infos = await loop.getaddrinfo(host, _port(parts), type=socket.SOCK_STREAM)
        except TimeoutError:
            raise Refused(f"{host} did not resolve within {RESOLVE_SECONDS:g} s") from None
        except OSError as exc:
            raise Refused(f"{host} does not resolve ({exc.strerror or exc})") from None
        found = [ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in infos]
    if not found:
        raise Refused(f"{host} does not resolve")
    if not policy.allow_private:
        for address in found:
            reason = refused_address(address)
            if reason is not None:
                raise Refused(f"{reason} (allowed only with BATON_WEBHOOK_ALLOW_PRIVATE)")
    return found[0]


async def check(url: str, policy: Policy) -> SplitResult:
    parts = parse(url, policy)
    await resolve(parts, policy)
    return parts


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
