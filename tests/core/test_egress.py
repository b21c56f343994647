"""Where the registry client may connect (app.core.egress), as tables."""

from __future__ import annotations

import pytest

from app.core.egress import (
    EgressRefused,
    EgressRules,
    check_addresses,
    check_redirect,
    internal_address,
    origin_of,
)

RULES = EgressRules.of(["https://ghcr.io", "https://hub.docker.com"], operator=["http://127.0.0.1:8001/hub"])


@pytest.mark.parametrize(
    ("url", "origin"),
    [
        ("https://ghcr.io/v2/x/tags/list", "https://ghcr.io:443"),
        ("https://GHCR.io:443/token", "https://ghcr.io:443"),
        ("http://127.0.0.1:8001/hub/v2", "http://127.0.0.1:8001"),
        ("http://[::1]:5000/v2/", "http://[::1]:5000"),
    ],
)
def test_origin(url: str, origin: str) -> None:
    assert origin_of(url) == origin


@pytest.mark.parametrize(
    "url", ["ftp://ghcr.io/x", "file:///etc/passwd", "https:///nohost", "http://h:99999/"]
)
def test_origin_refuses_what_is_no_http_url(url: str) -> None:
    with pytest.raises(EgressRefused):
        origin_of(url)


@pytest.mark.parametrize(
    ("url", "ok"),
    [
        ("https://ghcr.io/v2/a/b/tags/list", True),
        ("https://hub.docker.com/v2/namespaces/x", True),
        ("http://127.0.0.1:8001/hub/v2/x", True),  # the operator's
        ("http://127.0.0.1:8002/v2/x", False),  # same host, another port: another origin
        ("http://ghcr.io/v2/x", False),  # another scheme
        ("https://ghcr.io.evil.test/v2/x", False),
        ("https://attacker.example/token", False),
    ],
)
def test_allow_list(url: str, ok: bool) -> None:
    assert RULES.check_url(url).ok is ok


@pytest.mark.parametrize(
    ("address", "internal"),
    [
        ("140.82.112.33", None),
        ("2606:50c0:8000::154", None),
        ("127.0.0.1", "loopback"),
        ("127.8.9.10", "loopback"),
        ("::1", "loopback"),
        ("10.1.2.3", "private"),
        ("172.16.0.1", "private"),
        ("192.168.1.1", "private"),
        ("169.254.169.254", "link-local"),  # the cloud metadata service
        ("fe80::1", "link-local"),
        ("fd00::1", "private"),
        ("100.64.1.1", "shared"),
        ("0.0.0.0", "unspecified"),
        ("224.0.0.1", "multicast"),
        ("::ffff:127.0.0.1", "loopback"),  # IPv4-mapped
        ("::ffff:10.0.0.1", "private"),
        ("not-an-ip", "not an IP"),
    ],
)
def test_internal_addresses(address: str, internal: str | None) -> None:
    why = internal_address(address)
    assert (why is None) is (internal is None)
    if internal is not None:
        assert why is not None and internal in why


@pytest.mark.parametrize(
    ("origin", "addresses", "ok"),
    [
        ("https://ghcr.io:443", ["140.82.112.33"], True),
        ("https://ghcr.io:443", ["140.82.112.33", "10.0.0.1"], False),  # every address is checked
        ("https://ghcr.io:443", [], False),
        ("https://ghcr.io:443", ["127.0.0.1"], False),  # a name pointed at loopback
        ("http://127.0.0.1:8001", ["127.0.0.1"], True),  # configured by the operator
    ],
)
def test_addresses(origin: str, addresses: list[str], ok: bool) -> None:
    assert check_addresses(origin, addresses, RULES).ok is ok


@pytest.mark.parametrize(
    ("current", "target", "ok"),
    [
        ("https://ghcr.io/v2/x/tags/list", "https://ghcr.io/v2/x/tags/list/", True),
        ("https://ghcr.io/v2/x", "https://pkg-containers.githubusercontent.com/x", False),
        ("http://127.0.0.1:8001/hub/x", "http://127.0.0.1:8002/x", False),
        ("https://ghcr.io/v2/x", "http://ghcr.io/v2/x", False),  # a downgrade is another origin
    ],
)
def test_redirects_stay_on_their_origin(current: str, target: str, ok: bool) -> None:
    assert check_redirect(current, target, RULES).ok is ok
