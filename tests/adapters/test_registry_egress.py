"""The registry client's egress (issue 25's SSRF door), counted at local listeners on loopback.

``trap`` is a listener nothing may reach: every client below is pointed at it one way or another
(a loopback or private address, a name resolving there, a redirect, a bearer realm, or an HTTP
proxy that every request of the client would go through), and the test asserts it accepted zero
connections. ``registry`` is an operator-configured registry (``SWEEPBOT_REGISTRY_URLS``) on
loopback, the one internal origin allowed: it does get its requests, so the counting works.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from app.adapters.registry import RegistryError, client_for, parse_image


class Counting(ThreadingHTTPServer):
    """Counts every accepted connection; answers what ``answer`` says for a path."""

    daemon_threads = True

    def __init__(self, answer: Callable[[str], tuple[int, dict[str, str], bytes]]) -> None:
        self.accepted = 0
        self.answer = answer
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                status, headers, body = server.answer(self.path)
                self.send_response(status)
                for k, v in {**headers, "Content-Length": str(len(body))}.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                return None

        super().__init__(("127.0.0.1", 0), Handler)

    def get_request(self) -> Any:
        got = super().get_request()
        self.accepted += 1
        return got

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


def _serve(answer: Callable[[str], tuple[int, dict[str, str], bytes]]) -> Iterator[Counting]:
    server = Counting(answer)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def _tags(
    body: Any, status: int = 200, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    return status, {"Content-Type": "application/json", **(headers or {})}, json.dumps(body).encode()


@pytest.fixture
def trap() -> Iterator[Counting]:
    yield from _serve(lambda path: _tags({"name": "x", "tags": ["nightly-" + "a" * 40]}))


@pytest.fixture
def registry(trap: Counting) -> Iterator[Counting]:
    """The operator's registry: a redirect to the trap for one image, a realm on the trap for
    another, a plain listing otherwise."""

    def answer(path: str) -> tuple[int, dict[str, str], bytes]:
        if path.startswith("/v2/moved/"):
            return _tags({}, 307, {"Location": f"{trap.url}/v2/moved/x/tags/list"})
        if path.startswith("/v2/realm/"):
            challenge = f'Bearer realm="{trap.url}/token",service="trap",scope="repository:realm/x:pull"'
            return _tags({"errors": []}, 401, {"WWW-Authenticate": challenge})
        if path.startswith("/v2/deep/"):
            nested: Any = ["nightly"]
            for _ in range(40):
                nested = {"n": nested}
            return _tags({"name": "deep/x", "tags": nested})
        if path.startswith("/v2/broken/"):
            return _tags({"name": "broken/x", "tagz": []})
        return _tags({"name": "ok/x", "tags": ["nightly-" + "b" * 40]})

    yield from _serve(answer)


def _resolve_to(address: str) -> Callable[[str, int], list[str]]:
    return lambda host, port: [address]


def test_the_operators_registry_is_reached_so_the_count_is_real(registry: Counting, trap: Counting) -> None:
    client = client_for(parse_image("ok.test/ok/x"), overrides={"ok.test": registry.url})
    assert [t.name for t in client.list_tags("ok/x").tags] == ["nightly-" + "b" * 40]
    assert registry.accepted >= 1 and trap.accepted == 0


@pytest.mark.parametrize(
    "case",
    [
        "loopback literal",
        "private literal",
        "link-local literal",
        "name resolving to loopback",
        "name resolving to a private address",
        "name resolving to public and private",
        "images: url on loopback",
        "host nobody trusted",
        "redirect to another host",
        "bearer realm on another host",
    ],
)
def test_zero_connections_outside_the_allow_list(case: str, registry: Counting, trap: Counting) -> None:
    port = trap.server_address[1]
    # Every request of a client handed this http client goes through the trap (as an HTTP proxy),
    # so a single request egress let through would be counted there, whatever its host.
    via_trap = httpx.Client(proxy=trap.url, timeout=5)
    kw: dict[str, Any] = {"http": via_trap}
    if case == "loopback literal":
        image, kw["trusted_hosts"] = f"127.0.0.1:{port}/evil/x", {f"127.0.0.1:{port}"}
    elif case == "private literal":
        image, kw["trusted_hosts"] = "10.0.0.7:5000/evil/x", {"10.0.0.7:5000"}
    elif case == "link-local literal":
        image, kw["trusted_hosts"] = "169.254.169.254/latest/meta", {"169.254.169.254"}
    elif case == "name resolving to loopback":
        image, kw["trusted_hosts"], kw["resolve"] = (
            "registry.evil.test/x/y",
            {"registry.evil.test"},
            _resolve_to("127.0.0.1"),
        )
    elif case == "name resolving to a private address":
        image, kw["trusted_hosts"], kw["resolve"] = (
            "registry.evil.test/x/y",
            {"registry.evil.test"},
            _resolve_to("10.9.8.7"),
        )
    elif case == "name resolving to public and private":
        image, kw["trusted_hosts"] = "registry.evil.test/x/y", {"registry.evil.test"}
        kw["resolve"] = lambda host, p: ["140.82.112.33", "192.168.0.10"]
    elif case == "images: url on loopback":
        image, kw["url"], kw["kind"] = (
            "listed.test/x/y",
            trap.url,
            "oci",
        )  # a maintainer's, not the operator's
    elif case == "host nobody trusted":
        image, kw["resolve"] = "registry.evil.test/x/y", _resolve_to("140.82.112.33")
    elif case == "redirect to another host":
        image, kw["overrides"] = "op.test/moved/x", {"op.test": registry.url}
        kw.pop("http")  # the real transport: the registry answers 307 to the trap
    else:
        image, kw["overrides"] = "op.test/realm/x", {"op.test": registry.url}
        kw.pop("http")  # the registry's bearer challenge names a realm on the trap
    with pytest.raises(RegistryError) as err:
        ref = parse_image(image)
        client_for(ref, **kw).list_tags(ref.repository)
    assert trap.accepted == 0, f"{case}: {err.value}"
    via_trap.close()


def test_an_answer_too_deep_or_malformed_is_an_error_never_an_empty_listing(registry: Counting) -> None:
    for name, says in (("deep/x", "nests deeper"), ("broken/x", "malformed tag listing")):
        client = client_for(parse_image(f"op.test/{name}"), overrides={"op.test": registry.url})
        with pytest.raises(RegistryError, match=says):
            client.list_tags(name)
