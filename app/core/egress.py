"""Where the registry client may connect (pure: URLs and addresses in, a verdict with why out).

The bot lists image tags from registries, and an image reference is text anyone can write in a
PR. So every registry request goes through three checks (``app/adapters/registry.py`` applies
them, resolving names itself):

1. its origin (scheme, host, port) is on the allow-list: the registries of images the default
   branch pins or ``.github/sweepbot.yml`` lists under ``images:``, and the operator's
   ``SWEEPBOT_REGISTRY_URLS`` (mirrors, the simulator);
2. every address the host resolves to is public, unless the operator configured that origin
   (loopback, private, link-local, shared, reserved, multicast and unspecified addresses are
   where an SSRF reaches: metadata services, the broker, the database);
3. a redirect or a next-page link stays on the origin it was asked of, and a bearer-token realm
   is itself an allowed origin.
"""

from __future__ import annotations

import ipaddress
import urllib.parse
from collections.abc import Iterable
from dataclasses import dataclass

_DEFAULT_PORTS = {"http": 80, "https": 443}


class EgressRefused(ValueError):
    """A registry request the allow-list or address rules refuse; the message says which and why."""


@dataclass(frozen=True)
class Verdict:
    ok: bool
    why: str


def origin_of(url: str) -> str:
    """``scheme://host:port`` with the scheme's default port spelled out, lowercase host."""
    parts = urllib.parse.urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname:
        raise EgressRefused(f"{url!r} is not an http(s) URL with a host")
    try:
        port = parts.port or _DEFAULT_PORTS[scheme]
    except ValueError as exc:
        raise EgressRefused(f"{url!r} has an invalid port") from exc
    host = parts.hostname.lower()
    return f"{scheme}://{'[' + host + ']' if ':' in host else host}:{port}"


@dataclass(frozen=True)
class EgressRules:
    """The origins a registry client may ask, and those allowed to resolve to internal addresses."""

    origins: frozenset[str]
    internal_ok: frozenset[str] = frozenset()

    @classmethod
    def of(cls, allowed: Iterable[str], operator: Iterable[str] = ()) -> EgressRules:
        """From URLs: ``allowed`` (the repo's trusted registries), ``operator`` (configured by the
        operator, who alone may point the bot at loopback or private addresses)."""
        op = frozenset(origin_of(u) for u in operator)
        return cls(frozenset(origin_of(u) for u in allowed) | op, op)

    def check_url(self, url: str) -> Verdict:
        try:
            origin = origin_of(url)
        except EgressRefused as exc:
            return Verdict(False, str(exc))
        if origin in self.origins:
            return Verdict(True, f"{origin} is an allowed registry origin")
        allowed = ", ".join(sorted(self.origins)) or "none"
        return Verdict(
            False,
            f"{origin} is not an allowed registry origin (allowed: {allowed}); "
            "registries come from the default branch's pins, `images:` in .github/sweepbot.yml, "
            "or SWEEPBOT_REGISTRY_URLS",
        )


def internal_address(address: str) -> str | None:
    """Why ``address`` is not a public internet address (None when it is)."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return f"{address!r} is not an IP address"
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    for flag, name in (
        ("is_loopback", "loopback"),
        ("is_link_local", "link-local"),
        ("is_unspecified", "unspecified"),
        ("is_multicast", "multicast"),
        ("is_private", "private"),
        ("is_reserved", "reserved"),
    ):
        if getattr(ip, flag):
            return f"{ip} is a {name} address"
    if isinstance(ip, ipaddress.IPv4Address) and ip in ipaddress.ip_network("100.64.0.0/10"):
        return f"{ip} is a shared (carrier-grade NAT) address"
    if not ip.is_global:
        return f"{ip} is not a global address"
    return None


def check_addresses(origin: str, addresses: Iterable[str], rules: EgressRules) -> Verdict:
    """Every address the origin's host resolved to must be public, unless the operator configured
    the origin; no address at all is a refusal too."""
    found = list(addresses)
    if not found:
        return Verdict(False, f"{origin}: the host resolved to no address")
    if origin in rules.internal_ok:
        return Verdict(True, f"{origin} is configured by the operator (SWEEPBOT_REGISTRY_URLS)")
    for address in found:
        why = internal_address(address)
        if why is not None:
            return Verdict(
                False,
                f"{origin} resolves to {why}; only an origin in SWEEPBOT_REGISTRY_URLS may be internal",
            )
    return Verdict(True, f"{origin} resolves to public addresses only")


def check_redirect(current: str, target: str, rules: EgressRules) -> Verdict:
    """A redirect (or next-page link) is followed only within the origin it was asked of."""
    try:
        here, there = origin_of(current), origin_of(target)
    except EgressRefused as exc:
        return Verdict(False, str(exc))
    if here != there:
        return Verdict(False, f"{current} points to another origin ({there}); not followed")
    return rules.check_url(target)


__all__ = [
    "EgressRefused",
    "EgressRules",
    "Verdict",
    "check_addresses",
    "check_redirect",
    "internal_address",
    "origin_of",
]
