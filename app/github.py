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

import contextlib
import json
import time
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, NoReturn

import structlog
from github import Auth, Github, GithubException, GithubIntegration, GithubRetry
from github.GithubException import RateLimitExceededExceedsMaxWait
from github.Requester import Requester
from sqlalchemy.orm import Session
from urllib3.util.retry import Retry

from app.metrics import GITHUB_CALLS
from app.routing import TransientError
from app.settings import Settings

log = structlog.get_logger(__name__)

MAX_ARTIFACT_BYTES = 64 * 1024 * 1024
MAX_FILE_BYTES = 10 * 1024 * 1024  # master configs are a few hundred KB


class GitHubError(Exception):
    def __init__(self, status: int, message: str, data: Any = None) -> None:
        super().__init__(f"GitHub answered {status}: {message}")
        self.status = status
        self.data = data


class NotFound(GitHubError):
    pass


class Conflict(GitHubError):
    """422/409: the request was understood and refused (e.g. a non-fast-forward ref update)."""


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


class GitHubGateway:
    def __init__(
        self,
        requester: Requester,
        *,
        cache_session: Session | None = None,
        audit: AuditHook | None = None,
    ) -> None:
        self._requester = requester
        self._cache_session = cache_session
        self._audit = audit

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
            status, resp_headers, output = self._requester.requestJson(
                verb, path, parameters=params, headers=headers, input=body
            )
        except RateLimitExceededExceedsMaxWait as exc:  # the retry layer will not wait that long
            GITHUB_CALLS.labels(operation=op, status=str(exc.status)).inc()
            raise TransientError(f"{op}: rate limited ({exc.status})", retry_after=exc.wait) from exc
        except GithubException as exc:
            # The retry layer raises for a 403 on a retryable method that is not a rate limit
            # (e.g. "Resource not accessible by integration"): classify it like any answer, so a
            # permanent refusal is not retried for hours as if it were transient.
            GITHUB_CALLS.labels(operation=op, status=str(exc.status)).inc()
            self._raise(op, exc.status, dict(exc.headers or {}), exc.data)
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
            self._raise(op, status, resp_headers, data)
        return status, resp_headers, data

    @staticmethod
    def _raise(op: str, status: int, headers: dict[str, Any], data: Any) -> NoReturn:
        message = data.get("message", "") if isinstance(data, dict) else str(data)[:200]
        lower = {k.lower(): v for k, v in headers.items()}
        retry_after = lower.get("retry-after")
        rate_limited = status == 429 or (
            status == 403
            and (
                retry_after is not None
                or lower.get("x-ratelimit-remaining") == "0"
                or "rate limit" in message.lower()
            )
        )
        if rate_limited:
            wait = _seconds(retry_after)
            if wait is None and lower.get("x-ratelimit-reset"):
                wait = max(0.0, float(lower["x-ratelimit-reset"]) - time.time())
            raise TransientError(f"{op}: rate limited ({status}): {message}", retry_after=wait)
        if status >= 500:
            raise TransientError(f"{op}: GitHub answered {status}: {message}")
        if status == 404:
            raise NotFound(status, f"{op}: {message or 'not found'}", data)
        if status in (409, 422):
            raise Conflict(status, f"{op}: {message}", data)
        raise GitHubError(status, f"{op}: {message}", data)

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
        from app.models import HttpCacheEntry

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
        import base64

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
        content = base64.b64decode(encoded).decode("utf-8")
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
        return self._get("repos/compare-commits", f"/repos/{repo}/compare/{_quote(base)}...{_quote(head)}")

    # ------------------------------------------------------------------ git data

    def get_ref(self, repo: str, ref: str) -> dict[str, Any] | None:
        """``ref`` like ``heads/main``; ``None`` when it does not exist."""
        try:
            return self._get("git/get-ref", f"/repos/{repo}/git/ref/{ref}")
        except NotFound:
            return None

    def create_ref(self, repo: str, ref: str, sha: str) -> dict[str, Any]:
        return self._write(
            "git/create-ref",
            "POST",
            f"/repos/{repo}/git/refs",
            {"ref": f"refs/{ref}", "sha": sha},
            target=f"{repo}:{ref}",
        )

    def update_ref(self, repo: str, ref: str, sha: str, *, force: bool = False) -> dict[str, Any]:
        return self._write(
            "git/update-ref",
            "PATCH",
            f"/repos/{repo}/git/refs/{ref}",
            {"sha": sha, "force": force},
            target=f"{repo}:{ref}",
        )

    def get_commit(self, repo: str, sha: str) -> dict[str, Any]:
        return self._get("git/get-commit", f"/repos/{repo}/git/commits/{sha}")

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
        data = self._write(
            "git/create-tree",
            "POST",
            f"/repos/{repo}/git/trees",
            {"base_tree": base_tree, "tree": tree},
            target=repo,
        )
        return str(data["sha"])

    def create_commit(self, repo: str, message: str, tree: str, parents: list[str]) -> dict[str, Any]:
        return self._write(
            "git/create-commit",
            "POST",
            f"/repos/{repo}/git/commits",
            {"message": message, "tree": tree, "parents": parents},
            target=repo,
        )

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
        return self._write(
            "pulls/create",
            "POST",
            f"/repos/{repo}/pulls",
            {"title": title, "head": head, "base": base, "body": body},
            target=repo,
        )

    def update_pull(self, repo: str, number: int, **fields: Any) -> dict[str, Any]:
        return self._write(
            "pulls/update", "PATCH", f"/repos/{repo}/pulls/{number}", fields, target=f"{repo}#{number}"
        )

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
        from app.db import serialized

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
        except NotFound:
            return "none"
        role = data.get("role_name") or data.get("permission") or "none"
        return str(role)

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

    def cancel_run(self, repo: str, run_id: int) -> None:
        # 409: the run already finished — the state we wanted anyway.
        with contextlib.suppress(Conflict):
            self._write(
                "actions/cancel-workflow-run",
                "POST",
                f"/repos/{repo}/actions/runs/{run_id}/cancel",
                target=f"{repo} run {run_id}",
            )

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
        import httpx

        # PyGithub's requestJson does not follow redirects, which is what we want: the archive URL
        # is short-lived and must be fetched without our token. ``_call`` classifies errors (a
        # dropped connection is transient, like every other GitHub call).
        path = f"/repos/{repo}/actions/artifacts/{artifact_id}/zip"
        status, headers, _ = self._call("actions/download-artifact", "GET", path)
        location = {k.lower(): v for k, v in headers.items()}.get("location")
        if status != 302 or not location:
            raise GitHubError(status, f"artifact {artifact_id}: expected a redirect to the archive")
        try:
            with httpx.stream("GET", location, timeout=60, follow_redirects=True) as resp:
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


# ---------------------------------------------------------------------- construction


MAX_RETRY_WAIT = 30.0


class _CappedRetry(GithubRetry):
    """GithubRetry that never sleeps longer than ``MAX_RETRY_WAIT`` on a ``Retry-After``.

    GithubRetry caps its own rate-limit backoff, but a 403 or 429 carrying ``Retry-After`` is
    slept on by urllib3 as given; a long wait would hold a worker, so it is raised instead and the
    task is retried at the time GitHub named.
    """

    def sleep_for_retry(self, response: Any) -> bool:
        retry_after = self.get_retry_after(response)
        if retry_after is not None and retry_after > MAX_RETRY_WAIT:
            raise RateLimitExceededExceedsMaxWait(
                response.status, None, dict(response.headers), "Retry-After is over the cap", wait=retry_after
            )
        return bool(super().sleep_for_retry(response))


def _retry(settings: Settings) -> GithubRetry:
    # Only idempotent methods are retried in place (GithubRetry would also retry POST: a POST that
    # failed with a 502 may still have created its comment). Rate-limit waits are capped: a long
    # wait becomes a TransientError and the task is retried later instead of holding a worker.
    return _CappedRetry(
        total=settings.github_max_retries,
        backoff_factor=0.2,
        status_forcelist=[500, 502, 503, 504],
        allowed_methods=Retry.DEFAULT_ALLOWED_METHODS,
        secondary_rate_wait=5.0,
        max_rate_limit_wait=MAX_RETRY_WAIT,
    )


def make_requester(settings: Settings) -> Requester:
    auth = make_auth(settings)
    gh = Github(
        auth=auth,
        base_url=settings.github_api_url.rstrip("/"),
        timeout=int(settings.github_timeout_seconds),
        retry=_retry(settings),
        per_page=100,
        seconds_between_requests=settings.github_seconds_between_requests,
        seconds_between_writes=settings.github_seconds_between_writes,
    )
    return gh.requester


def make_auth(settings: Settings) -> Auth.Auth | None:
    key = settings.app_private_key()
    if settings.github_app_id is not None and key:
        app_auth = Auth.AppAuth(settings.github_app_id, key)
        installation_id = settings.github_installation_id
        if installation_id is None:
            integration = GithubIntegration(auth=app_auth, base_url=settings.github_api_url.rstrip("/"))
            installation_id = integration.get_installations()[0].id
        return app_auth.get_installation_auth(installation_id)
    if settings.github_token is not None:
        return Auth.Token(settings.github_token.get_secret_value())
    return None


def gateway(
    settings: Settings,
    session: Session | None = None,
    *,
    actor: str = "sweepbot",
    delivery_id: str | None = None,
) -> GitHubGateway:
    """A gateway whose writes are audited in ``session`` (when given) and whose GETs are cached there."""
    audit: AuditHook | None = None
    if session is not None:
        from app.audit import record

        def audit(action: str, target: str, detail: dict[str, Any]) -> None:
            record(
                session,
                actor=actor,
                action=action,
                target=target,
                outcome="ok",
                detail=detail,
                delivery_id=delivery_id,
            )

    return GitHubGateway(make_requester(settings), cache_session=session, audit=audit)


def session_gateway(
    session: Session, *, actor: str = "sweepbot", delivery_id: str | None = None
) -> GitHubGateway:
    """``gateway`` with the settings in force: what handlers, tasks and the CLI use."""
    from app.settings import get_settings

    return gateway(get_settings(), session, actor=actor, delivery_id=delivery_id)
