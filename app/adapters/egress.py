"""The registry client's egress checks with I/O: resolving a host and applying ``app.core.egress``
to every address (``app/adapters/registry.py`` calls ``refusal`` before each request)."""

from __future__ import annotations

import socket
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass

from app.core.egress import EgressRefused, EgressRules, check_addresses, origin_of


def resolve_host(host: str, port: int) -> list[str]:
    """Every address ``host`` resolves to (all families); a name that does not resolve is refused."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise EgressRefused(f"{host} does not resolve: {exc}") from exc
    return sorted({str(info[4][0]) for info in infos})


@dataclass(frozen=True)
class Egress:
    """The allow-list a client's every request is checked against, and how names are resolved
    (a test hands in its own resolver)."""

    rules: EgressRules
    resolve: Callable[[str, int], list[str]] = resolve_host

    def refusal(self, url: str) -> str | None:
        """Why ``url`` may not be asked (None when it may): its origin, then every address."""
        verdict = self.rules.check_url(url)
        if not verdict.ok:
            return verdict.why
        try:
            origin = origin_of(url)
            addresses = self.resolve(str(urllib.parse.urlsplit(url).hostname), int(origin.rsplit(":", 1)[1]))
        except EgressRefused as exc:
            return str(exc)
        verdict = check_addresses(origin, addresses, self.rules)
        return None if verdict.ok else verdict.why
