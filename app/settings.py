"""Every setting comes from the environment (prefix ``SWEEPBOT_``) with an embedded default.

The embedded default needs nothing installed: a SQLite file and a kombu SQLAlchemy broker under
``SWEEPBOT_DATA_DIR``. Production sets ``SWEEPBOT_ENV=production`` plus Postgres and Redis URLs.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from app.core.sweepspec import DispatchTemplates


class SettingsError(ValueError):
    """A setting is missing or malformed; the message names the variable and the fix."""


def _split_csv(value: object) -> object:
    if isinstance(value, str):
        return _parts(value)
    return value


def _parts(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


_DISPATCH = DispatchTemplates()


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="SWEEPBOT_", env_file=None, extra="ignore")

    env: Literal["development", "production"] = "development"
    data_dir: Path = Path("./.sweepbot")
    database_url: str = ""  # default: sqlite:///<data_dir>/sweepbot.sqlite3
    broker_url: str = ""  # default: sqla+sqlite:///<data_dir>/broker.sqlite3 (kombu SQLAlchemy transport)
    queue_name: str = "sweepbot"  # Celery queue; several deployments (or test runs) can share one Redis

    # Several secrets, comma-separated, so a secret can rotate without dropping deliveries.
    webhook_secrets: Annotated[list[SecretStr], NoDecode] = Field(default_factory=list)
    max_webhook_bytes: int = 25 * 1024 * 1024  # GitHub's own cap on a delivery

    github_api_url: str = "https://api.github.com"
    github_token: SecretStr | None = None
    github_app_id: int | None = None
    github_app_private_key: SecretStr | None = None  # PEM text
    github_app_private_key_path: Path | None = None
    github_installation_id: int | None = None
    github_timeout_seconds: float = 15.0
    github_max_retries: int = 5
    # PyGithub's pacing (GitHub asks integrators not to burst writes); 0 against the simulator.
    github_seconds_between_requests: float = 0.25
    github_seconds_between_writes: float = 1.0
    # Requests in flight at once per installation (per process): GitHub's secondary limits
    # punish concurrency; its guidance is to make requests for one installation serially.
    github_max_concurrency_per_installation: int = 4
    # An installation token is reused until this long before its expires_at (tokens last an hour).
    github_token_refresh_margin_seconds: float = 300.0
    # Short delays before re-trying a 404/422 that may only mean "the ref just written is not
    # visible yet" (PR creation after a branch push, reads after writes).
    github_consistency_delays: Annotated[list[float], NoDecode] = Field(
        default_factory=lambda: [0.5, 1.0, 2.0]
    )
    # Recovering webhook deliveries GitHub failed to send (it never retries them itself):
    # "app" (the App's webhook, needs App credentials) and/or "owner/repo:HOOK_ID" (repository
    # webhooks), comma-separated; empty: "app" when App credentials are set, else off.
    redelivery_hooks: Annotated[list[str], NoDecode] = Field(default_factory=list)
    redelivery_interval: float = 300.0
    redelivery_max_pages: int = 5  # pages of 100 deliveries read per cycle, newest first
    redelivery_max_requests: int = 50  # redeliveries asked for per cycle
    redelivery_horizon_seconds: float = 3 * 24 * 3600.0  # GitHub keeps deliveries for 3 days
    # Registry base URLs by host, e.g. "docker.io=http://127.0.0.1:8001/hub,ghcr.io=http://127.0.0.1:8001"
    registry_urls: Annotated[dict[str, str], NoDecode] = Field(default_factory=dict)
    bot_login: str = "sweepbot[bot]"

    # Polling and scheduling cadence (seconds).
    reaper_interval: float = 30.0
    reaper_grace_seconds: float = 20.0  # a stored delivery older than this, not done, is re-enqueued
    # No delivery consumed for this long while one waits: /readyz is not ready, and the reaper
    # rings everything that waited that long again (the queue is stuck or lost its messages).
    consumption_stall_seconds: float = 120.0
    poll_interval: float = 300.0
    scheduler_interval: float = 15.0
    job_repair_interval: float = 120.0
    # The part of the installation's hourly GitHub rate limit the bot may spend; near it the repair
    # poll is spread out, then skipped until the window resets (app.core.budget).
    github_budget_share: float = Field(default=0.5, gt=0.0, le=1.0)
    nightly_watch_interval: float = 600.0  # canary planning, change points, regression issues
    report_debounce_seconds: float = 5.0
    # An accuracy this far (absolute score, 0.01 = 1 point) below the reference still counts as
    # "not worse" when that is wider than the standard error of the difference.
    accuracy_tolerance: float = Field(default=0.0, ge=0.0, le=1.0)
    delivery_max_attempts: int = 8
    delivery_lease_seconds: float = 300.0  # a claimed delivery not finished by then is taken again

    # Dispatch target of benchmark runs: configuration, not code.
    # (their defaults are app.core.sweepspec.DispatchTemplates', which `recipe dispatch` reads alone)
    dispatch_workflow: str = _DISPATCH.dispatch_workflow
    dispatch_ref: str = _DISPATCH.dispatch_ref
    dispatch_inputs: str = _DISPATCH.dispatch_inputs
    runner_capacity: Annotated[dict[str, int], NoDecode] = Field(default_factory=dict)
    job_timeout_seconds: float = 6 * 3600.0
    # A followed run's row (dispatch_runs) is deleted by the repair poll this long after the run
    # completed: nothing counts its runners any more (app.store.dispatchruns.prune_completed).
    dispatch_run_retention_seconds: float = Field(default=7 * 24 * 3600.0, gt=0)
    # A job claimed for dispatch with no run found (by its name) after this long is queued again:
    # the worker died between the claim and the dispatch call.
    dispatch_lost_grace_seconds: float = 300.0
    # History pruned by the beat's retention pass (app.flows.ingest.retention), in bounded batches: finished
    # deliveries, the workflow_job/workflow_run deliveries among them sooner (a sweep makes
    # thousands), audit rows, and the redelivery requests GitHub can no longer be asked about. A
    # delivery is kept at least as long as GitHub may redeliver it (SWEEPBOT_REDELIVERY_HORIZON_SECONDS):
    # the recovery scan takes a GUID it no longer has for a missed delivery.
    delivery_retention_seconds: float = Field(default=30 * 24 * 3600.0, gt=0)
    job_event_retention_seconds: float = Field(default=7 * 24 * 3600.0, gt=0)
    audit_retention_seconds: float = Field(default=180 * 24 * 3600.0, gt=0)
    retention_interval: float = Field(default=3600.0, gt=0)
    retention_batch_size: int = Field(default=1000, ge=1, le=100_000)
    infra_retry_limit: int = 2
    # Jobs a label may have waiting in GitHub's queue beyond its runners (app.core.release_policy).
    # auto: a dispatch group goes out when at least one of its jobs can start on a free runner now
    # (at most its width - 1 wait on GitHub, where GitHub orders them); 0: never more jobs in flight
    # than runners, so the bot alone keeps the order and a group waits until its whole width is
    # free; N > 0: a group goes out when up to N jobs would wait on GitHub for a runner.
    runner_overcommit: int | Literal["auto"] = "auto"
    # Repositories whose GPU runners sweepbot places as the priority controller
    # (app/flows/scheduler/runner_hook.py)
    # when their PRIORITY_SCHEDULER_ENABLED variable is true; the credentials need runner admin there.
    runner_controller_repos: Annotated[list[str], NoDecode] = Field(default_factory=list)
    # Repositories adopted on the first start with GitHub credentials (app/flows/ingest/resync.py: open
    # PRs, unanswered commands, recent runs, as `sweepbot resync --repo` does), once per database.
    resync_repos: Annotated[list[str], NoDecode] = Field(default_factory=list)

    # Dashboard.
    operator_tokens: Annotated[list[SecretStr], NoDecode] = Field(default_factory=list)
    operator_basic: Annotated[list[str], NoDecode] = Field(default_factory=list)  # "user:password"
    dashboard_public: bool = True
    session_secret: SecretStr | None = None
    oauth_client_id: str | None = None
    oauth_client_secret: SecretStr | None = None
    oauth_base_url: str = "https://github.com"
    oauth_allowed_org: str | None = None
    oauth_allowed_team: str | None = None

    # Extra modules whose import registers handlers (plugins; the tests use one).
    extra_handler_modules: Annotated[list[str], NoDecode] = Field(default_factory=list)

    log_level: str = "INFO"
    log_json: bool = True

    @field_validator(
        "webhook_secrets", "operator_tokens", "operator_basic", "extra_handler_modules", mode="before"
    )
    @classmethod
    def _csv(cls, value: object) -> object:
        return _split_csv(value)

    @field_validator("runner_controller_repos", mode="before")
    @classmethod
    def _controller_repos(cls, value: object) -> object:
        return _split_csv(value)

    @field_validator("resync_repos", mode="before")
    @classmethod
    def _resync_repos(cls, value: object) -> object:
        value = _split_csv(value)
        for part in value if isinstance(value, list) else []:
            if str(part).count("/") != 1 or not all(str(part).split("/")):
                raise SettingsError(f"SWEEPBOT_RESYNC_REPOS item {part!r} is not OWNER/REPO")
        return value

    @field_validator("redelivery_hooks", mode="before")
    @classmethod
    def _hooks(cls, value: object) -> object:
        value = _split_csv(value)
        for part in value if isinstance(value, list) else []:
            repo, sep, hook = str(part).rpartition(":")
            if part != "app" and (not sep or "/" not in repo or not hook.isdigit()):
                raise SettingsError(
                    f"SWEEPBOT_REDELIVERY_HOOKS item {part!r} is neither `app` nor OWNER/REPO:HOOK_ID "
                    "(e.g. SemiAnalysisAI/InferenceX:123456)"
                )
        return value

    @field_validator("github_consistency_delays", mode="before")
    @classmethod
    def _delays(cls, value: object) -> object:
        if isinstance(value, str):
            try:
                return [float(part) for part in _parts(value)]
            except ValueError as exc:
                raise SettingsError(
                    f"SWEEPBOT_GITHUB_CONSISTENCY_DELAYS {value!r} is not comma-separated seconds "
                    "(e.g. 0.5,1,2)"
                ) from exc
        return value

    @field_validator("runner_capacity", mode="before")
    @classmethod
    def _capacity(cls, value: object) -> object:
        # "mi355x=9,h100=4" -> {"mi355x": 9, "h100": 4}
        if isinstance(value, str):
            out: dict[str, int] = {}
            for part in _parts(value):
                label, sep, count = str(part).partition("=")
                if not sep or not count.strip().isdigit():
                    raise SettingsError(
                        f"SWEEPBOT_RUNNER_CAPACITY item {part!r} is not LABEL=COUNT (e.g. mi355x=9)"
                    )
                out[label.strip()] = int(count)
            return out
        return value

    @field_validator("runner_overcommit", mode="before")
    @classmethod
    def _overcommit(cls, value: object) -> object:
        text = str(value).strip().lower()
        if text == "auto":
            return "auto"
        if isinstance(value, bool) or not text.isdigit():
            raise SettingsError(
                f"SWEEPBOT_RUNNER_OVERCOMMIT {value!r} is not auto or a whole number of jobs "
                "(e.g. auto, 0 or 5)"
            )
        return int(text)

    @field_validator("registry_urls", mode="before")
    @classmethod
    def _registries(cls, value: object) -> object:
        if isinstance(value, str):
            out: dict[str, str] = {}
            for part in _parts(value):
                host, sep, url = str(part).partition("=")
                if not sep or not url.strip().startswith(("http://", "https://")):
                    raise SettingsError(
                        f"SWEEPBOT_REGISTRY_URLS item {part!r} is not HOST=URL (e.g. docker.io=http://127.0.0.1:8001/hub)"
                    )
                out[host.strip()] = url.strip().rstrip("/")
            return out
        return value

    @model_validator(mode="after")
    def _retention(self) -> Settings:
        for name in ("delivery_retention_seconds", "job_event_retention_seconds"):
            if getattr(self, name) < self.redelivery_horizon_seconds:
                raise SettingsError(
                    f"SWEEPBOT_{name.upper()} {getattr(self, name):g} is shorter than "
                    f"SWEEPBOT_REDELIVERY_HORIZON_SECONDS ({self.redelivery_horizon_seconds:g}): a delivery "
                    "GitHub may still redeliver must be kept, or it would be asked for again"
                )
        return self

    @model_validator(mode="after")
    def _defaults(self) -> Settings:
        if not self.database_url:
            self.database_url = f"sqlite:///{(self.data_dir / 'sweepbot.sqlite3').resolve()}"
        if not self.broker_url:
            self.broker_url = f"sqla+sqlite:///{(self.data_dir / 'broker.sqlite3').resolve()}"
        return self

    @property
    def is_embedded(self) -> bool:
        return self.database_url.startswith("sqlite")

    @property
    def has_github_credentials(self) -> bool:
        """A token or an App id is set (without either, only the simulator can stand in)."""
        return self.github_token is not None or self.github_app_id is not None

    @property
    def secret_values(self) -> list[bytes]:
        return [s.get_secret_value().encode() for s in self.webhook_secrets]

    @property
    def effective_redelivery_hooks(self) -> list[str]:
        if self.redelivery_hooks:
            return list(self.redelivery_hooks)
        return ["app"] if self.github_app_id is not None and self.app_private_key() else []

    def app_private_key(self) -> str | None:
        if self.github_app_private_key is not None:
            return self.github_app_private_key.get_secret_value()
        if self.github_app_private_key_path is not None:
            return self.github_app_private_key_path.read_text()
        return None

    def check_production(self) -> None:
        """Production refuses to start on settings that would make it unsafe."""
        if self.env != "production":
            return
        if not self.webhook_secrets:
            raise SettingsError(
                "SWEEPBOT_WEBHOOK_SECRETS is empty: production refuses to accept unsigned webhooks. "
                "Set it to the secret configured on the GitHub App or webhook (comma-separate several)."
            )
        has_key = self.github_app_private_key is not None or self.github_app_private_key_path is not None
        if self.github_app_id is not None and not has_key:
            raise SettingsError(
                "SWEEPBOT_GITHUB_APP_ID is set but the App's private key is not: set "
                "SWEEPBOT_GITHUB_APP_PRIVATE_KEY_PATH (or SWEEPBOT_GITHUB_APP_PRIVATE_KEY with the PEM text)."
            )
        if self.github_token is None and self.github_app_id is None:
            raise SettingsError(
                "No GitHub credentials: set SWEEPBOT_GITHUB_TOKEN, or SWEEPBOT_GITHUB_APP_ID with "
                "SWEEPBOT_GITHUB_APP_PRIVATE_KEY(_PATH)."
            )
        self.check_key_file()

    def check_key_file(self) -> None:
        """A key path that names no readable file fails now, in one line, not at the first GitHub call."""
        path = self.github_app_private_key_path
        if path is None or self.github_app_id is None or self.github_app_private_key is not None:
            return  # no App configured (a token), or its key given as text
        try:
            text = path.read_text()
        except OSError as exc:
            raise SettingsError(
                f"SWEEPBOT_GITHUB_APP_PRIVATE_KEY_PATH {str(path)!r} cannot be read ({exc.strerror}): "
                "mount the App's private key there (docker compose: the github_app_key secret) "
                "or fix the path"
            ) from None
        if "PRIVATE KEY" not in text:
            raise SettingsError(
                f"SWEEPBOT_GITHUB_APP_PRIVATE_KEY_PATH {str(path)!r} holds no PEM private key: "
                "use the .pem file GitHub generated for the App"
            )


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    # No mkdir here: a read-only command run in some folder must not leave a data dir behind.
    # The processes that write there (api, worker, beat, up, db upgrade) call ensure_data_dir().
    return Settings()


def ensure_data_dir(settings: Settings) -> None:
    settings.data_dir.mkdir(parents=True, exist_ok=True)


def reset_settings_cache() -> None:
    get_settings.cache_clear()
