"""Whose credentials a call goes out with: a fixed token, or a GitHub App's installations.

Each credential also holds the cap on concurrent requests made with it (``app.adapters.ghslots``).
The credentials are process-wide per settings (``credentials``), so App tokens survive across tasks.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
import time
from typing import Any, Protocol

import structlog
from github import Auth

from app.adapters.ghslots import LocalSlots, Slots, make_slots
from app.adapters.github.errors import GitHubError, NotFound
from app.adapters.github.transport import github_client, request
from app.core.installations import InstallationMap, TokenCache, parse_expires_at, repo_of_path
from app.settings import Settings

log = structlog.get_logger(__name__)


class Credentials(Protocol):
    """Which requester a call goes out with (and the slot key capping it), and forgetting a
    credential GitHub refused."""

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
        self._jwt = github_client(settings, Auth.AppAuth(settings.github_app_id, key)).requester
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
                held = (token, github_client(self._settings, Auth.Token(token)).requester)
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
                    github_client(settings, token).requester, make_slots(settings, f"token:{cache_key[3]}")
                )
            _credentials_by_settings[cache_key] = found
        return found
