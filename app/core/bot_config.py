"""The repo's `.github/sweepbot.yml` (pure): schema, parsing and validation.

A bad file never crashes anything: ``parse_bot_config`` raises ``BotConfigError`` saying what is
wrong, where, and how to fix it; the flow (``app.flows.repo.bot_config``) stores that error and carries
on with the defaults. The schema is documented in docs/configuration.md.
"""

from __future__ import annotations

import re
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from app.core.references import ReferenceError, shipped_references
from app.core.safeyaml import YAMLLimitError, load_capped

CONFIG_PATH = ".github/sweepbot.yml"
DEFAULT_TAG_PATTERN = r"nightly-(?P<sha>[0-9a-f]{40})"
# A real config is a few KB nesting 4 deep with no aliases; these leave room and bound the work
# a hostile file can cause (app/core/safeyaml.py).
MAX_CONFIG_BYTES = 64 * 1024
MAX_CONFIG_DEPTH = 32
MAX_CONFIG_NODES = 50_000
_REF = re.compile(r"^(?P<repo>[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)#(?P<num>\d+)$")


class BotConfigError(ValueError):
    """The bot config file is not valid; the message says where and how to fix it."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)


class ImageSource(_Model):
    """How to list an image repository's tags and map a tag to the upstream commit it was built from."""

    name: str = Field(
        description="image repository as written in `image:` values, e.g. vllm/vllm-openai-rocm"
    )
    registry: Literal["dockerhub", "oci", "ghcr"] = "dockerhub"
    url: str | None = Field(default=None, description="API base URL; default per registry")
    tag_pattern: str = Field(default=DEFAULT_TAG_PATTERN, alias="tag-pattern")
    source_repo: str | None = Field(default=None, alias="source-repo")

    @field_validator("tag_pattern")
    @classmethod
    def _pattern(cls, value: str) -> str:
        try:
            compiled = re.compile(value)
        except re.error as exc:
            raise ValueError(f"tag-pattern {value!r} is not a valid regular expression: {exc}") from exc
        if "sha" not in compiled.groupindex:
            raise ValueError(f"tag-pattern {value!r} needs a named group (?P<sha>...) capturing the commit")
        return value

    @field_validator("source_repo")
    @classmethod
    def _repo(cls, value: str | None) -> str | None:
        if value is not None and value.count("/") != 1:
            raise ValueError(f"source-repo {value!r} must be owner/name, e.g. vllm-project/vllm")
        return value


class WatchSpec(_Model):
    config_key: str = Field(alias="config-key")
    depends_on: list[str] = Field(default_factory=list, alias="depends-on")
    pr: int | None = Field(default=None, description="the recipe PR to bump; none: a bump PR is opened")

    @field_validator("depends_on")
    @classmethod
    def _refs(cls, value: list[str]) -> list[str]:
        for ref in value:
            if not _REF.match(ref.strip()):
                raise ValueError(
                    f"depends-on item {ref!r} is not owner/repo#NUMBER (e.g. vllm-project/vllm#47269)"
                )
        return [r.strip() for r in value]


class BumpSettings(_Model):
    mode: Literal["auto", "pr"] = Field(
        default="auto",
        description="auto: commit onto the recipe PR's branch when allowed; pr: always a bump PR",
    )
    config_dirs: list[str] = Field(
        default_factory=lambda: [".github/configs", "configs"], alias="config-dirs"
    )
    changelog: str = "perf-changelog.yaml"
    request_sweep: bool = Field(default=True, alias="request-sweep")


# run-sweep.yml's primary labels that run a key's full search space (sweep-enabled trims each
# config to its minimum concurrency, which is not the sweep the bot reports on).
FULL_SWEEP_LABELS = (
    "full-sweep-enabled",
    "non-canary-full-sweep-enabled",
    "full-sweep-fail-fast",
    "full-sweep-fail-fast-no-canary",
)


class SweepSettings(_Model):
    """How a sweep reaches the runners; exactly one way per repository, never both."""

    mode: Literal["dispatch", "label"] = Field(
        default="label",
        description="label (default): the bot applies the repo's sweep label and follows the "
        "run-sweep.yml run the repo starts, reusable at merge; targeted sweeps, fork PRs and repos "
        "without the workflow are still dispatched (app.core.sweepway). dispatch: the bot's queue "
        "always dispatches e2e-tests.yml (its commits carry [skip-sweep]); main sweeps again at merge",
    )
    label: str = Field(
        default="full-sweep-fail-fast",
        description="label mode: the primary sweep label to apply (the repo recommends full-sweep-fail-fast)",
    )
    workflow: str = Field(default="run-sweep.yml", description="label mode: the workflow the label starts")

    @field_validator("label")
    @classmethod
    def _label(cls, value: str) -> str:
        if value not in FULL_SWEEP_LABELS:
            raise ValueError(
                f"sweep.label {value!r} is not one of the repo's full-sweep labels "
                f"({', '.join(FULL_SWEEP_LABELS)}); 'sweep-enabled' trims to the minimum concurrency"
            )
        return value

    @field_validator("workflow")
    @classmethod
    def _workflow(cls, value: str) -> str:
        if "/" in value or not value.endswith((".yml", ".yaml")):
            raise ValueError(f"sweep.workflow {value!r} must be a workflow file name, e.g. run-sweep.yml")
        return value


class RecoverySettings(_Model):
    """After merge: what the bot does itself when main did not publish the PR (runbook case B)."""

    open_pr: bool = Field(
        default=False,
        alias="open-pr",
        description="open the case-B recovery PR (empty commit, full-sweep label; once a maintainer "
        "posts /reuse-sweep-run, the appended entry and the carrier commit); off: only report it",
    )


class NightlyKey(_Model):
    """One config key whose image repository's new nightlies get a canary sweep."""

    config_key: str = Field(alias="config-key")
    conc: list[int] = Field(default_factory=lambda: [4, 64], description="canary points: conc values")
    seq: str | None = Field(default=None, description="seq-len of the canary points (default: all)")

    @field_validator("config_key")
    @classmethod
    def _key(cls, value: str) -> str:
        value = value.strip()
        if not re.match(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$", value):
            raise ValueError(f"config-key {value!r} is malformed: use letters, digits, '.', '_' and '-'")
        return value

    @field_validator("conc")
    @classmethod
    def _conc(cls, value: list[int]) -> list[int]:
        if not value or any(c < 1 or c > 4096 for c in value) or len(value) > 8:
            raise ValueError(
                f"conc {value!r} must list 1 to 8 concurrencies between 1 and 4096, e.g. [4, 64]"
            )
        return sorted(set(value))


class NightlyWatch(_Model):
    """`watch-nightlies:` canaries on new nightlies in idle runner time, and regression issues."""

    keys: list[NightlyKey] = Field(default_factory=list)
    budget_hours: float | None = Field(
        default=20.0,
        alias="budget-runner-hours-per-week",
        description="runner-hours canaries may use per ISO week (UTC); null: no limit",
    )
    issue_repo: str | None = Field(default=None, alias="issue-repo", description="default: this repo")
    p_value: float = Field(default=0.01, alias="p-value", gt=0, lt=1)
    min_effect: float = Field(default=0.015, alias="min-effect", ge=0, lt=1)
    min_nightlies: int = Field(default=8, alias="min-nightlies", ge=6, le=1000)
    max_bisect_runs: int = Field(default=4, alias="max-bisect-runs", ge=0, le=20)

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        # `watch-nightlies: [key-a, {config-key: key-b, conc: [8]}]` is the short form of `keys:`.
        if isinstance(data, list):
            data = {"keys": data}
        if isinstance(data, dict) and isinstance(data.get("keys"), list):
            data = {**data, "keys": [{"config-key": k} if isinstance(k, str) else k for k in data["keys"]]}
        return data

    @field_validator("issue_repo")
    @classmethod
    def _issue_repo(cls, value: str | None) -> str | None:
        if value is not None and not re.match(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$", value):
            raise ValueError(f"issue-repo {value!r} must be owner/name")
        return value

    @field_validator("budget_hours")
    @classmethod
    def _budget(cls, value: float | None) -> float | None:
        if value is not None and value < 0:
            raise ValueError(f"budget-runner-hours-per-week must be >= 0 (or null for no limit), got {value}")
        return value

    def key(self, config_key: str) -> NightlyKey | None:
        return next((k for k in self.keys if k.config_key == config_key), None)


REFERENCE_KEYWORDS = ("sibling", "none")


class BotConfig(_Model):
    version: Literal[1] = 1
    poll: bool = True
    images: list[ImageSource] = Field(default_factory=list)
    watches: list[WatchSpec] = Field(default_factory=list)
    bump: BumpSettings = Field(default_factory=BumpSettings)
    sweep: SweepSettings = Field(default_factory=SweepSettings)
    recovery: RecoverySettings = Field(default_factory=RecoverySettings)
    watch_nightlies: NightlyWatch = Field(default_factory=NightlyWatch, alias="watch-nightlies")
    references: dict[str, str] = Field(
        default_factory=dict,
        description="config key -> shipped reference table name | sibling | none (the report reads it)",
    )

    @field_validator("references")
    @classmethod
    def _references(cls, value: dict[str, str]) -> dict[str, str]:
        try:
            names = [r.name for r in shipped_references()]
        except ReferenceError as exc:  # a broken shipped table is a deployment bug; say which
            raise ValueError(f"the shipped reference tables cannot be loaded: {exc}") from exc
        out: dict[str, str] = {}
        for key, choice in value.items():
            key, choice = str(key).strip(), str(choice).strip()
            if not key:
                raise ValueError("references: a config key must not be empty")
            if choice not in (*REFERENCE_KEYWORDS, *names):
                allowed = ", ".join([*names, *REFERENCE_KEYWORDS])
                raise ValueError(
                    f"references: {key}: {choice!r} is not a shipped reference table, 'sibling' or 'none' "
                    f"(choose one of: {allowed})"
                )
            out[key] = choice
        return out

    def image_source(self, image_repo: str) -> ImageSource | None:
        for src in self.images:
            if src.name == image_repo:
                return src
        return None


def _where(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def parse_bot_config(text: str) -> BotConfig:
    """Parse and validate the file's text; raise ``BotConfigError`` saying what to fix."""
    try:
        data = load_capped(
            text, max_bytes=MAX_CONFIG_BYTES, max_depth=MAX_CONFIG_DEPTH, max_nodes=MAX_CONFIG_NODES
        )
    except YAMLLimitError as exc:
        raise BotConfigError(f"{CONFIG_PATH} is refused: it {exc}") from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise BotConfigError(f"{CONFIG_PATH} is not valid YAML: {problem}{where}; fix the syntax") from exc
    if data is None:
        return BotConfig()
    if not isinstance(data, dict):
        raise BotConfigError(
            f"{CONFIG_PATH} must be a mapping at the top level (keys: version, images, "
            f"watches, bump, sweep, poll, references, watch-nightlies), not a {type(data).__name__}"
        )
    try:
        return BotConfig.model_validate(data)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            msg = str(err["msg"]).removeprefix("Value error, ")
            problems.append(f"{_where(tuple(err['loc']))}: {msg}")
        raise BotConfigError(
            f"{CONFIG_PATH} does not match the schema (see docs/configuration.md): " + "; ".join(problems)
        ) from exc
