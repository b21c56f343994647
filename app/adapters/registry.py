"""Image tag listing: Docker Hub, generic OCI distribution (bearer challenge, ``Link`` pagination), GHCR.

Registry calls are not GitHub calls, but they still ask ``If-None-Match`` where the registry
sends an ETag, so an unchanged tag list costs the registry almost nothing. Tag patterns carry a
named group ``sha`` capturing the upstream commit the image was built from.
"""

from __future__ import annotations

import json
import re
import urllib.parse
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

import httpx
import structlog

from app.adapters.egress import Egress, resolve_host
from app.core import safejson
from app.core.egress import EgressRefused, EgressRules, check_redirect, origin_of
from app.models import HttpCacheEntry
from app.settings import get_settings

log = structlog.get_logger(__name__)

DOCKERHUB_API = "https://hub.docker.com"
GHCR_URL = "https://ghcr.io"
DOCKER_HOSTS = ("docker.io", "index.docker.io", "registry-1.docker.io", "registry.hub.docker.com")
MAX_PAGES = 100
MAX_RESPONSE_BYTES = 8 * 1024 * 1024  # one tag-list page is a few hundred KB at most
MAX_JSON_DEPTH = 16  # a tag list or token answer nests 4 levels; Docker Hub's 5
MAX_REDIRECTS = 5  # same-origin hops only (a trailing slash, a moved path)
_TRANSFER_HEADERS = {"content-encoding", "content-length", "transfer-encoding"}


class RegistryError(Exception):
    """The registry refused or answered something unusable; the message names the URL and status."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class RegistryNotFound(RegistryError):
    pass


# ---------------------------------------------------------------------------------- pure pieces


@dataclass(frozen=True)
class ImageRef:
    """``[host/]repository[:tag][@digest]``; ``host`` is ``docker.io`` when the reference names none.

    ``enroot`` marks the ``registry#repository:tag`` spelling that enroot/pyxis use and the
    benchmark repo writes for NVIDIA images (``nvcr.io#nvidia/tensorrt-llm/release:1.2.0rc2``):
    the part before ``#`` is the registry host. It is kept so the bot writes a pin back in the
    spelling the repo uses, while tags are listed from that registry like any other image.
    """

    host: str
    repository: str
    tag: str | None = None
    enroot: bool = False
    digest: str | None = None

    @property
    def image_repo(self) -> str:
        """The repository as written in configs (no host for Docker Hub), the key of watches and tags."""
        if self.enroot:
            return f"{self.host}#{self.repository}"
        return self.repository if self.host == "docker.io" else f"{self.host}/{self.repository}"

    @property
    def pullable(self) -> str:
        """The docker-style reference (``nvcr.io/nvidia/...:tag``) for display and registry links."""
        base = f"{self.host}/{self.repository}"
        return base + (f":{self.tag}" if self.tag else "") + (f"@{self.digest}" if self.digest else "")

    def with_tag(self, tag: str) -> str:
        return f"{self.image_repo}:{tag}"


def _looks_like_host(part: str) -> bool:
    return "." in part or ":" in part or part == "localhost"


def parse_image(ref: str) -> ImageRef:
    """Split an image reference the way docker does (a first part with ``.`` or ``:`` is a host).

    The enroot spelling ``registry#repo/path:tag`` names its registry before the ``#``; it is
    never read as a host called ``registry#repo``.
    """
    ref = ref.strip()
    if not ref or any(c.isspace() for c in ref):
        raise ValueError(
            f"image reference {ref!r} must be one token like vllm/vllm-openai-rocm:nightly-<sha>"
        )
    name, _, digest = ref.partition("@")
    host = "docker.io"
    enroot = "#" in name
    if enroot:
        host, _, name = name.partition("#")
        if not host or "/" in host or "#" in name or not _looks_like_host(host):
            raise ValueError(
                f"image reference {ref!r}: an enroot-style reference is registry#repo/path:tag "
                "with a registry host before the single '#', "
                "e.g. nvcr.io#nvidia/tensorrt-llm/release:1.2.0rc2"
            )
    else:
        first, slash, rest = name.partition("/")
        if slash and _looks_like_host(first):
            host, name = first, rest
    tag: str | None = None
    last_slash = name.rfind("/")
    colon = name.rfind(":")
    if colon > last_slash:
        name, tag = name[:colon], name[colon + 1 :]
    if host in DOCKER_HOSTS:
        host = "docker.io"
    if host == "docker.io" and "/" not in name and not enroot:
        name = f"library/{name}"
    if not name:
        raise ValueError(f"image reference {ref!r} has no repository")
    return ImageRef(host, name, tag or (digest or None), enroot, digest or None)


@dataclass(frozen=True)
class TagPattern:
    """A full-match regex over tag names with a named group ``sha`` (the upstream commit)."""

    pattern: str

    def __post_init__(self) -> None:
        compiled = re.compile(self.pattern)
        if "sha" not in compiled.groupindex:
            raise ValueError(f"tag pattern {self.pattern!r} needs a named group (?P<sha>...)")

    def commit_of(self, tag: str) -> str | None:
        m = re.fullmatch(self.pattern, tag)
        return m.group("sha") if m else None

    def select(self, tags: Iterable[str]) -> list[tuple[str, str]]:
        """(tag, commit) for every tag matching the pattern, in the given order."""
        out = []
        for tag in tags:
            sha = self.commit_of(tag)
            if sha:
                out.append((tag, sha))
        return out


def parse_link_next(header: str | None, base_url: str) -> str | None:
    """The ``rel="next"`` target of an RFC 5988 ``Link`` header, resolved against ``base_url``."""
    if not header:
        return None
    for part in header.split(","):
        m = re.match(r"\s*<([^>]*)>\s*;(.*)", part)
        if m and re.search(r'rel\s*=\s*"?next"?', m.group(2)):
            return urllib.parse.urljoin(base_url, m.group(1))
    return None


def parse_bearer_challenge(header: str) -> dict[str, str]:
    """``Bearer realm="...",service="...",scope="..."`` -> {realm, service, scope}."""
    scheme, _, params = header.strip().partition(" ")
    if scheme.lower() != "bearer":
        raise RegistryError(
            f"registry asked for {scheme or 'unknown'} auth; only Bearer tokens are supported"
        )
    return {k.lower(): v for k, v in re.findall(r'(\w+)="([^"]*)"', params)}


def _parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    text = value.replace("Z", "+00:00")
    # Docker Hub sends nanoseconds; Python takes at most microseconds.
    text = re.sub(r"(\.\d{6})\d+", r"\1", text)
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


# ---------------------------------------------------------------------------------- conditional cache


class EtagCache(Protocol):
    def get(self, key: str) -> tuple[str | None, str] | None: ...

    def put(self, key: str, etag: str | None, body: str) -> None: ...


@dataclass
class MemoryEtagCache:
    entries: dict[str, tuple[str | None, str]] = field(default_factory=dict)

    def get(self, key: str) -> tuple[str | None, str] | None:
        return self.entries.get(key)

    def put(self, key: str, etag: str | None, body: str) -> None:
        self.entries[key] = (etag, body)


class DbEtagCache:
    """ETags and bodies of registry GETs in the core ``http_cache`` table (key prefixed ``registry``)."""

    def __init__(self, session: Any) -> None:
        self._session = session

    def _key(self, key: str) -> str:
        return f"registry GET {key}"[:500]

    def get(self, key: str) -> tuple[str | None, str] | None:
        entry = self._session.get(HttpCacheEntry, self._key(key))
        return (entry.etag, entry.body) if entry is not None else None

    def put(self, key: str, etag: str | None, body: str) -> None:
        entry = self._session.get(HttpCacheEntry, self._key(key))
        if entry is None:
            entry = HttpCacheEntry(key=self._key(key), body=body)
            self._session.add(entry)
        entry.etag, entry.body, entry.fetched_at = etag, body, datetime.now(UTC)


# ---------------------------------------------------------------------------------- clients


@dataclass(frozen=True)
class RemoteTag:
    name: str
    digest: str | None = None
    pushed_at: datetime | None = None


@dataclass
class TagListing:
    tags: list[RemoteTag]
    changed: bool  # False when every page answered 304 (the cached list is current)
    requests: int = 0


class _Base:
    def __init__(
        self,
        base_url: str,
        *,
        http: httpx.Client | None = None,
        cache: EtagCache | None = None,
        page_size: int = 100,
        max_pages: int = MAX_PAGES,
        timeout: float = 15.0,
        egress: Egress | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._owns_http = http is None
        # Redirects are followed by hand (_get), within one origin only.
        self._http = http or httpx.Client(timeout=timeout, follow_redirects=False)
        self._egress = egress
        self._cache = cache or MemoryEtagCache()
        self.page_size = page_size
        self.max_pages = max_pages
        self.requests = 0

    def close(self) -> None:
        """Close the HTTP client this client made (one handed in belongs to the caller)."""
        if self._owns_http:
            self._http.close()

    @staticmethod
    def _json(url: str, resp: httpx.Response) -> Any:
        """The answer's JSON (nesting capped); an HTML error page, a truncated or too deep body is
        a registry error, not a crash."""
        try:
            return safejson.loads(resp.content, max_depth=MAX_JSON_DEPTH)
        except safejson.JSONLimitError as exc:
            raise RegistryError(f"GET {url}: answer refused: {exc}", resp.status_code) from exc
        except ValueError as exc:
            raise RegistryError(f"GET {url}: answer is not JSON: {exc}", resp.status_code) from exc

    def _get(self, url: str, headers: dict[str, str], auth: tuple[str, str] | None = None) -> httpx.Response:
        """GET through the egress checks, following redirects within the origin only."""
        for _hop in range(MAX_REDIRECTS + 1):
            resp = self._get_once(url, headers, auth)
            location = resp.headers.get("location")
            if resp.status_code not in (301, 302, 303, 307, 308) or not location:
                return resp
            target = urllib.parse.urljoin(url, location)
            rules = self._egress.rules if self._egress is not None else EgressRules.of([url])
            verdict = check_redirect(url, target, rules)
            if not verdict.ok:
                raise RegistryError(f"GET {url} answered {resp.status_code}: {verdict.why}", resp.status_code)
            url = target
        raise RegistryError(f"GET {url}: more than {MAX_REDIRECTS} redirects")

    def _get_once(
        self, url: str, headers: dict[str, str], auth: tuple[str, str] | None = None
    ) -> httpx.Response:
        """One GET, refusing a body over ``MAX_RESPONSE_BYTES`` before reading it whole."""
        refused = self._egress.refusal(url) if self._egress is not None else None
        if refused is not None:
            raise RegistryError(f"GET {url} refused: {refused}")
        self.requests += 1
        try:
            with self._http.stream("GET", url, headers=headers, auth=auth, follow_redirects=False) as resp:
                declared = resp.headers.get("content-length", "")
                if declared.isdigit() and int(declared) > MAX_RESPONSE_BYTES:
                    raise RegistryError(
                        f"GET {url}: {declared}-byte answer is over the {MAX_RESPONSE_BYTES} cap"
                    )
                body = bytearray()
                for chunk in resp.iter_bytes():
                    body += chunk
                    if len(body) > MAX_RESPONSE_BYTES:
                        raise RegistryError(f"GET {url}: answer is over the {MAX_RESPONSE_BYTES}-byte cap")
                # The body is already decoded: hand back a response without the transfer headers.
                kept = {k: v for k, v in resp.headers.items() if k.lower() not in _TRANSFER_HEADERS}
                return httpx.Response(
                    resp.status_code, headers=kept, content=bytes(body), request=resp.request
                )
        except httpx.HTTPError as exc:
            raise RegistryError(f"GET {url}: {exc.__class__.__name__}: {exc}") from exc

    def _next_page(self, current: str, link: str) -> str:
        """The next page's URL, only on the registry's own origin: a tag list must not be able to
        send the bot (and its credentials) to another host."""
        target = urllib.parse.urljoin(current, link)
        try:
            same = origin_of(current) == origin_of(target)
        except EgressRefused:
            same = False
        if not same:
            raise RegistryError(f"GET {current}: the next-page link points to another origin: {target}")
        return target

    def _complete(self, pending: str | None) -> None:
        """A listing cut off at ``max_pages`` is an error: a partial list marks tags vanished."""
        if pending:
            raise RegistryError(f"tag listing has more than {self.max_pages} pages; next was {pending}")

    def _conditional(self, url: str, headers: dict[str, str]) -> tuple[Any, bool, httpx.Response]:
        cached = self._cache.get(url)
        send = dict(headers)
        if cached is not None and cached[0]:
            send["If-None-Match"] = cached[0]
        resp = self._get(url, send)
        if resp.status_code == 304 and cached is not None:
            return json.loads(cached[1]), False, resp
        return None, True, resp

    def _fail(self, url: str, resp: httpx.Response) -> RegistryError:
        detail = ""
        try:
            body = resp.json()
            errors = body.get("errors") if isinstance(body, dict) else None
            if errors:
                detail = "; ".join(
                    f"{e.get('code')}: {e.get('message')}" for e in errors if isinstance(e, dict)
                )
            elif isinstance(body, dict):
                detail = str(body.get("message") or body.get("detail") or "")
        except ValueError:
            detail = resp.text[:200]
        cls = RegistryNotFound if resp.status_code == 404 else RegistryError
        return cls(
            f"GET {url} answered {resp.status_code}" + (f": {detail}" if detail else ""), resp.status_code
        )


class DockerHubClient(_Base):
    """Docker Hub's tag API: ``/v2/namespaces/{ns}/repositories/{repo}/tags``, page-number pagination."""

    def __init__(self, base_url: str = DOCKERHUB_API, **kwargs: Any) -> None:
        super().__init__(base_url, **kwargs)

    def list_tags(self, repository: str) -> TagListing:
        ns, _, repo = repository.partition("/")
        if not repo:
            ns, repo = "library", ns
        url: str | None = (
            f"{self.base_url}/v2/namespaces/{urllib.parse.quote(ns)}/repositories/"
            f"{urllib.parse.quote(repo)}/tags?page_size={self.page_size}"
        )
        tags: list[RemoteTag] = []
        changed = False
        start = self.requests
        pages = 0
        while url and pages < self.max_pages:
            pages += 1
            body, page_changed, resp = self._conditional(url, {"Accept": "application/json"})
            if page_changed:
                if resp.status_code != 200:
                    raise self._fail(url, resp)
                body = self._json(url, resp)
                self._cache.put(url, resp.headers.get("etag"), json.dumps(body))
                changed = True
            if not isinstance(body, dict):
                raise RegistryError(
                    f"GET {url}: expected a JSON object with results[], got {type(body).__name__}"
                )
            results = body.get("results")
            if not isinstance(results, list):
                raise RegistryError(f"GET {url}: malformed tag listing: results is not a list")
            for item in results:
                if not isinstance(item, dict) or not isinstance(item.get("name"), str):
                    # Never skip: a listing that lost its names would mark known tags vanished.
                    raise RegistryError(f"GET {url}: malformed tag listing: an item has no name")
                digest = item.get("digest")
                if not digest:
                    images = item.get("images")
                    if isinstance(images, list) and images and isinstance(images[0], dict):
                        digest = images[0].get("digest")
                pushed = _parse_time(item.get("tag_last_pushed")) or _parse_time(item.get("last_updated"))
                tags.append(RemoteTag(item["name"], digest if isinstance(digest, str) else None, pushed))
            nxt = body.get("next")
            url = self._next_page(url, nxt) if isinstance(nxt, str) and nxt else None
        self._complete(url)
        return TagListing(tags, changed, self.requests - start)


class OciClient(_Base):
    """OCI distribution ``/v2/<name>/tags/list`` with ``n``/``last`` and ``Link`` pagination.

    Answers a ``401`` bearer challenge by fetching an (anonymous) token from the realm it names,
    as ghcr.io and Docker's registry require even for public images.
    """

    def __init__(
        self, base_url: str, *, username: str | None = None, password: str | None = None, **kwargs: Any
    ) -> None:
        super().__init__(base_url, **kwargs)
        self._tokens: dict[str, str] = {}
        self._basic = (username, password) if username and password else None

    def _token(self, challenge: dict[str, str], repository: str) -> str:
        realm = challenge.get("realm")
        if not realm:
            raise RegistryError("registry bearer challenge names no realm")
        scope = challenge.get("scope") or f"repository:{repository}:pull"
        params = {"scope": scope}
        if challenge.get("service"):
            params["service"] = challenge["service"]
        url = urllib.parse.urljoin(self.base_url + "/", realm) + "?" + urllib.parse.urlencode(params)
        # The realm is where credentials go: an allowed origin (or, with no allow-list, this one).
        rules = self._egress.rules if self._egress is not None else EgressRules.of([self.base_url])
        verdict = rules.check_url(url)
        if not verdict.ok:
            raise RegistryError(f"registry bearer realm refused: {verdict.why}")
        resp = self._get(url, {}, auth=self._basic)
        if resp.status_code != 200:
            raise self._fail(url, resp)
        body = self._json(url, resp)
        token = body.get("token") or body.get("access_token") if isinstance(body, dict) else None
        if not isinstance(token, str) or not token:
            raise RegistryError(f"GET {url}: token response has no token")
        return token

    def list_tags(self, repository: str) -> TagListing:
        url: str | None = f"{self.base_url}/v2/{repository}/tags/list?n={self.page_size}"
        names: list[str] = []
        changed = False
        start = self.requests
        pages = 0
        while url and pages < self.max_pages:
            pages += 1
            headers = {"Accept": "application/json"}
            if repository in self._tokens:
                headers["Authorization"] = f"Bearer {self._tokens[repository]}"
            body, page_changed, resp = self._conditional(url, headers)
            if page_changed and resp.status_code == 401 and "Authorization" not in headers:
                challenge = parse_bearer_challenge(resp.headers.get("www-authenticate", ""))
                self._tokens[repository] = self._token(challenge, repository)
                headers["Authorization"] = f"Bearer {self._tokens[repository]}"
                body, page_changed, resp = self._conditional(url, headers)
            if page_changed:
                if resp.status_code != 200:
                    raise self._fail(url, resp)
                body = self._json(url, resp)
                link = resp.headers.get("link")
                self._cache.put(url, resp.headers.get("etag"), json.dumps({"body": body, "link": link}))
                changed = True
            else:
                body, link = body["body"], body.get("link")
            raw_tags = body.get("tags") if isinstance(body, dict) else None
            if not isinstance(raw_tags, list) or not all(isinstance(t, str) for t in raw_tags):
                # Never an empty list: that would mark every known tag vanished.
                raise RegistryError(
                    f"GET {url}: malformed tag listing: expected a JSON object with tags[] of strings"
                )
            page = list(raw_tags)
            names.extend(page)
            nxt = parse_link_next(link, url)
            # Without Link the spec says the list is complete; a registry that ignores n and never
            # sends Link also ends here.
            url = self._next_page(url, nxt) if nxt and page else None
        self._complete(url)
        return TagListing([RemoteTag(n) for n in names], changed, self.requests - start)


class GhcrClient(OciClient):
    def __init__(self, base_url: str = GHCR_URL, **kwargs: Any) -> None:
        super().__init__(base_url, **kwargs)


RegistryClient = DockerHubClient | OciClient


def _default_base(image: ImageRef, kind: str) -> str:
    if kind == "dockerhub":
        return DOCKERHUB_API
    return GHCR_URL if kind == "ghcr" else f"https://{image.host}"


def client_for(
    image: ImageRef,
    *,
    kind: str | None = None,
    url: str | None = None,
    overrides: dict[str, str] | None = None,
    http: httpx.Client | None = None,
    cache: EtagCache | None = None,
    trusted_hosts: Iterable[str] = (),
    configured_urls: Iterable[str] = (),
    resolve: Callable[[str, int], list[str]] = resolve_host,
) -> RegistryClient:
    """The client for an image: ``kind``/``url`` from the bot config win; else by host.

    ``overrides`` maps a host (``docker.io``, ``ghcr.io``, ...) to a base URL (the simulator, a
    mirror); the operator's, so their origins may be internal addresses. Every request the client
    makes is checked against an allow-list (``app.core.egress``): the overrides, ``configured_urls``
    (``images:`` urls of the default branch's bot config) and the registries of
    ``trusted_hosts`` (image hosts the default branch pins or lists). An image on any other host is
    refused before a single connection.
    """
    overrides = overrides or {}
    kind = kind or (
        "dockerhub" if image.host == "docker.io" else "ghcr" if image.host == "ghcr.io" else "oci"
    )
    base = url or overrides.get(image.host) or _default_base(image, kind)
    trusted = {h.lower() for h in trusted_hosts}
    if url is None and image.host not in overrides and image.host.lower() not in trusted:
        raise RegistryError(
            f"registry {image.host} of {image.image_repo} is not one the default branch pins or lists "
            "under `images:` in .github/sweepbot.yml; not contacted"
        )
    allowed = [*configured_urls, *(f"https://{h}" for h in trusted)]
    if "docker.io" in trusted:
        allowed.append(DOCKERHUB_API)
    if "ghcr.io" in trusted:
        allowed.append(GHCR_URL)
    if url is not None:
        allowed.append(url)
    try:
        rules = EgressRules.of(allowed, operator=overrides.values())
    except EgressRefused as exc:
        raise RegistryError(f"registry allow-list: {exc}") from exc
    egress = Egress(rules, resolve)
    if kind == "dockerhub":
        return DockerHubClient(base, http=http, cache=cache, egress=egress)
    if kind == "ghcr":
        return GhcrClient(base, http=http, cache=cache, egress=egress)
    return OciClient(base, http=http, cache=cache, egress=egress)


def registry_overrides() -> dict[str, str]:
    """Host -> base URL overrides from the settings (``SWEEPBOT_REGISTRY_URLS``)."""
    return dict(get_settings().registry_urls)
