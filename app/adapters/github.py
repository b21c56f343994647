"""The one gateway to GitHub.

PyGithub does the HTTP work (auth — token or GitHub App installation —, base URL, retries of
idempotent calls on 5xx and secondary rate limits). This module adds what the bot needs around it:

- plain ``dict`` results (the REST JSON), so callers and their fakes stay tiny;
- conditional GETs with a persistent ETag cache (a 304 costs no rate limit);
- precise exceptions: ``NotFound``, ``Conflict`` (422/409), ``TransientError`` (5xx, rate limits:
  retry the task later, never drop the work);
- an audit entry and a metric for every write.

Writes are not retried blindly inside a call (a POST that timed out may have happened); callers
make them idempotent by looking before creating, and the task is retried.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import json
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, NoReturn, Protocol

import httpx
import structlog
from github import Auth, Github, GithubException
from github.GithubException import RateLimitExceededExceedsMaxWait
from github.Requester import Requester
from sqlalchemy.orm import Session
from urllib3.util.retry import Retry

from app.adapters.ghslots import LocalSlots, Slots, SlotTimeout, make_slots
from app.core import budget, consistency, ratelimit
from app.core.installations import InstallationMap, TokenCache, parse_expires_at, repo_of_path
from app.core.redelivery import next_cursor
from app.core.roles import effective_role
from app.core.routing import TransientError
from app.db import serialized
from app.metrics import GITHUB_CALLS
from app.models import HttpCacheEntry
from app.settings import Settings, get_settings
from app.store.audit import record_outside

log = structlog.get_logger(__name__)

MAX_ARTIFACT_BYTES = 64 * 1024 * 1024
MAX_FILE_BYTES = 10 * 1024 * 1024  # master configs are a few hundred KB


_download_lock = threading.Lock()
_downloads: httpx.Client | None = None


def _download_client() -> httpx.Client:
    """One client for artifact archives per process: a fresh one per download loaded the CA bundle
    each time (~0.1 s of CPU per artifact). No token is ever set on it (the URL is pre-signed)."""
    global _downloads
    with _download_lock:
        if _downloads is None:
            _downloads = httpx.Client(timeout=60, follow_redirects=True)
        return _downloads


class GitHubError(Exception):
    def __init__(self, status: int, message: str, data: Any = None) -> None:
        super().__init__(f"GitHub answered {status}: {message}")
        self.status = status
        self.data = data


class NotFound(GitHubError):
    pass


class Conflict(GitHubError):
    """422/409: the request was understood and refused (e.g. a non-fast-forward ref update)."""


class Forbidden(GitHubError):
    """403 that is no rate limit: the credentials lack a permission; asking again is refused again."""


@dataclass
class Conditional:
    data: Any
    changed: bool  # False when the server answered 304 and ``data`` came from the cache
    etag: str | None


AuditHook = Callable[[str, str, dict[str, Any]], None]


def _seconds(value: Any) -> float | None:
    """``Retry-After`` in seconds; ``None`` when absent or an HTTP date (then backoff decides)."""
    try:
        return float(value) if value else None
    except (TypeError, ValueError):
        return None


def _quote(part: str) -> str:
    return urllib.parse.quote(part, safe="")


def _is_pull(issue: dict[str, Any]) -> bool:
    """Whether an entry of an issue list is a pull request. GitHub marks those with
    ``pull_request`` links; its recorded 2012 answers carry ``pull_request`` with null links on
    every plain issue too, so the key alone does not make a pull request."""
    links = issue.get("pull_request")
    return isinstance(links, dict) and any(links.get(k) for k in ("url", "html_url"))


class Unauthorized(GitHubError):
    """401: the credentials were refused."""


def raise_for(op: str, status: int, headers: dict[str, Any], data: Any) -> NoReturn:
    """Turn an error answer into the precise exception (rate limits read as GitHub documents them)."""
    message = data.get("message", "") if isinstance(data, dict) else str(data)[:200]
    limit = ratelimit.classify(status, headers, message, time.time())
    if limit is not None:
        log.warning(
            "github_rate_limited", operation=op, kind=limit.kind, wait=round(limit.wait), reason=limit.reason
        )
        raise TransientError(
            f"{op}: {limit.kind} rate limit ({status}, {limit.reason}): {message}",
            retry_after=limit.wait,
            rate_limited=True,
            exponential=limit.exponential,
        )
    if status >= 500:
        raise TransientError(f"{op}: GitHub answered {status}: {message}")
    if status == 401:
        raise Unauthorized(status, f"{op}: {message or 'bad credentials'}", data)
    if status == 403:
        raise Forbidden(status, f"{op}: {message or 'forbidden'}", data)
    if status == 404:
        raise NotFound(status, f"{op}: {message or 'not found'}", data)
    if status in (409, 422):
        raise Conflict(status, f"{op}: {message}", data)
    raise GitHubError(status, f"{op}: {message}", data)


def request(
    requester: Any,
    op: str,
    verb: str,
    path: str,
    *,
    params: dict[str, Any] | None = None,
    body: Any = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, Any], Any]:
    """One REST call through a PyGithub requester: counted, decoded, errors classified."""
    try:
        status, resp_headers, output = requester.requestJson(
            verb, path, parameters=params, headers=headers, input=body
        )
    except RateLimitExceededExceedsMaxWait as exc:  # only from a retry layer that would wait too long
        GITHUB_CALLS.labels(operation=op, status=str(exc.status)).inc()
        raise TransientError(
            f"{op}: rate limited ({exc.status})", retry_after=exc.wait, rate_limited=True
        ) from exc
    except GithubException as exc:
        # A retry layer may raise for a 403 that is not a rate limit ("Resource not accessible by
        # integration"): classify it like any answer, so a permanent refusal is not retried.
        GITHUB_CALLS.labels(operation=op, status=str(exc.status)).inc()
        raise_for(op, exc.status, dict(exc.headers or {}), exc.data)
    except OSError as exc:  # connection refused, reset, timeout, retries exhausted on 5xx
        GITHUB_CALLS.labels(operation=op, status="error").inc()
        raise TransientError(f"{op}: {exc.__class__.__name__}: {exc}") from exc
    GITHUB_CALLS.labels(operation=op, status=str(status)).inc()
    data: Any = None
    if output:
        try:
            data = json.loads(output)
        except ValueError:
            data = output
    if status >= 400:
        raise_for(op, status, resp_headers, data)
    return status, resp_headers, data


class Credentials(Protocol):
    def route(self, path: str, installation_hint: int | None) -> tuple[str, Any]: ...

    def slot(self, key: str) -> contextlib.AbstractContextManager[Any]: ...

    def refused(self, key: str) -> None: ...


class FixedCredentials:
    """One requester for every call (a token, or a requester a test built)."""

    def __init__(self, requester: Any, slots: Slots | None = None) -> None:
        self._requester = requester
        self._slots = slots or LocalSlots(1_000_000)

    def route(self, path: str, installation_hint: int | None) -> tuple[str, Any]:
        return "token", self._requester

    def slot(self, key: str) -> contextlib.AbstractContextManager[Any]:
        return self._slots(key)

    def refused(self, key: str) -> None:
        return None


class AppCredentials:
    """A GitHub App: the JWT for ``/app/...`` calls, an installation token for everything else.

    The installation acting for a call is the delivery's (``installation_hint``) for its own
    repository, else the repository's installation (looked up once), else the default one.
    Tokens are cached per installation until shortly before they expire (``TokenCache``).
    """

    def __init__(self, settings: Settings, key: str) -> None:
        assert settings.github_app_id is not None
        self._settings = settings
        self._jwt = _github(settings, Auth.AppAuth(settings.github_app_id, key)).requester
        self.tokens = TokenCache(settings.github_token_refresh_margin_seconds)
        self.repos = InstallationMap()
        self._requesters: dict[int, tuple[str, Any]] = {}
        self._default: int | None = settings.github_installation_id
        self._guard = threading.Lock()
        self._slots = make_slots(settings, f"app:{settings.github_app_id}")

    # -- which installation
    def default_installation(self) -> int:
        if self._default is None:
            with self.slot("app"):
                _, _, data = request(self._jwt, "apps/list-installations", "GET", "/app/installations")
            ids = [int(i["id"]) for i in data or [] if isinstance(i, dict) and i.get("id")]
            if not ids:
                raise GitHubError(404, "the GitHub App has no installation: install it on the repository")
            self._default = ids[0]
        return self._default

    def installation_for_repo(self, repo: str) -> int | None:
        known, inst = self.repos.known(repo)
        if known:
            return inst
        try:
            with self.slot("app"):
                _, _, data = request(
                    self._jwt, "apps/get-repo-installation", "GET", f"/repos/{repo}/installation"
                )
            inst = int(data["id"])
        except NotFound:
            inst = None  # not installed there (an upstream repo): the default token reads it
        self.repos.learn(repo, inst)
        log.info("installation_resolved", repo=repo, installation_id=inst)
        return inst

    def route(self, path: str, installation_hint: int | None) -> tuple[str, Any]:
        if path == "/app" or path.startswith("/app/"):
            return "app", self._jwt
        repo = repo_of_path(path)
        inst: int | None = None
        if repo is not None:
            known, inst = self.repos.known(repo)
            if not known:
                inst = self.installation_for_repo(repo)
        if inst is None:
            inst = installation_hint if installation_hint is not None else self.default_installation()
        return f"inst:{inst}", self._requester(inst)

    def _requester(self, installation_id: int) -> Any:
        token = self.tokens.get(installation_id, time.time(), self._mint)
        with self._guard:
            held = self._requesters.get(installation_id)
            if held is None or held[0] != token:
                held = (token, _github(self._settings, Auth.Token(token)).requester)
                self._requesters[installation_id] = held
            return held[1]

    def _mint(self, installation_id: int) -> tuple[str, float | None]:
        with self.slot("app"):
            _, _, data = request(
                self._jwt,
                "apps/create-installation-access-token",
                "POST",
                f"/app/installations/{installation_id}/access_tokens",
            )
        return str(data["token"]), parse_expires_at(data.get("expires_at"))

    def slot(self, key: str) -> contextlib.AbstractContextManager[Any]:
        return self._slots(key)

    def refused(self, key: str) -> None:
        if key.startswith("inst:"):
            self.tokens.forget(int(key.removeprefix("inst:")))

    def learn(self, repo: str | None, installation_id: int | None) -> None:
        """A delivery said which installation owns ``repo``: no look-up needed for it later."""
        if repo and installation_id is not None:
            self.repos.learn(repo, installation_id)


class GitHubGateway:
    def __init__(
        self,
        requester: Requester | Credentials,
        *,
        cache_session: Session | None = None,
        audit: AuditHook | None = None,
        installation_id: int | None = None,
        consistency_delays: tuple[float, ...] = consistency.DELAYS,
    ) -> None:
        self._credentials: Credentials = (
            requester if hasattr(requester, "route") else FixedCredentials(requester)  # type: ignore[assignment]
        )
        self._installation_hint = installation_id
        self._cache_session = cache_session
        self._audit = audit
        self._consistency_delays = consistency_delays
        self._written: set[tuple[str, str]] = set()  # (repo, ref or sha) this gateway just wrote
        # The primary rate limit as the last answer's X-RateLimit-* headers told it (app.core.budget).
        self.last_rate: budget.RateSnapshot | None = None

    # ------------------------------------------------------------------ plumbing

    def _call(
        self,
        op: str,
        verb: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        body: Any = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, dict[str, Any], Any]:
        try:
            key, requester = self._credentials.route(path, self._installation_hint)
        except SlotTimeout as exc:  # the App's own calls (installation look-up, minting) queued too long
            raise TransientError(f"{op}: {exc}") from exc
        try:
            with self._credentials.slot(key):
                answer = request(requester, op, verb, path, params=params, body=body, headers=headers)
                self.last_rate = budget.parse_rate_headers(answer[1], time.time()) or self.last_rate
                return answer
        except SlotTimeout as exc:
            raise TransientError(f"{op}: {exc}") from exc
        except Unauthorized as exc:
            if not key.startswith("inst:"):
                raise  # a configured token that is wrong stays wrong: say so, do not retry
            # An installation token GitHub no longer accepts (revoked, clock skew): mint anew
            # on the retry instead of failing the work.
            self._credentials.refused(key)
            raise TransientError(f"{op}: credentials refused (401); retrying with a new token") from exc

    @staticmethod
    def _raise(op: str, status: int, headers: dict[str, Any], data: Any) -> NoReturn:
        raise_for(op, status, headers, data)

    def _eventually(self, op: str, call: Callable[[], Any]) -> Any:
        """``call``, retried a few times after a short delay while GitHub may not yet show what
        this work just wrote (a 404/422 that ``consistency.is_visibility_lag`` recognises)."""
        delays = list(self._consistency_delays)
        while True:
            try:
                return call()
            except (NotFound, Conflict) as exc:
                if not delays or not consistency.is_visibility_lag(op, exc.status, exc.data):
                    raise
                wait = delays.pop(0)
                log.info("github_visibility_lag", operation=op, status=exc.status, retry_in=wait)
                time.sleep(wait)

    def _get(self, op: str, path: str, params: dict[str, Any] | None = None) -> Any:
        return self._call(op, "GET", path, params=params)[2]

    def _write(self, op: str, verb: str, path: str, body: Any = None, target: str = "") -> Any:
        status, _headers, data = self._call(op, verb, path, body=body)
        if self._audit is not None:
            detail: dict[str, Any] = {"status": status, "path": path}
            if isinstance(data, dict):
                for key in ("id", "number", "sha", "html_url", "ref"):
                    if key in data:
                        detail[key] = data[key]
            self._audit(f"github.{op}", target or path, detail)
        return data

    def _paginate(
        self,
        op: str,
        path: str,
        params: dict[str, Any] | None = None,
        key: str | None = None,
        limit: int = 2000,
    ) -> Iterator[dict[str, Any]]:
        params = dict(params or {})
        params.setdefault("per_page", 100)
        page = 1
        seen = 0
        while True:
            params["page"] = page
            data = self._get(op, path, params)
            items = data.get(key, []) if key and isinstance(data, dict) else data
            if not items:
                return
            for item in items:
                yield item
                seen += 1
                if seen >= limit:
                    return
            if len(items) < params["per_page"]:
                return
            page += 1

    def get_conditional(self, op: str, path: str, params: dict[str, Any] | None = None) -> Conditional:
        """GET with ``If-None-Match`` from the persistent cache; a 304 is free of rate limit."""
        key = f"GET {path}?{urllib.parse.urlencode(sorted((params or {}).items()))}"[:500]
        cached = self._cache_session.get(HttpCacheEntry, key) if self._cache_session is not None else None
        headers = {"If-None-Match": cached.etag} if cached is not None and cached.etag else {}
        status, resp_headers, data = self._call(op, "GET", path, params=params, headers=headers)
        if status == 304 and cached is not None:
            return Conditional(json.loads(cached.body), False, cached.etag)
        etag = {k.lower(): v for k, v in resp_headers.items()}.get("etag")
        if self._cache_session is not None:
            if cached is None:
                cached = HttpCacheEntry(key=key, body="")
                self._cache_session.add(cached)
            cached.etag = etag
            cached.body = json.dumps(data)
            cached.fetched_at = datetime.now(UTC)
        return Conditional(data, True, etag)

    # ------------------------------------------------------------------ repos and contents

    def get_repo(self, repo: str) -> dict[str, Any]:
        return self._get("repos/get", f"/repos/{repo}")

    def get_file(self, repo: str, path: str, ref: str | None = None) -> tuple[str, str] | None:
        """Text and blob sha of a file at ``ref``, or ``None`` when it does not exist."""
        params = {"ref": ref} if ref else None
        try:
            data = self._get(
                "repos/get-content", f"/repos/{repo}/contents/{urllib.parse.quote(path)}", params
            )
        except NotFound:
            return None
        if not isinstance(data, dict) or data.get("type") != "file":
            return None
        if int(data.get("size") or 0) > MAX_FILE_BYTES:
            raise GitHubError(
                413, f"{repo}:{path} is {data['size']} bytes, over the {MAX_FILE_BYTES}-byte cap"
            )
        encoded = data.get("content") or ""
        if data.get("encoding") == "none" or (not encoded and int(data.get("size") or 0) > 0):
            # Files over 1 MB come without content from the contents API: read the blob instead.
            blob = self._get("git/get-blob", f"/repos/{repo}/git/blobs/{data['sha']}")
            encoded = (blob.get("content") or "") if isinstance(blob, dict) else ""
        try:
            content = base64.b64decode(encoded).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError) as exc:
            raise GitHubError(
                502, f"{repo}:{path}: the content GitHub sent is not base64 UTF-8 text: {exc}"
            ) from exc
        return content, data["sha"]

    def list_dir(self, repo: str, path: str, ref: str | None = None) -> list[dict[str, Any]]:
        params = {"ref": ref} if ref else None
        try:
            data = self._get(
                "repos/get-content", f"/repos/{repo}/contents/{urllib.parse.quote(path)}", params
            )
        except NotFound:
            return []
        return data if isinstance(data, list) else []

    def compare(self, repo: str, base: str, head: str) -> dict[str, Any]:
        """One unpaged compare: its status and counts; ``commits`` holds at most 250 of them."""
        return self._get("repos/compare-commits", f"/repos/{repo}/compare/{_quote(base)}...{_quote(head)}")

    def compare_range(self, repo: str, base: str, head: str, *, max_commits: int = 1000) -> dict[str, Any]:
        """The compare answer with every commit of the range (oldest first), read page by page.

        Unpaged, GitHub lists at most 250 commits of a comparison; paged (``per_page``/``page``)
        it lists them all, the files on the first page only. At most ``max_commits`` are read:
        ``total_commits`` greater than ``len(commits)`` means the list was cut short."""
        path = f"/repos/{repo}/compare/{_quote(base)}...{_quote(head)}"
        per_page = min(100, max(1, max_commits))
        first: dict[str, Any] = {}
        commits: list[dict[str, Any]] = []
        page = 1
        while len(commits) < max_commits:
            data = self._get("repos/compare-commits", path, {"per_page": per_page, "page": page})
            if not isinstance(data, dict):
                break
            first = first or data
            got = [c for c in data.get("commits") or [] if isinstance(c, dict)]
            commits += got[: max_commits - len(commits)]
            total = int(data.get("total_commits") or 0)
            if len(got) < per_page or len(commits) >= total:
                break
            page += 1
        return {**first, "commits": commits}

    def commit_pulls(self, repo: str, sha: str) -> list[dict[str, Any]]:
        """PRs associated with a commit: on the default branch, the merged PR that introduced it;
        elsewhere, open and merged PRs that contain it."""
        data = self._get(
            "repos/list-pull-requests-associated-with-commit",
            f"/repos/{repo}/commits/{_quote(sha)}/pulls",
            {"per_page": 100},
        )
        return [p for p in data if isinstance(p, dict)] if isinstance(data, list) else []

    # ------------------------------------------------------------------ git data

    def get_ref(self, repo: str, ref: str) -> dict[str, Any] | None:
        """``ref`` like ``heads/main``; ``None`` when it does not exist."""

        def read() -> Any:
            return self._get("git/get-ref", f"/repos/{repo}/git/ref/{ref}")

        try:
            if (repo, ref) in self._written:  # a read after our own write may lag behind it
                return self._eventually("git/get-ref", read)
            return read()
        except NotFound:
            return None

    def create_ref(self, repo: str, ref: str, sha: str) -> dict[str, Any]:
        data = self._eventually(
            "git/create-ref",
            lambda: self._write(
                "git/create-ref",
                "POST",
                f"/repos/{repo}/git/refs",
                {"ref": f"refs/{ref}", "sha": sha},
                target=f"{repo}:{ref}",
            ),
        )
        self._written.add((repo, ref))
        return data  # type: ignore[no-any-return]

    def update_ref(self, repo: str, ref: str, sha: str, *, force: bool = False) -> dict[str, Any]:
        data = self._eventually(
            "git/update-ref",
            lambda: self._write(
                "git/update-ref",
                "PATCH",
                f"/repos/{repo}/git/refs/{ref}",
                {"sha": sha, "force": force},
                target=f"{repo}:{ref}",
            ),
        )
        self._written.add((repo, ref))
        return data  # type: ignore[no-any-return]

    def delete_ref(self, repo: str, ref: str) -> None:
        """``ref`` like ``heads/sweepbot/canary/...``; a ref already gone is not an error."""
        try:
            self._write("git/delete-ref", "DELETE", f"/repos/{repo}/git/refs/{ref}", target=f"{repo}:{ref}")
        except NotFound:
            return

    def get_commit(self, repo: str, sha: str) -> dict[str, Any]:
        def read() -> Any:
            return self._get("git/get-commit", f"/repos/{repo}/git/commits/{sha}")

        return self._eventually("git/get-commit", read) if (repo, sha) in self._written else read()  # type: ignore[no-any-return]

    def resolve_commit(self, repo: str, ref: str) -> str | None:
        """The full SHA ``ref`` (a short SHA, branch or tag) names in ``repo``; None when GitHub knows
        no such commit or the short SHA is ambiguous (422). Commits never change: callers cache it."""
        try:
            data = self._get("repos/get-commit", f"/repos/{repo}/commits/{ref}")
        except NotFound:
            return None
        except GitHubError as exc:
            if exc.status == 422:
                return None
            raise
        sha = data.get("sha") if isinstance(data, dict) else None
        return str(sha) if sha else None

    def create_blob(self, repo: str, text: str) -> str:
        data = self._write(
            "git/create-blob",
            "POST",
            f"/repos/{repo}/git/blobs",
            {"content": text, "encoding": "utf-8"},
            target=repo,
        )
        return str(data["sha"])

    def create_tree(self, repo: str, base_tree: str, files: dict[str, str]) -> str:
        """``files``: path -> blob sha (mode 100644)."""
        tree = [{"path": p, "mode": "100644", "type": "blob", "sha": s} for p, s in sorted(files.items())]
        data = self._eventually(
            "git/create-tree",
            lambda: self._write(
                "git/create-tree",
                "POST",
                f"/repos/{repo}/git/trees",
                {"base_tree": base_tree, "tree": tree},
                target=repo,
            ),
        )
        return str(data["sha"])

    def create_commit(self, repo: str, message: str, tree: str, parents: list[str]) -> dict[str, Any]:
        data = self._eventually(
            "git/create-commit",
            lambda: self._write(
                "git/create-commit",
                "POST",
                f"/repos/{repo}/git/commits",
                {"message": message, "tree": tree, "parents": parents},
                target=repo,
            ),
        )
        if isinstance(data, dict) and data.get("sha"):
            self._written.add((repo, str(data["sha"])))
        return data  # type: ignore[no-any-return]

    # ------------------------------------------------------------------ pulls

    def get_pull(self, repo: str, number: int) -> dict[str, Any]:
        return self._get("pulls/get", f"/repos/{repo}/pulls/{number}")

    def get_pull_conditional(self, repo: str, number: int) -> Conditional:
        return self.get_conditional("pulls/get", f"/repos/{repo}/pulls/{number}")

    def list_pull_files(self, repo: str, number: int) -> list[dict[str, Any]]:
        """Changed files of a PR (``filename``, ``status``, ``previous_filename``...), up to GitHub's 3000."""
        return list(self._paginate("pulls/list-files", f"/repos/{repo}/pulls/{number}/files", limit=3000))

    def list_pulls(
        self, repo: str, *, state: str = "open", head: str | None = None, base: str | None = None
    ) -> list[dict[str, Any]]:
        params: dict[str, Any] = {"state": state}
        if head:
            params["head"] = head
        if base:
            params["base"] = base
        return list(self._paginate("pulls/list", f"/repos/{repo}/pulls", params))

    def create_pull(self, repo: str, *, title: str, head: str, base: str, body: str) -> dict[str, Any]:
        # Right after the head branch was pushed GitHub may answer "head invalid": retry briefly.
        return self._eventually(  # type: ignore[no-any-return]
            "pulls/create",
            lambda: self._write(
                "pulls/create",
                "POST",
                f"/repos/{repo}/pulls",
                {"title": title, "head": head, "base": base, "body": body},
                target=repo,
            ),
        )

    def update_pull(self, repo: str, number: int, **fields: Any) -> dict[str, Any]:
        return self._write(
            "pulls/update", "PATCH", f"/repos/{repo}/pulls/{number}", fields, target=f"{repo}#{number}"
        )

    # ------------------------------------------------------------------ issues

    def get_issue(self, repo: str, number: int) -> dict[str, Any]:
        return self._get("issues/get", f"/repos/{repo}/issues/{number}")

    def create_issue(
        self, repo: str, *, title: str, body: str, labels: list[str] | None = None
    ) -> dict[str, Any]:
        payload: dict[str, Any] = {"title": title, "body": body}
        if labels:
            payload["labels"] = labels
        return self._write("issues/create", "POST", f"/repos/{repo}/issues", payload, target=repo)

    def update_issue(self, repo: str, number: int, **fields: Any) -> dict[str, Any]:
        return self._write(
            "issues/update", "PATCH", f"/repos/{repo}/issues/{number}", fields, target=f"{repo}#{number}"
        )

    def find_issue(self, repo: str, marker: str, *, creator: str | None = None) -> dict[str, Any] | None:
        """The first issue (open or closed, not a pull request) whose body holds ``marker``."""
        params: dict[str, Any] = {"state": "all"}
        if creator:
            params["creator"] = creator
        for issue in self._paginate("issues/list-for-repo", f"/repos/{repo}/issues", params, limit=1000):
            if not _is_pull(issue) and marker in (issue.get("body") or ""):
                return issue
        return None

    def upsert_issue(
        self, repo: str, marker: str, *, title: str, body: str, number: int | None = None
    ) -> dict[str, Any]:
        """Create the issue holding ``marker`` once, then edit it in place (look before create)."""
        if marker not in body:
            body = f"{marker}\n{body}"
        with serialized(self._cache_session, f"issue:{repo}:{marker}"):
            existing = self.get_issue(repo, number) if number else self.find_issue(repo, marker)
            if existing is not None and marker not in (existing.get("body") or ""):
                existing = self.find_issue(repo, marker)
            if existing is None:
                return self.create_issue(repo, title=title, body=body)
            if existing.get("body") == body and existing.get("title") == title:
                return existing
            return self.update_issue(repo, int(existing["number"]), title=title, body=body)

    # ------------------------------------------------------------------ comments and reactions

    def list_comments(self, repo: str, number: int) -> list[dict[str, Any]]:
        return list(self._paginate("issues/list-comments", f"/repos/{repo}/issues/{number}/comments"))

    def create_comment(self, repo: str, number: int, body: str) -> dict[str, Any]:
        return self._write(
            "issues/create-comment",
            "POST",
            f"/repos/{repo}/issues/{number}/comments",
            {"body": body},
            target=f"{repo}#{number}",
        )

    def update_comment(self, repo: str, comment_id: int, body: str) -> dict[str, Any]:
        return self._write(
            "issues/update-comment",
            "PATCH",
            f"/repos/{repo}/issues/comments/{comment_id}",
            {"body": body},
            target=f"{repo} comment {comment_id}",
        )

    def find_comment(self, repo: str, number: int, marker: str) -> dict[str, Any] | None:
        """The first comment holding ``marker`` (a hidden HTML comment) — the sticky-comment lookup."""
        for comment in self.list_comments(repo, number):
            if marker in (comment.get("body") or ""):
                return comment
        return None

    def upsert_comment(self, repo: str, number: int, marker: str, body: str) -> dict[str, Any]:
        """Create the sticky comment once, then edit it in place; no edit when nothing changed."""
        if marker not in body:
            body = f"{body}\n\n{marker}"
        # Two workers handling events of the same PR must not both find nothing and both create.
        with serialized(self._cache_session, f"comment:{repo}#{number}:{marker}"):
            existing = self.find_comment(repo, number, marker)
            if existing is None:
                return self.create_comment(repo, number, body)
            if existing.get("body") == body:
                return existing
            return self.update_comment(repo, int(existing["id"]), body)

    def add_reaction(self, repo: str, comment_id: int, content: str) -> dict[str, Any]:
        # GitHub answers 200 (not 201) when the reaction already exists: naturally idempotent.
        return self._write(
            "reactions/create-for-issue-comment",
            "POST",
            f"/repos/{repo}/issues/comments/{comment_id}/reactions",
            {"content": content},
            target=f"{repo} comment {comment_id}",
        )

    # ------------------------------------------------------------------ permissions

    def permission(self, repo: str, username: str) -> str:
        """``admin``, ``maintain``, ``write``, ``triage``, ``read`` or ``none``."""
        try:
            data = self._get(
                "repos/get-collaborator-permission-level",
                f"/repos/{repo}/collaborators/{_quote(username)}/permission",
            )
        except NotFound:  # not a collaborator (or not a user)
            return "none"
        except GitHubError as exc:
            if exc.status != 403:
                raise
            # "Must have push access to view collaborator permission": whoever cannot be asked
            # about is treated as having no permission, never as a failure of the command.
            log.info("permission_check_refused", repo=repo, user=username, error=str(exc))
            return "none"
        return effective_role(data)

    # ------------------------------------------------------------------ actions

    def dispatch_workflow(
        self, repo: str, workflow: str, ref: str, inputs: dict[str, str]
    ) -> dict[str, Any] | None:
        """Dispatch and return ``{workflow_run_id, run_url, html_url}`` when the server tells it."""
        data = self._write(
            "actions/create-workflow-dispatch",
            "POST",
            f"/repos/{repo}/actions/workflows/{_quote(workflow)}/dispatches",
            {"ref": ref, "inputs": inputs, "return_run_details": True},
            target=f"{repo}:{workflow}",
        )
        return data if isinstance(data, dict) and data.get("workflow_run_id") else None

    def list_workflow_runs(
        self, repo: str, workflow: str | None = None, **params: Any
    ) -> list[dict[str, Any]]:
        path = (
            f"/repos/{repo}/actions/workflows/{_quote(workflow)}/runs"
            if workflow
            else f"/repos/{repo}/actions/runs"
        )
        op = "actions/list-workflow-runs" if workflow else "actions/list-workflow-runs-for-repo"
        return list(
            self._paginate(op, path, params, key="workflow_runs", limit=int(params.pop("limit", 300)))
        )

    def get_run(self, repo: str, run_id: int) -> dict[str, Any]:
        return self._get("actions/get-workflow-run", f"/repos/{repo}/actions/runs/{run_id}")

    def list_run_jobs(self, repo: str, run_id: int) -> list[dict[str, Any]]:
        return list(
            self._paginate(
                "actions/list-jobs-for-workflow-run", f"/repos/{repo}/actions/runs/{run_id}/jobs", key="jobs"
            )
        )

    def list_check_run_annotations(self, repo: str, check_run_id: int) -> list[dict[str, Any]]:
        """A check run's annotations; a workflow job's check run has the job's id."""
        return list(
            self._paginate(
                "checks/list-annotations",
                f"/repos/{repo}/check-runs/{check_run_id}/annotations",
                limit=200,
            )
        )

    def add_labels(self, repo: str, number: int, labels: list[str]) -> list[dict[str, Any]]:
        """Add labels to an issue or PR (idempotent: a label already there stays once)."""
        data = self._write(
            "issues/add-labels",
            "POST",
            f"/repos/{repo}/issues/{number}/labels",
            {"labels": labels},
            target=f"{repo}#{number}",
        )
        return list(data) if isinstance(data, list) else []

    def remove_label(self, repo: str, number: int, label: str) -> None:
        """Take a label off an issue or PR (idempotent: a 404, label not there, is the state we want)."""
        with contextlib.suppress(NotFound):
            self._write(
                "issues/remove-label",
                "DELETE",
                f"/repos/{repo}/issues/{number}/labels/{_quote(label)}",
                target=f"{repo}#{number}",
            )

    def cancel_run(self, repo: str, run_id: int) -> None:
        """Ask GitHub to cancel a run. A 409 (it already finished) is the state we wanted; a 403
        ("Must have admin rights to Repository.", as GitHub really answers a token that may not)
        is raised as ``Forbidden`` naming the run and the missing permission: not a cancel, and
        not worth retrying."""
        try:
            self._write(
                "actions/cancel-workflow-run",
                "POST",
                f"/repos/{repo}/actions/runs/{run_id}/cancel",
                target=f"{repo} run {run_id}",
            )
        except Conflict:
            return
        except Forbidden as exc:
            message = exc.data.get("message") if isinstance(exc.data, dict) else None
            raise Forbidden(
                exc.status,
                f"actions/cancel-workflow-run: run {run_id} of {repo} was not cancelled "
                f"({message or 'forbidden'}): the bot's credentials need write access to Actions there",
                exc.data,
            ) from exc

    def list_run_artifacts(self, repo: str, run_id: int) -> list[dict[str, Any]]:
        return list(
            self._paginate(
                "actions/list-workflow-run-artifacts",
                f"/repos/{repo}/actions/runs/{run_id}/artifacts",
                key="artifacts",
            )
        )

    def download_artifact(self, repo: str, artifact_id: int, max_bytes: int = MAX_ARTIFACT_BYTES) -> bytes:
        """The artifact's zip, refusing anything larger than ``max_bytes`` before reading it whole."""
        # PyGithub's requestJson does not follow redirects, which is what we want: the archive URL
        # is short-lived and must be fetched without our token. ``_call`` classifies errors (a
        # dropped connection is transient, like every other GitHub call).
        path = f"/repos/{repo}/actions/artifacts/{artifact_id}/zip"
        status, headers, _ = self._call("actions/download-artifact", "GET", path)
        location = {k.lower(): v for k, v in headers.items()}.get("location")
        if status != 302 or not location:
            raise GitHubError(status, f"artifact {artifact_id}: expected a redirect to the archive")
        try:
            with _download_client().stream("GET", location) as resp:
                if resp.status_code >= 400:
                    if resp.status_code >= 500:
                        raise TransientError(f"artifact {artifact_id}: download answered {resp.status_code}")
                    raise GitHubError(resp.status_code, f"artifact {artifact_id}: download refused")
                declared = int(resp.headers.get("content-length") or 0)
                if declared > max_bytes:
                    raise GitHubError(
                        413, f"artifact {artifact_id} is {declared} bytes, over the {max_bytes} cap"
                    )
                chunks: list[bytes] = []
                total = 0
                for chunk in resp.iter_bytes():
                    total += len(chunk)
                    if total > max_bytes:
                        raise GitHubError(413, f"artifact {artifact_id} is over the {max_bytes}-byte cap")
                    chunks.append(chunk)
        except httpx.TransportError as exc:  # connection reset, timeout mid-download
            raise TransientError(
                f"artifact {artifact_id}: download failed: {exc.__class__.__name__}: {exc}"
            ) from exc
        return b"".join(chunks)

    def rate_limit(self) -> dict[str, Any]:
        return self._get("rate-limit/get", "/rate_limit")

    # ------------------------------------------------------------------ webhook deliveries

    @staticmethod
    def _hook_path(hook: str) -> tuple[str, str]:
        """(operation prefix, path) of a hook: ``app`` or ``owner/repo:hook_id``."""
        if hook == "app":
            return "apps", "/app/hook/deliveries"
        repo, _, hook_id = hook.rpartition(":")
        return "repos", f"/repos/{repo}/hooks/{int(hook_id)}/deliveries"

    def list_hook_deliveries(
        self, hook: str, cursor: str | None = None, per_page: int = 100
    ) -> tuple[list[dict[str, Any]], str | None]:
        """One page of a hook's deliveries, newest first, and the next page's cursor (or None).

        The App's list needs the App's JWT (the credentials route ``/app/...`` calls to it)."""
        kind, path = self._hook_path(hook)
        params: dict[str, Any] = {"per_page": per_page}
        if cursor:
            params["cursor"] = cursor
        _, headers, data = self._call(f"{kind}/list-webhook-deliveries", "GET", path, params=params)
        link = {k.lower(): v for k, v in headers.items()}.get("link")
        return (data if isinstance(data, list) else []), next_cursor(link)

    def redeliver(self, hook: str, delivery_id: int) -> None:
        """Ask GitHub to send a recorded delivery again (same GUID); GitHub answers 202."""
        kind, path = self._hook_path(hook)
        self._write(
            f"{kind}/redeliver-webhook-delivery",
            "POST",
            f"{path}/{int(delivery_id)}/attempts",
            target=f"{hook} delivery {delivery_id}",
        )


# ---------------------------------------------------------------------- construction


def _retry(settings: Settings) -> Retry:
    # Only idempotent methods are retried in place, and only on 5xx (GithubRetry would also retry
    # POST — a POST that failed with a 502 may still have created its comment — and would sleep on
    # rate limits). A rate limit is never slept on inside a call: it comes back as an answer,
    # becomes a TransientError with GitHub's documented wait, and the task is retried then.
    return Retry(
        total=settings.github_max_retries,
        backoff_factor=0.2,
        status_forcelist=[500, 502, 503, 504],
        allowed_methods=Retry.DEFAULT_ALLOWED_METHODS,
        respect_retry_after_header=False,
        raise_on_status=False,
    )


def _github(settings: Settings, auth: Auth.Auth | None) -> Github:
    return Github(
        auth=auth,
        base_url=settings.github_api_url.rstrip("/"),
        timeout=int(settings.github_timeout_seconds),
        retry=_retry(settings),
        per_page=100,
        seconds_between_requests=settings.github_seconds_between_requests,
        seconds_between_writes=settings.github_seconds_between_writes,
    )


_credentials_lock = threading.Lock()
_credentials_by_settings: dict[tuple[Any, ...], Credentials] = {}


def credentials(settings: Settings) -> Credentials:
    """The process-wide credentials for these settings (so App tokens survive across tasks)."""
    key = settings.app_private_key()
    secret = (
        key
        if settings.github_app_id is not None and key
        else settings.github_token.get_secret_value()
        if settings.github_token is not None
        else ""
    )
    cache_key = (
        settings.github_api_url,
        settings.github_app_id,
        settings.github_installation_id,
        hashlib.sha256(secret.encode()).hexdigest(),  # never keep the secret itself as a key
        settings.github_timeout_seconds,
        settings.github_max_retries,
        settings.github_seconds_between_requests,
        settings.github_seconds_between_writes,
        settings.github_max_concurrency_per_installation,
        settings.github_token_refresh_margin_seconds,
        settings.broker_url,  # Redis as the broker: the concurrency cap is shared through it
    )
    with _credentials_lock:
        found = _credentials_by_settings.get(cache_key)
        if found is None:
            if settings.github_app_id is not None and key:
                found = AppCredentials(settings, key)
            else:
                token = Auth.Token(secret) if secret else None
                found = FixedCredentials(
                    _github(settings, token).requester, make_slots(settings, f"token:{cache_key[3]}")
                )
            _credentials_by_settings[cache_key] = found
        return found


def make_requester(settings: Settings) -> Requester:
    """A plain requester for these settings' token (tests and tools that need PyGithub itself)."""
    token = settings.github_token.get_secret_value() if settings.github_token is not None else None
    return _github(settings, Auth.Token(token) if token else None).requester


_Slots = LocalSlots  # the per-process cap under its old name

# The audit actor of every GitHub write: the bot's own credentials make it.
BOT_ACTOR = "sweepbot"


def gateway(
    settings: Settings,
    session: Session | None = None,
    *,
    actor: str = "sweepbot",
    delivery_id: str | None = None,
    installation_id: int | None = None,
    repo: str | None = None,
) -> GitHubGateway:
    """A gateway whose writes are audited in ``session`` (when given) and whose GETs are cached there.

    Every write goes out with the bot's credentials, so the audit row's actor is the bot;
    ``actor`` is whose action caused the writes (a maintainer's command, an operator) and is
    recorded as ``caused_by``.

    ``installation_id``/``repo``: the installation a delivery's payload names and its repository
    (for a GitHub App, that installation acts for that repository and for non-repository calls).
    """
    audit: AuditHook | None = None
    if session is not None:

        def audit(action: str, target: str, detail: dict[str, Any]) -> None:
            record_outside(
                session,
                actor=BOT_ACTOR,
                caused_by=actor,
                action=action,
                target=target,
                outcome="ok",
                detail=detail,
                delivery_id=delivery_id,
            )

    creds = credentials(settings)
    if isinstance(creds, AppCredentials):
        creds.learn(repo, installation_id)
    return GitHubGateway(
        creds,
        cache_session=session,
        audit=audit,
        installation_id=installation_id,
        consistency_delays=tuple(settings.github_consistency_delays),
    )


def session_gateway(
    session: Session,
    *,
    actor: str = "sweepbot",
    delivery_id: str | None = None,
    installation_id: int | None = None,
    repo: str | None = None,
) -> GitHubGateway:
    """``gateway`` with the settings in force: what handlers, tasks and the CLI use."""
    return gateway(
        get_settings(),
        session,
        actor=actor,
        delivery_id=delivery_id,
        installation_id=installation_id,
        repo=repo,
    )
