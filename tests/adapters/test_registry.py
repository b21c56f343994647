"""Registry clients: canned responses (fixtures/registry) through httpx.MockTransport, and the sim."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.adapters.registry import (
    DockerHubClient,
    GhcrClient,
    MemoryEtagCache,
    OciClient,
    RegistryNotFound,
    TagPattern,
    client_for,
    parse_bearer_challenge,
    parse_image,
    parse_link_next,
)

SHA = "69715823df89b11ee684b84066390cbb9092d5c1"


def _canned(fixtures_dir: Path, name: str) -> dict[str, Any]:
    return dict(json.loads((fixtures_dir / "registry" / name).read_text()))


def _transport(routes: dict[str, dict[str, Any]], seen: list[httpx.Request]) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        key = str(request.url)
        for url, canned in routes.items():
            if key == url:
                resp = canned["response"]
                if callable(resp):
                    return resp(request)
                return httpx.Response(resp["status"], headers=resp["headers"], json=resp["body"])
        return httpx.Response(500, json={"message": f"unexpected {key}"})

    return httpx.MockTransport(handler)


def test_image_references_and_patterns() -> None:
    ref = parse_image(f"vllm/vllm-openai-rocm:nightly-{SHA}")
    assert (ref.host, ref.repository, ref.tag, ref.image_repo) == (
        "docker.io",
        "vllm/vllm-openai-rocm",
        f"nightly-{SHA}",
        "vllm/vllm-openai-rocm",
    )
    assert parse_image("ghcr.io/org/app:1.0").image_repo == "ghcr.io/org/app"
    assert parse_image("localhost:5000/app").host == "localhost:5000"
    assert parse_image("ubuntu").repository == "library/ubuntu"
    pattern = TagPattern(r"nightly-(?P<sha>[0-9a-f]{40})")
    assert pattern.commit_of(f"nightly-{SHA}") == SHA
    assert pattern.commit_of(f"nightly-{SHA}-rc") is None and pattern.commit_of("latest") is None
    assert pattern.select(["latest", f"nightly-{SHA}"]) == [(f"nightly-{SHA}", SHA)]
    with pytest.raises(ValueError, match="sha"):
        TagPattern(r"nightly-[0-9a-f]+")
    with pytest.raises(ValueError):
        parse_image("has space:1")


def test_link_and_challenge_parsing() -> None:
    assert parse_link_next(
        '</v2/a/tags/list?last=x&n=2>; rel="next"', "https://r.test/v2/a/tags/list?n=2"
    ) == ("https://r.test/v2/a/tags/list?last=x&n=2")
    assert parse_link_next(None, "https://r.test/") is None
    got = parse_bearer_challenge(
        'Bearer realm="https://ghcr.io/token",service="ghcr.io",scope="repository:a/b:pull"'
    )
    assert got == {"realm": "https://ghcr.io/token", "service": "ghcr.io", "scope": "repository:a/b:pull"}


def test_dockerhub_canned_pages(fixtures_dir: Path) -> None:
    p1, p2 = (
        _canned(fixtures_dir, "dockerhub/tags.page1.json"),
        _canned(fixtures_dir, "dockerhub/tags.page2.json"),
    )
    seen: list[httpx.Request] = []
    first = "https://hub.docker.com/v2/namespaces/example-org/repositories/example-app/tags?page_size=2"
    routes = {first: p1, p1["response"]["body"]["next"]: p2}
    client = DockerHubClient(http=httpx.Client(transport=_transport(routes, seen)), page_size=2)
    listing = client.list_tags("example-org/example-app")
    names = [t.name for t in listing.tags]
    assert names == [r["name"] for r in p1["response"]["body"]["results"] + p2["response"]["body"]["results"]]
    assert all(t.pushed_at is not None for t in listing.tags)
    assert listing.tags[-1].digest == p2["response"]["body"]["results"][0]["digest"]
    assert listing.changed and listing.requests == 2


def test_oci_canned_link_pagination_and_404(fixtures_dir: Path) -> None:
    p1, p2 = (
        _canned(fixtures_dir, "oci/tags-list.page1.json"),
        _canned(fixtures_dir, "oci/tags-list.page2.json"),
    )
    seen: list[httpx.Request] = []
    routes = {
        "https://registry.example.test/v2/example-org/example-app/tags/list?n=3": p1,
        "https://registry.example.test/v2/example-org/example-app/tags/list?last=1.4.1&n=3": p2,
        "https://registry.example.test/v2/example-org/does-not-exist/tags/list?n=3": _canned(
            fixtures_dir, "oci/tags-list.404.json"
        ),
    }
    client = OciClient(
        "https://registry.example.test", http=httpx.Client(transport=_transport(routes, seen)), page_size=3
    )
    listing = client.list_tags("example-org/example-app")
    assert [t.name for t in listing.tags] == p1["response"]["body"]["tags"] + p2["response"]["body"]["tags"]
    with pytest.raises(RegistryNotFound, match="NAME_UNKNOWN"):
        client.list_tags("example-org/does-not-exist")


def test_ghcr_canned_bearer_challenge(fixtures_dir: Path) -> None:
    challenge = _canned(fixtures_dir, "ghcr/tags-list.401-challenge.json")
    token = _canned(fixtures_dir, "ghcr/token.anonymous.json")
    page = _canned(fixtures_dir, "ghcr/tags-list.page1.json")
    want = "Bearer " + token["response"]["body"]["token"]

    def tags(request: httpx.Request) -> httpx.Response:
        src = page if request.headers.get("authorization") == want else challenge
        r = src["response"]
        headers = {k: v for k, v in r["headers"].items() if k != "Link"}  # single page here
        return httpx.Response(r["status"], headers=headers, json=r["body"])

    seen: list[httpx.Request] = []
    routes: dict[str, dict[str, Any]] = {
        "https://ghcr.io/v2/example-org/example-app/tags/list?n=2": {"response": tags},
        "https://ghcr.io/token?scope=repository%3Aexample-org%2Fexample-app%3Apull&service=ghcr.io": token,
    }
    client = GhcrClient(http=httpx.Client(transport=_transport(routes, seen)), page_size=2)
    listing = client.list_tags("example-org/example-app")
    assert [t.name for t in listing.tags] == page["response"]["body"]["tags"]
    assert [r.url.path for r in seen] == [
        "/v2/example-org/example-app/tags/list",
        "/token",
        "/v2/example-org/example-app/tags/list",
    ]


def test_etag_conditional_requests_reuse_the_cache() -> None:
    calls: list[str | None] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request.headers.get("if-none-match"))
        if request.headers.get("if-none-match") == '"v1"':
            return httpx.Response(304)
        return httpx.Response(
            200,
            headers={"ETag": '"v1"'},
            json={"count": 1, "next": None, "results": [{"name": f"nightly-{SHA}"}]},
        )

    cache = MemoryEtagCache()
    http = httpx.Client(transport=httpx.MockTransport(handler))
    first = DockerHubClient("https://hub.test", http=http, cache=cache).list_tags("vllm/x")
    second = DockerHubClient("https://hub.test", http=http, cache=cache).list_tags("vllm/x")
    assert first.changed and not second.changed
    assert [t.name for t in second.tags] == [f"nightly-{SHA}"]
    assert calls == [None, '"v1"']


@pytest.mark.parametrize("declared", [True, False])
def test_oversize_answers_are_refused_before_being_read_whole(declared: bool) -> None:
    from app.adapters.registry import MAX_RESPONSE_BYTES, RegistryError

    huge = b'{"count": 1, "results": [' + b" " * (MAX_RESPONSE_BYTES + 1) + b"]}"

    def handler(request: httpx.Request) -> httpx.Response:
        if declared:
            return httpx.Response(200, content=huge)
        return httpx.Response(200, content=iter([huge[i : i + 65536] for i in range(0, len(huge), 65536)]))

    http = httpx.Client(transport=httpx.MockTransport(handler))
    with pytest.raises(RegistryError, match="cap"):
        DockerHubClient("https://hub.test", http=http).list_tags("vllm/x")


@pytest.fixture
def sim_world() -> Iterator[Any]:
    from sim.server import SimServer

    with SimServer() as sim:
        sim.world.add_image("vllm/vllm-openai-rocm")
        for i in range(5):
            sim.world.push_tag("vllm/vllm-openai-rocm", f"nightly-{i:040x}")
        sim.world.push_tag("vllm/vllm-openai-rocm", "latest")
        yield sim


@pytest.mark.parametrize(
    "make",
    [
        lambda url: DockerHubClient(url + "/hub", page_size=2),
        lambda url: OciClient(url, page_size=2),
        lambda url: client_for(parse_image("vllm/vllm-openai-rocm"), overrides={"docker.io": url + "/hub"}),
    ],
)
def test_clients_against_the_sim(sim_world: Any, make: Callable[[str], Any]) -> None:
    listing = make(sim_world.url).list_tags("vllm/vllm-openai-rocm")
    assert sorted(t.name for t in listing.tags) == sorted(
        [f"nightly-{i:040x}" for i in range(5)] + ["latest"]
    )
    sim_world.world.delete_tag("vllm/vllm-openai-rocm", f"nightly-{0:040x}")
    again = make(sim_world.url).list_tags("vllm/vllm-openai-rocm")
    assert f"nightly-{0:040x}" not in {t.name for t in again.tags} and len(again.tags) == 5


def test_an_answer_that_is_not_json_is_a_registry_error() -> None:
    from app.adapters.registry import RegistryError

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=b"<html>Docker Hub is down for maintenance</html>")

    http = httpx.Client(transport=httpx.MockTransport(handler))
    for client in (DockerHubClient("https://hub.test", http=http), OciClient("https://oci.test", http=http)):
        with pytest.raises(RegistryError, match="not JSON"):
            client.list_tags("vllm/x")


def test_refresh_tags_closes_the_http_client_it_made(
    db_session: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import app.flows.tracking.tags
    from app.flows.tracking.tags import refresh_tags

    made: list[DockerHubClient] = []

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(503, json={"message": "busy"})

    def client_for(*args: Any, **kwargs: Any) -> DockerHubClient:
        client = DockerHubClient("https://hub.test")  # owns its http client
        client._http = httpx.Client(transport=httpx.MockTransport(handler))
        made.append(client)
        return client

    monkeypatch.setattr(app.flows.tracking.tags, "client_for", client_for)
    state = refresh_tags(
        db_session,
        "vllm/x",
        pattern=r"nightly-(?P<sha>[0-9a-f]{40})",
        trusted=app.flows.tracking.tags.TrustedRegistries(frozenset({"docker.io"})),
    )
    assert not state.ok and made and made[0]._http.is_closed
    handed_in = httpx.Client(transport=httpx.MockTransport(handler))
    DockerHubClient("https://hub.test", http=handed_in).close()
    assert not handed_in.is_closed  # the caller's client stays the caller's


def test_a_next_page_on_another_origin_is_refused() -> None:
    from app.adapters.registry import RegistryError

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, json={"count": 2, "next": "https://evil.test/steal?page=2", "results": [{"name": "a"}]}
        )

    http = httpx.Client(transport=httpx.MockTransport(handler))
    with pytest.raises(RegistryError, match="another origin"):
        DockerHubClient("https://hub.test", http=http).list_tags("vllm/x")
