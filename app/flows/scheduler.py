"""Sweeps: plan a config key's points into jobs, release them onto scarce runners, follow the runs.

Lifecycle of a job: ``queued -> dispatched -> running -> succeeded | failed | cancelled | reused``.

Concurrency contract (several workers, several beat ticks at once):

- A tick works one runner label at a time inside a short transaction that first takes that
  label's lock row (``SELECT ... FOR UPDATE SKIP LOCKED`` on PostgreSQL: a label another tick is
  serving is skipped; on SQLite the first statement is a guarded UPDATE of the row, which takes
  the database write lock so the in-flight count read after it is current). Under that lock it
  counts the runner slots in flight, picks jobs, and claims them with a guarded
  ``UPDATE ... WHERE state='queued'``. The claim commits *before* the GitHub call.
- The dispatch then happens outside any transaction and its run id is recorded afterwards. A crash
  between claim and record leaves a ``dispatched`` job without a run id; the repair poll finds its
  run by the unique run name ``sweepbot-<sweep id>-<job id>``, or re-queues it when no run exists.
  So a job is never dispatched twice by two ticks, and never lost.

Grouping: the benchmark repo's CLI (``test-config --config-files F --config-keys K --conc C``, see
app/core/sweepcli.py) selects points by key + conc only, so one dispatch covers every point of the key at
that conc — every seq-len and tp (tp=4 and tp=8 at conc 64 share one run). Jobs of a
sweep that one dispatch covers carry the same ``group_key`` and are released together; ``slots`` is
how many runners that dispatch really occupies (all points the command expands to, even those the
sweep filtered out), and that is what counts against capacity. A template that also uses ``{seq}``
or ``{tp}`` narrows its groups accordingly.

Order: priority class, then round-robin across sweeps (the sweep served least recently first),
then the sweep's point order, which is fixed when the sweep is created (``point_order``) and stored
as each job's ``position``: largest conc first, ties in the repo's expansion order. A benchmark
job's duration grows with conc, so starting the long jobs first (longest-processing-time-first)
keeps the tail short when several sweeps share a label (docs/benchmarks.md, "Scheduler"). Views
(``sweep status``, the report) list points the way users read a curve instead: ``display_key``,
ascending conc per seq-len and tp. See docs/scheduling.md.
"""

from __future__ import annotations

import hashlib
import json
import re
import string
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import structlog
from sqlalchemy import func, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from app.core.release_policy import CanaryRun, Candidate, LabelView, pick_preemptions, release_decision
from app.flows.routing import HandlerContext, HandlerSkipped, TransientError, router
from app.models.sweeps import (
    CANARY_REASON,
    PRIORITIES,
    JobState,
    RunnerLabel,
    Sweep,
    SweepJob,
    SweepState,
)
from app.settings import Settings, SettingsError, get_settings
from app.store.audit import record
from app.store.reports import mark_report_dirty
from app.store.results import find_reusable, find_reusable_eval

log = structlog.get_logger(__name__)

BOT = "sweepbot"
DEFAULT_CAPACITY = 1  # unknown label: one job at a time never oversubscribes a scarce fleet
CAPACITY_CACHE_SECONDS = 600.0
RUNNERS_YAML_PATHS = (".github/configs/runners.yaml", "configs/runners.yaml")
MASTER_DIRS = (".github/configs", "configs")

KEY_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")
SEQ_RE = re.compile(r"^(?:1k1k|8k1k|\d{1,6}_\d{1,6})$")
AGENTIC_SEQ = "agentic"  # the seq of agentic-coding points, which have no isl/osl
SHA_RE = re.compile(r"^[0-9a-f]{40}$")
REF_RE = re.compile(r"^(?!.*\.\.)(?!/)[A-Za-z0-9._/-]{1,255}(?<!/)$")
REPO_RE = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
LABEL_RE = re.compile(r"^[A-Za-z0-9:._-]{1,100}$")
WRITE_ROLES = ("admin", "maintain", "write")

GatewayFactory = Callable[[Session], Any]


class SweepError(ValueError):
    """A sweep request or operation cannot be done as asked; the message says why and the fix."""


# ---------------------------------------------------------------------------------------------
# small value types


@dataclass(frozen=True)
class SweepFilters:
    seq: str | None = None
    conc: tuple[int, ...] | None = None
    conc_range: tuple[int, int] | None = None  # inclusive, e.g. conc=4..256
    tp: int | None = None
    evals: str = "default"  # app.core.recipes.evals.EvalMode: default | none | only | all

    def to_json(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "conc": list(self.conc) if self.conc else None,
            "conc_range": list(self.conc_range) if self.conc_range else None,
            "tp": self.tp,
            "evals": self.evals,
        }

    def describe(self) -> str:
        parts = []
        if self.seq:
            parts.append(f"seq={self.seq}")
        if self.conc:
            parts.append("conc=" + ",".join(str(c) for c in self.conc))
        if self.conc_range:
            parts.append(f"conc={self.conc_range[0]}..{self.conc_range[1]}")
        if self.tp:
            parts.append(f"tp={self.tp}")
        if self.evals != "default":
            parts.append(f"evals={self.evals}")
        return " ".join(parts) or "full search space"


@dataclass
class SweepPlan:
    points: list[dict[str, Any]]
    runner_label: str
    capacity: int
    capacity_source: str
    jobs_ahead: int  # queued or in-flight slots on that label before this sweep
    expected_wait_seconds: float | None  # None when no finished job tells how long one takes
    reused: int = 0


@dataclass
class SweepRequest:
    sweep: Sweep
    plan: SweepPlan
    created: bool  # False when an identical active sweep was returned instead
    reply: str
    superseded: list[int] = field(default_factory=list)


@dataclass
class TickResult:
    dispatched_jobs: int = 0
    dispatched_runs: int = 0
    reused: int = 0
    voided: int = 0  # fork approvals voided by a new head sha
    failed: int = 0
    skipped_labels: list[str] = field(default_factory=list)  # locked by another tick, or paused
    errors: list[str] = field(default_factory=list)
    preempted: list[tuple[str, int]] = field(default_factory=list)  # canary runs to cancel (repo, run id)
    held: list[str] = field(default_factory=list)  # why a canary was not released (one per label)


@dataclass
class RepairResult:
    checked: int = 0
    updated: int = 0
    timed_out: int = 0
    requeued: int = 0
    collect_enqueued: int = 0


def _now() -> datetime:
    return datetime.now(UTC)


def _aware(value: datetime | None) -> datetime | None:
    # SQLite hands timezone-aware columns back naive; they were written in UTC.
    if value is not None and value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value


# ---------------------------------------------------------------------------------------------
# optional collaborators (other capabilities; imported lazily)


def _mark_dirty(session: Session, sweep_id: int) -> None:
    mark_report_dirty(session, sweep_id)


def _find_reusable(
    session: Session,
    *,
    image: str,
    fingerprint: str,
    result_name: str,
    point: Mapping[str, Any] | None = None,
) -> Any:
    """A stored result that serves this point: its throughput result, and its eval when it runs one."""
    marks = point or {}
    eval_only = bool(marks.get("eval-only"))
    hit = (
        None
        if eval_only
        else find_reusable(session, image=image, fingerprint=fingerprint, result_name=result_name)
    )
    if hit is None and not eval_only:
        return None
    if marks.get("run-eval") or eval_only:
        # A throughput result alone does not answer an eval point (nor the reverse).
        evaluated = find_reusable_eval(session, image=image, fingerprint=fingerprint, result_name=result_name)
        if evaluated is None:
            return None
        return hit or evaluated
    return hit


def _result_link(result: Any) -> str | None:
    for attr in ("run_url", "url", "html_url"):
        value = getattr(result, attr, None)
        if isinstance(value, str) and value:
            return value
    rid = getattr(result, "id", None)
    return f"result:{rid}" if rid is not None else None


def _enqueue(task: str, *args: Any) -> None:
    from app.adapters.queue import enqueue

    enqueue(task, *args)


# ---------------------------------------------------------------------------------------------
# dispatch template


_PLACEHOLDERS = (
    "key",
    "config_file",
    "seq",
    "conc",
    "tp",
    "head_sha",
    "head_ref",
    "base_ref",
    "run_name",
    "pr",
    "evals",
)
CLI_INPUT = "generate-cli-command"
CONFIG_FILE_RE = re.compile(r"^[A-Za-z0-9_.][A-Za-z0-9_./-]{0,254}$")
# What {evals} may become: the repo generator's eval flags, with a leading space (empty: default).
_EVAL_FLAG_VALUES = ("", " --no-evals", " --evals-only", " --evals-only --all-evals")


def _template_fields(settings: Settings) -> set[str]:
    texts = [settings.dispatch_workflow, settings.dispatch_ref, *_input_template(settings).values()]
    found: set[str] = set()
    for text in texts:
        for _lit, name, _spec, _conv in string.Formatter().parse(text):
            if name is None:
                continue
            if name not in _PLACEHOLDERS:
                raise SettingsError(
                    f"dispatch template uses {{{name}}}; allowed placeholders: "
                    + ", ".join("{" + p + "}" for p in _PLACEHOLDERS)
                )
            found.add(name)
    return found


def _input_template(settings: Settings) -> dict[str, str]:
    try:
        data = json.loads(settings.dispatch_inputs)
    except ValueError as exc:
        raise SettingsError(f"SWEEPBOT_DISPATCH_INPUTS is not JSON: {exc}") from exc
    if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
        raise SettingsError("SWEEPBOT_DISPATCH_INPUTS must be a JSON object of string templates")
    return {str(k): v for k, v in data.items()}


def render_dispatch(
    settings: Settings,
    *,
    key: str,
    seq: str,
    conc: int,
    tp: int,
    head_sha: str,
    head_ref: str,
    base_ref: str,
    run_name: str,
    pr: int,
    config_file: str = "",
    evals: str = "",
    concs: Sequence[int] | None = None,
) -> tuple[str, str, dict[str, str]]:
    """(workflow, ref, inputs) from the configured template, filled only with validated values.

    ``config_file`` is the repo path of the master file the key lives in (``--config-files``).
    A ``generate-cli-command`` input must parse under the repo CLI's grammar (app.core.sweepcli).
    ``evals`` is the generator's eval flags for the dispatched points (see ``dispatch_eval_flags``).
    ``concs``: a multi-node row runs its whole conc list on one engine, so ``{conc}`` becomes the
    list, space-separated as the repo's ``--conc CONC [CONC ...]`` takes it. ``seq`` is
    ``agentic`` for agentic-coding points, which have no seq-len: a ``--seq-lens {seq}`` in the
    template is left out for them (any other use of ``{seq}`` is refused with the reason).
    """
    if not KEY_RE.match(key):
        raise SweepError(f"config key {key!r} has characters a dispatch may not carry")
    agentic = seq == AGENTIC_SEQ
    if not agentic and not SEQ_RE.match(seq):
        raise SweepError(f"seq-len {seq!r} is not 1k1k, 8k1k or <isl>_<osl>")
    if not SHA_RE.match(head_sha):
        raise SweepError(f"head sha {head_sha!r} is not 40 lowercase hex characters")
    for name, ref in (("head ref", head_ref), ("base ref", base_ref)):
        if not REF_RE.match(ref):
            raise SweepError(f"{name} {ref!r} is not a plain branch name")
    if not re.fullmatch(r"sweepbot-\d+-\d+", run_name):
        raise SweepError(f"run name {run_name!r} is not sweepbot-<sweep>-<job>")
    if config_file and (not CONFIG_FILE_RE.match(config_file) or ".." in config_file.split("/")):
        raise SweepError(f"config file {config_file!r} is not a plain path inside the repository")
    used = _template_fields(settings)  # rejects unknown placeholders with a clear message
    if "config_file" in used and not config_file:
        raise SweepError(f"{key}: the sweep does not know which master file holds the key (--config-files)")
    if evals not in _EVAL_FLAG_VALUES:
        raise SweepError(f"eval flags {evals!r} are not one of the generator's eval modes")
    conc_text = " ".join(str(int(c)) for c in concs) if concs else str(int(conc))
    values = {
        "key": key,
        "config_file": config_file,
        "seq": seq,
        "conc": conc_text,
        "tp": str(int(tp)),
        "head_sha": head_sha,
        "head_ref": head_ref,
        "base_ref": base_ref,
        "run_name": run_name,
        "pr": str(int(pr)),
        "evals": evals,
    }
    templates = _input_template(settings)
    if agentic:
        templates = {k: v.replace(" --seq-lens {seq}", "") for k, v in templates.items()}
        if any(
            "{seq}" in t for t in [settings.dispatch_workflow, settings.dispatch_ref, *templates.values()]
        ):
            raise SweepError(
                "agentic-coding points have no seq-len, but the dispatch template uses {seq} outside "
                "`--seq-lens {seq}`; change SWEEPBOT_DISPATCH_INPUTS so the seq-len is optional"
            )
    workflow = settings.dispatch_workflow.format_map(values)
    ref = settings.dispatch_ref.format_map(values)
    inputs = {k: v.format_map(values) for k, v in templates.items()}
    if CLI_INPUT in inputs:
        from app.core.sweepcli import CliGrammarError, parse_command

        try:
            parse_command(inputs[CLI_INPUT])
        except CliGrammarError as exc:
            raise SweepError(
                f"the {CLI_INPUT} input would be refused by the repo's generate_sweep_configs.py: {exc}; "
                "fix SWEEPBOT_DISPATCH_INPUTS (see docs/configuration.md)"
            ) from exc
    return workflow, ref, inputs


def dispatch_eval_flags(points: Sequence[Mapping[str, Any]], sweep_mode: str = "default") -> str:
    """The generator's eval flags for one dispatch of ``points`` (plan dicts with eval marks).

    The bot dispatches a few concurrencies at a time, and the repo's generator would treat each
    such slice as a whole sweep (its highest conc is always "selected"), so the bot says what it
    planned: `--no-evals` when none of the points runs an eval (no eval job is spent on a scarce
    runner), `--evals-only [--all-evals]` for eval-only points, nothing for default evals.
    """
    from app.core.recipes.evals import EvalMode, cli_flags

    if any(p.get("eval-only") for p in points):
        mode = EvalMode.ALL if sweep_mode == EvalMode.ALL.value else EvalMode.ONLY
    elif any(p.get("run-eval") for p in points):
        mode = EvalMode.DEFAULT
    else:
        mode = EvalMode.NONE
    flags = cli_flags(mode)
    return f" {flags}" if flags else ""


def group_fields(settings: Settings) -> tuple[str, ...]:
    """Which point fields select a dispatch's points: conc, plus seq / tp when the template uses them."""
    used = _template_fields(settings)
    # test-config selects keys and concurrencies only (no --seq-lens, no --tp): one dispatch at a
    # conc runs every seq-len and tp of the key at that conc. A template that names {seq} or {tp}
    # narrows its dispatches, so its groups do too.
    fields = ["conc"]
    if "seq" in used:
        fields.insert(0, "seq")
    if "tp" in used:
        fields.append("tp")
    return tuple(fields)


def _group_key(point: dict[str, Any], fields: Sequence[str]) -> str:
    seq = _point_seq(point)
    vals = {"seq": seq, "conc": point["conc"], "tp": _point_tp(point)}
    if isinstance(point["conc"], list):
        # Multi-node rows: `--conc` cannot pick one topology (a row runs every listed conc), so the
        # key's rows go out in one dispatch whose `--conc` is the union of their lists.
        return "/".join(["conc=rows", *(f"{f}={vals[f]}" for f in fields if f != "conc")])
    return "/".join(f"{f}={vals[f]}" for f in fields)


def _point_seq(point: dict[str, Any]) -> str:
    """The point's seq-len name; agentic-coding points have none and say `agentic`."""
    from app.core.recipes.master import seq_name

    if "isl" not in point:
        return AGENTIC_SEQ
    return seq_name(int(point["isl"]), int(point["osl"]))


def _point_conc(point: Mapping[str, Any]) -> int:
    """One conc per job row: a multi-node row (whole conc list on one engine) is keyed by its highest."""
    conc = point["conc"]
    return max(int(c) for c in conc) if isinstance(conc, list) else int(conc)


def _row_concs(jobs: Sequence[SweepJob]) -> list[int] | None:
    """The conc list of dispatched multi-node rows (None for single-conc points)."""
    lists = [
        j.point["conc"] for j in jobs if isinstance(j.point, dict) and isinstance(j.point.get("conc"), list)
    ]
    if not lists:
        return None
    return sorted({int(c) for conc in lists for c in conc})


def _point_tp(point: Mapping[str, Any]) -> int:
    """A multi-node row has no top-level tp: its decode workers' tp stands for it in views."""
    return int(point["tp"]) if "tp" in point else int(point["decode"]["tp"])


# ---------------------------------------------------------------------------------------------
# reading the benchmark repo


def _master_files(gw: Any, repo: str, ref: str) -> dict[str, str]:
    files: dict[str, str] = {}
    for directory in MASTER_DIRS:
        for item in gw.list_dir(repo, directory, ref=ref):
            path = str(item.get("path") or f"{directory}/{item.get('name')}")
            if item.get("type") == "file" and path.endswith("master.yaml"):
                got = gw.get_file(repo, path, ref=ref)
                if got is not None:
                    files[path] = got[0]
    return files


def _locate(files: dict[str, str], key: str) -> str:
    from app.core.recipes import locate_key

    found = locate_key(files, key)
    if not found.found or found.path is None:
        raise SweepError(found.reason)
    return str(found.path)


_capacity_cache: dict[str, tuple[float, dict[str, int]]] = {}
_capacity_lock = threading.Lock()


def _runners_yaml_capacity(gw: Any, repo: str) -> dict[str, int]:
    with _capacity_lock:
        hit = _capacity_cache.get(repo)
        if hit is not None and time.monotonic() - hit[0] < CAPACITY_CACHE_SECONDS:
            return hit[1]
    from app.core.recipes import runner_capacity

    counts: dict[str, int] = {}
    try:
        default_branch = str(gw.get_repo(repo).get("default_branch") or "main")
        for path in RUNNERS_YAML_PATHS:
            got = gw.get_file(repo, path, ref=default_branch)
            if got is not None:
                counts = runner_capacity(got[0])
                break
    except (TransientError, ValueError) as exc:
        log.warning("runners_yaml_unreadable", repo=repo, error=str(exc))
        return {}  # not cached: try again next tick
    with _capacity_lock:
        _capacity_cache[repo] = (time.monotonic(), counts)
    return counts


def clear_capacity_cache() -> None:
    with _capacity_lock:
        _capacity_cache.clear()


def label_capacity(
    gw: Any, label: str, repo: str | None, settings: Settings | None = None
) -> tuple[int, str]:
    """Capacity of a runner label and where it came from: settings, the repo's runners.yaml, or default."""
    settings = settings or get_settings()
    if label in settings.runner_capacity:
        return settings.runner_capacity[label], "settings"
    if repo is not None and gw is not None:
        counts = _runners_yaml_capacity(gw, repo)
        if label in counts:
            return counts[label], f"runners.yaml of {repo}"
    return DEFAULT_CAPACITY, "default"


# ---------------------------------------------------------------------------------------------
# creating sweeps


def _validate_repo(repo: str) -> None:
    if not REPO_RE.match(repo):
        raise SweepError(f"repository {repo!r} must be OWNER/NAME")


def _priority(priority: str | int) -> int:
    if isinstance(priority, int):
        return priority
    if priority not in PRIORITIES:
        raise SweepError(f"priority {priority!r} is not one of {', '.join(PRIORITIES)}")
    return PRIORITIES[priority]


def point_order(points: Sequence[dict[str, Any]]) -> list[int]:
    """The sweep's point order: ``position`` of each point (given in the repo's expansion order).

    Largest conc first, ties in the repo's order: the longest jobs start first, so a sweep's tail
    (and the makespan of several sweeps sharing a label) stays short.
    """
    ranked = sorted(range(len(points)), key=lambda i: (-_point_conc(points[i]), i))
    positions = [0] * len(points)
    for rank, index in enumerate(ranked):
        positions[index] = rank
    return positions


def display_key(job: SweepJob) -> tuple[str, int, int, int]:
    """How views list a sweep's jobs: per seq-len and tp, ascending conc (as a curve is read)."""
    return (job.seq, job.tp, job.conc, job.id)


def points_digest(result_names: Iterable[str]) -> str:
    return hashlib.sha256("\n".join(sorted(result_names)).encode()).hexdigest()


def _pr_heads(pr: dict[str, Any], repo: str) -> tuple[str, str, str | None, str, bool]:
    head = pr.get("head") or {}
    base = pr.get("base") or {}
    head_repo = ((head.get("repo") or {}).get("full_name")) if isinstance(head.get("repo"), dict) else None
    sha = str(head.get("sha") or "")
    ref = str(head.get("ref") or "")
    base_ref = str(base.get("ref") or "main")
    # A deleted fork has no head repo: treat it as a fork (the conservative side).
    is_fork = head_repo is None or head_repo.lower() != repo.lower()
    return sha, ref, head_repo, base_ref, is_fork


def request_sweep(
    session: Session,
    gw: Any,
    *,
    repo: str,
    pr_number: int,
    config_key: str,
    requested_by: str,
    reason: str,
    filters: SweepFilters | None = None,
    priority: str | int = "normal",
) -> SweepRequest:
    """Plan ``config_key`` at the PR's head and queue one job per point (see module docstring)."""
    from app.core.recipes import expand_points, parse_master, recipe_fingerprint
    from app.core.recipes.errors import RecipeError
    from app.core.recipes.evals import parse_eval_mode, plan_with_evals
    from app.core.recipes.master import get_entry, script_candidates

    _validate_repo(repo)
    if not KEY_RE.match(config_key):
        raise SweepError(f"config key {config_key!r} is malformed: use letters, digits, '.', '_' and '-'")
    if reason not in ("command", "bump", "api"):
        raise SweepError(f"reason {reason!r} must be command, bump or api")
    prio = _priority(priority)
    filters = filters or SweepFilters()
    if filters.seq is not None and not SEQ_RE.match(filters.seq):
        raise SweepError(f"seq={filters.seq!r} is not 1k1k, 8k1k or <isl>_<osl>")

    pr = gw.get_pull(repo, pr_number)
    if pr.get("state") != "open":
        raise SweepError(f"{repo}#{pr_number} is {pr.get('state')}: sweeps run on open pull requests only")
    head_sha, head_ref, head_repo, base_ref, is_fork = _pr_heads(pr, repo)
    if not SHA_RE.match(head_sha):
        raise SweepError(f"{repo}#{pr_number} has no usable head sha")

    # The PR's files live at its head sha (a fork's commits are reachable from the base repo).
    files = _master_files(gw, repo, head_sha)
    path = _locate(files, config_key)
    try:
        master = parse_master(files[path])
        entry = get_entry(master, config_key)
        mode = parse_eval_mode(filters.evals)
        rows = plan_with_evals(
            master,
            config_key,
            seq=filters.seq,
            conc=list(filters.conc) if filters.conc else None,
            tp=filters.tp,
            mode=mode,
        )
        if filters.conc_range is not None:
            lo, hi = filters.conc_range
            kept = [r for r in rows if lo <= _point_conc(r) <= hi]
            if not kept:
                raise SweepError(
                    f"conc={lo}..{hi} matches none of {config_key}'s "
                    f"{'eval ' if mode.value == 'only' else ''}conc values "
                    f"({', '.join(str(c) for c in sorted({_point_conc(r) for r in rows}))})"
                )
            rows = kept
        log.info(
            "sweep_planned",
            key=config_key,
            points=len(rows),
            evals=sum(1 for r in rows if r.get("run-eval")),
            eval_mode=mode.value,
            why="eval points per the repo's documented selection (8k1k, highest and median conc per TP)",
        )
        settings = get_settings()
        fields = group_fields(settings)
        # Slots per dispatch: every point the workflow's command expands to for that group.
        slots: dict[str, int] = {}
        # Every point of the key, at every seq-len: one dispatch at a conc runs them all.
        for p in expand_points(master, config_key):
            gk = _group_key(p.to_json(), fields)
            slots[gk] = slots.get(gk, 0) + 1
    except RecipeError as exc:
        raise SweepError(str(exc)) from exc

    script_text = None
    for candidate in script_candidates(entry):
        got = gw.get_file(repo, candidate, ref=head_sha)
        if got is not None:
            script_text = got[0]
            break
    fingerprint = recipe_fingerprint(entry, script_text)
    image = str(rows[0]["image"]) if rows else ""

    sweep_cfg = sweep_settings(session, repo)
    if sweep_cfg.mode == "label":
        if filters.seq or filters.conc or filters.conc_range or filters.tp:
            raise SweepError(
                f"{repo} runs sweeps in label mode (.github/sweepbot.yml sweep.mode): the repo's "
                f"{sweep_cfg.workflow} runs the key's full sweep, so seq/conc/tp filters cannot apply; "
                "drop them, or use sweep.mode: dispatch"
            )
        if is_fork:
            raise SweepError(
                "label mode follows the repo's own run-sweep.yml, which does not fan out for fork PRs; "
                "use sweep.mode: dispatch (with /sweep approve) for this PR"
            )
    sweep, created, superseded = create_sweep(
        session,
        gw,
        mode=sweep_cfg.mode,
        repo=repo,
        pr_number=pr_number,
        head_sha=head_sha,
        head_ref=head_ref,
        base_ref=base_ref,
        head_repo=head_repo,
        is_fork=is_fork,
        config_key=config_key,
        config_path=path,
        image=image,
        fingerprint=fingerprint,
        points=rows,
        requested_by=requested_by,
        reason=reason,
        filters=filters,
        priority=prio,
        slots=slots,
    )
    if sweep_cfg.mode == "label" and created:
        _apply_sweep_label(session, gw, sweep, pr, sweep_cfg.label)
    plan = plan_for(session, gw, sweep)
    return SweepRequest(
        sweep=sweep, plan=plan, created=created, reply=reply_text(sweep, plan, created), superseded=superseded
    )


def sweep_settings(session: Session, repo: str) -> Any:
    """The repo's sweep mode (botconfig.SweepSettings) from its last read config; no GitHub call."""
    from app.flows.botconfig import BotConfig, stored_config

    return (stored_config(session, repo) or BotConfig()).sweep


def sweep_mode(sweep: Sweep) -> str:
    """``dispatch`` or ``label``: kept in the sweep's filters JSON (set once, at creation)."""
    return str((sweep.filters or {}).get("mode") or "dispatch")


def _apply_sweep_label(session: Session, gw: Any, sweep: Sweep, pr: dict[str, Any], label: str) -> None:
    """Label mode: put the repo's primary sweep label on the PR (idempotent: GitHub keeps one)."""
    present = {str(lb.get("name")) for lb in pr.get("labels") or [] if isinstance(lb, dict)}
    if label in present:
        # Already labelled: the bump's push (synchronize) is what starts the repo's run.
        log.info("sweep_label_present", repo=sweep.repo, pr=sweep.pr_number, label=label)
        return
    gw.add_labels(sweep.repo, sweep.pr_number, [label])
    record(
        session,
        actor=BOT,
        action="sweep.label",
        target=f"{sweep.repo}#{sweep.pr_number}",
        detail={"sweep": sweep.id, "label": label},
    )


def create_sweep(
    session: Session,
    gw: Any,
    *,
    mode: str = "dispatch",
    repo: str,
    pr_number: int,
    head_sha: str,
    head_ref: str,
    base_ref: str,
    head_repo: str | None,
    is_fork: bool,
    config_key: str,
    config_path: str | None,
    image: str,
    fingerprint: str,
    points: Sequence[dict[str, Any]],
    requested_by: str,
    reason: str,
    filters: SweepFilters | None = None,
    priority: int = PRIORITIES["normal"],
    slots: dict[str, int] | None = None,
    supersede: bool = True,
) -> tuple[Sweep, bool, list[int]]:
    """Store a sweep with one job per point; returns (sweep, created, ids of sweeps it superseded).

    An open sweep for the same PR, key, head sha, image and points is returned as is (replays of a
    command or a bump converge). Older open sweeps of the same PR and key are superseded, unless
    ``supersede`` is False (canaries: one sweep per nightly, several may be open at once).

    ``mode`` ``label``: the repo's own run-sweep.yml runs the points, so the jobs start out
    ``dispatched`` (holding their runner slots, never released by a tick) with no run, until the
    repo's run is found (``_find_label_run``).
    """
    if not points:
        raise SweepError(f"{config_key}: the plan has no points")
    from app.db import transaction_lock

    settings = get_settings()
    fields = group_fields(settings)
    # Eval marks are part of what a sweep runs: the same points under another eval mode are a new sweep.
    digest = points_digest(
        str(p["result-name"])
        + ("|eval" if p.get("run-eval") else "")
        + ("|eval-only" if p.get("eval-only") else "")
        for p in points
    )
    # Two identical requests at once (a command and a bump, two workers) must not both find no
    # open sweep and both create one.
    transaction_lock(session, f"sweep:{repo}#{pr_number}:{config_key}")
    existing = session.scalars(
        select(Sweep)
        .where(
            Sweep.repo == repo,
            Sweep.pr_number == pr_number,
            Sweep.config_key == config_key,
            Sweep.state.in_(SweepState.OPEN),
        )
        .order_by(Sweep.id)
    ).all()
    for old in existing:
        if (
            old.head_sha == head_sha
            and old.image == image
            and old.points_digest == digest
            and old.fingerprint == fingerprint
        ):
            return old, False, []

    now = _now()
    sweep = Sweep(
        repo=repo,
        pr_number=pr_number,
        head_sha=head_sha,
        head_ref=head_ref,
        base_ref=base_ref,
        head_repo=head_repo,
        is_fork=is_fork,
        config_key=config_key,
        config_path=config_path,
        image=image,
        fingerprint=fingerprint,
        points_digest=digest,
        filters={**(filters or SweepFilters()).to_json(), "mode": mode},
        requested_by=requested_by,
        reason=reason,
        priority=priority,
        state=SweepState.AWAITING_APPROVAL if is_fork else SweepState.ACTIVE,
        last_release=0,
        updated_at=now,
    )
    session.add(sweep)
    session.flush()
    # Jobs are inserted in the repo's order (ids follow it); ``position`` is the release order.
    for point, pos in zip(points, point_order(points), strict=True):
        gk = _group_key(point, fields)
        job = SweepJob(
            sweep_id=sweep.id,
            position=pos,
            point=dict(point),
            result_name=str(point["result-name"]),
            runner_label=str(point["runner"]),
            seq=_point_seq(point),
            conc=_point_conc(point),
            tp=_point_tp(point),
            group_key=gk,
            # label mode: the repo's run gives each point its own runner
            slots=max(1, (slots or {}).get(gk, 1)) if mode == "dispatch" else 1,
            state=JobState.QUEUED if mode == "dispatch" else JobState.DISPATCHED,
            attempts=0 if mode == "dispatch" else 1,
            dispatched_at=None if mode == "dispatch" else now,
            reason=None if mode == "dispatch" else "waiting for the repo's sweep run",
            updated_at=now,
        )
        reusable = _find_reusable(
            session, image=image, fingerprint=fingerprint, result_name=job.result_name, point=point
        )
        if reusable is not None:
            job.state, job.finished_at = JobState.REUSED, now
            job.result_url = _result_link(reusable)
            job.reason = "same image, recipe and point already measured"
        session.add(job)
    session.flush()

    superseded: list[int] = []
    for old in existing if supersede else []:
        _close_sweep(
            session,
            gw,
            old,
            state=SweepState.SUPERSEDED,
            actor=requested_by,
            reason=f"superseded by sweep {sweep.id}",
            superseded_by=sweep.id,
        )
        superseded.append(old.id)
    record(
        session,
        actor=requested_by,
        action="sweep.create",
        target=f"{repo}#{pr_number}",
        detail={
            "sweep": sweep.id,
            "key": config_key,
            "head_sha": head_sha,
            "image": image,
            "points": len(points),
            "reason": reason,
            "fork": is_fork,
            "superseded": superseded,
        },
    )
    _maybe_finish_sweep(session, sweep)
    _mark_dirty(session, sweep.id)
    return sweep, True, superseded


def plan_for(session: Session, gw: Any, sweep: Sweep) -> SweepPlan:
    jobs = session.scalars(
        select(SweepJob).where(SweepJob.sweep_id == sweep.id).order_by(SweepJob.position)
    ).all()
    label = jobs[0].runner_label if jobs else ""
    capacity, source = label_capacity(gw, label, sweep.repo)
    ahead_rows = session.execute(
        select(func.count())
        .select_from(SweepJob)
        .join(Sweep, Sweep.id == SweepJob.sweep_id)
        .where(
            SweepJob.runner_label == label,
            SweepJob.sweep_id != sweep.id,
            SweepJob.state.in_((JobState.QUEUED, *JobState.IN_FLIGHT)),
            Sweep.state == SweepState.ACTIVE,
            Sweep.priority <= sweep.priority,
        )
    ).scalar_one()
    durations = [
        (_aware(j.finished_at) - _aware(j.started_at)).total_seconds()  # type: ignore[operator]
        for j in session.scalars(
            select(SweepJob)
            .where(
                SweepJob.runner_label == label,
                SweepJob.state == JobState.SUCCEEDED,
                SweepJob.started_at.is_not(None),
                SweepJob.finished_at.is_not(None),
            )
            .order_by(SweepJob.id.desc())
            .limit(50)
        )
    ]
    wait = None
    if durations:
        avg = sum(durations) / len(durations)
        wait = (int(ahead_rows) // max(1, capacity)) * avg
    return SweepPlan(
        points=[j.point for j in sorted(jobs, key=display_key)],
        runner_label=label,
        capacity=capacity,
        capacity_source=source,
        jobs_ahead=int(ahead_rows),
        expected_wait_seconds=wait,
        reused=sum(1 for j in jobs if j.state == JobState.REUSED),
    )


def _fmt_seconds(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def reply_text(sweep: Sweep, plan: SweepPlan, created: bool) -> str:
    concs = sorted({_point_conc(p) for p in plan.points})
    head = (
        (f"Sweep {sweep.id} queued" if created else f"Sweep {sweep.id} is already queued for this head")
        + f" for `{sweep.config_key}` at `{sweep.head_sha[:7]}`: {len(plan.points)} point(s), conc "
        + ", ".join(str(c) for c in concs)
        + f", on `{plan.runner_label}` "
        + f"({plan.capacity} runner(s), {plan.capacity_source})."
    )
    lines = [head]
    if plan.reused:
        lines.append(f"{plan.reused} point(s) reuse stored results for the same image and recipe.")
    if plan.jobs_ahead:
        wait = (
            f", expected wait about {_fmt_seconds(plan.expected_wait_seconds)}"
            if plan.expected_wait_seconds is not None
            else ""
        )
        lines.append(f"{plan.jobs_ahead} job(s) ahead on `{plan.runner_label}`{wait}.")
    else:
        lines.append("No jobs ahead: it starts on the next scheduler tick.")
    if sweep.state == SweepState.AWAITING_APPROVAL:
        lines.append(
            f"This PR comes from a fork: a maintainer must comment `/sweep approve` for head "
            f"`{sweep.head_sha[:7]}` before anything runs (a new push needs a new approval)."
        )
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# cancellation, approval, retries


def _cancel_runs(gw: Any, repo: str, run_ids: Iterable[int]) -> list[str]:
    errors = []
    for run_id in sorted(set(run_ids)):
        try:
            gw.cancel_run(repo, run_id)
        except Exception as exc:  # one run that cannot be cancelled must not block the others
            errors.append(f"run {run_id}: {exc}")
            log.warning("cancel_run_failed", repo=repo, run_id=run_id, error=str(exc))
    return errors


def _close_sweep(
    session: Session,
    gw: Any,
    sweep: Sweep,
    *,
    state: str,
    actor: str,
    reason: str,
    superseded_by: int | None = None,
) -> list[str]:
    now = _now()
    jobs = session.scalars(
        select(SweepJob).where(SweepJob.sweep_id == sweep.id, SweepJob.state.notin_(JobState.FINAL))
    ).all()
    run_ids = [j.run_id for j in jobs if j.state in JobState.IN_FLIGHT and j.run_id is not None]
    for job in jobs:
        job.state, job.reason, job.finished_at, job.updated_at = JobState.CANCELLED, reason, now, now
    sweep.state, sweep.state_reason, sweep.updated_at, sweep.finished_at = state, reason, now, now
    if superseded_by is not None:
        sweep.superseded_by = superseded_by
    session.flush()
    errors = _cancel_runs(gw, sweep.repo, run_ids) if gw is not None else []
    record(
        session,
        actor=actor,
        action="sweep.cancel" if state == SweepState.CANCELLED else "sweep.supersede",
        target=f"{sweep.repo}#{sweep.pr_number}",
        detail={
            "sweep": sweep.id,
            "reason": reason,
            "jobs": len(jobs),
            "runs_cancelled": sorted(set(run_ids)),
            "errors": errors,
        },
        outcome="ok" if not errors else "failed",
    )
    _mark_dirty(session, sweep.id)
    return errors


def _get_sweep(session: Session, sweep_id: int) -> Sweep:
    sweep = session.get(Sweep, sweep_id)
    if sweep is None:
        raise SweepError(f"sweep {sweep_id} does not exist (see `sweepbot queue` for open sweeps)")
    return sweep


def cancel_sweep(session: Session, gw: Any, sweep_id: int, *, actor: str, reason: str) -> Sweep:
    """Cancel queued jobs and running runs (Actions cancel API) of one sweep. Idempotent."""
    sweep = _get_sweep(session, sweep_id)
    stragglers = session.scalars(
        select(SweepJob.id).where(SweepJob.sweep_id == sweep.id, SweepJob.state.notin_(JobState.FINAL))
    ).first()
    if sweep.state in SweepState.FINAL and stragglers is None:
        return sweep
    _close_sweep(
        session,
        gw,
        sweep,
        state=SweepState.CANCELLED if sweep.state in SweepState.OPEN else sweep.state,
        actor=actor,
        reason=reason,
    )
    return sweep


def cancel_pr_sweeps(
    session: Session,
    gw: Any,
    *,
    repo: str,
    pr_number: int,
    actor: str,
    reason: str,
    keep_head_sha: str | None = None,
    config_key: str | None = None,
) -> list[Sweep]:
    """Cancel every open sweep of a PR (or only those not at ``keep_head_sha``)."""
    query = select(Sweep).where(
        Sweep.repo == repo, Sweep.pr_number == pr_number, Sweep.state.in_(SweepState.OPEN)
    )
    if config_key is not None:
        query = query.where(Sweep.config_key == config_key)
    out = []
    for sweep in session.scalars(query.order_by(Sweep.id)).all():
        if keep_head_sha is not None and sweep.head_sha == keep_head_sha:
            continue
        state = SweepState.SUPERSEDED if keep_head_sha is not None else SweepState.CANCELLED
        _close_sweep(session, gw, sweep, state=state, actor=actor, reason=reason)
        out.append(sweep)
    return out


def approve_pr(
    session: Session, gw: Any, *, repo: str, pr_number: int, head_sha: str | None, approver: str
) -> str:
    """Approve the fork PR's open sweeps for exactly ``head_sha`` (default: the PR's current head)."""
    role = gw.permission(repo, approver)
    if role not in WRITE_ROLES:
        record(
            session,
            actor=approver,
            action="sweep.approve",
            target=f"{repo}#{pr_number}",
            outcome="refused",
            detail={"role": role},
        )
        return (
            f"@{approver} has `{role}` permission on {repo}; approving a fork's sweep needs write, "
            "maintain or admin."
        )
    pr = gw.get_pull(repo, pr_number)
    current = str((pr.get("head") or {}).get("sha") or "")
    head_sha = head_sha or current
    if head_sha != current:
        record(
            session,
            actor=approver,
            action="sweep.approve",
            target=f"{repo}#{pr_number}",
            outcome="refused",
            detail={"asked": head_sha, "head": current},
        )
        return (
            f"The PR's head is now `{current[:7]}`, not `{head_sha[:7]}`: review the new commits and "
            "approve again."
        )
    sweeps = session.scalars(
        select(Sweep).where(
            Sweep.repo == repo,
            Sweep.pr_number == pr_number,
            Sweep.state.in_(SweepState.OPEN),
            Sweep.head_sha == head_sha,
        )
    ).all()
    now = _now()
    for sweep in sweeps:
        sweep.approved_by, sweep.approved_sha, sweep.approved_at = approver, head_sha, now
        if sweep.state == SweepState.AWAITING_APPROVAL:
            sweep.state, sweep.state_reason = SweepState.ACTIVE, f"approved by {approver} for {head_sha[:7]}"
        sweep.updated_at = now
        _mark_dirty(session, sweep.id)
    record(
        session,
        actor=approver,
        action="sweep.approve",
        target=f"{repo}#{pr_number}",
        detail={"head_sha": head_sha, "sweeps": [s.id for s in sweeps]},
    )
    if not sweeps:
        return f"Nothing to approve: no open sweep of {repo}#{pr_number} is at `{head_sha[:7]}`."
    return (
        f"Approved by @{approver} for `{head_sha[:7]}`: sweep(s) "
        + ", ".join(str(s.id) for s in sweeps)
        + " will run. A new push needs a new approval."
    )


def retry_job(session: Session, job_id: int, *, actor: str) -> SweepJob:
    """Put a failed or cancelled job back in the queue (its sweep reopens)."""
    job = session.get(SweepJob, job_id)
    if job is None:
        raise SweepError(f"job {job_id} does not exist")
    if job.state not in (JobState.FAILED, JobState.CANCELLED):
        raise SweepError(f"job {job_id} is {job.state}; only failed or cancelled jobs can be retried")
    sweep = _get_sweep(session, job.sweep_id)
    if sweep.state == SweepState.SUPERSEDED:
        raise SweepError(f"sweep {sweep.id} was superseded by sweep {sweep.superseded_by}; retry that one")
    _requeue(job, f"retried by {actor}")
    _reopen(sweep)
    record(
        session,
        actor=actor,
        action="sweep.retry_job",
        target=f"{sweep.repo}#{sweep.pr_number}",
        detail={"sweep": sweep.id, "job": job.id},
    )
    _mark_dirty(session, sweep.id)
    return job


def retry_sweep(session: Session, sweep_id: int, *, actor: str) -> Sweep:
    """Re-queue every failed or cancelled job of a sweep."""
    sweep = _get_sweep(session, sweep_id)
    if sweep.state == SweepState.SUPERSEDED:
        raise SweepError(f"sweep {sweep.id} was superseded by sweep {sweep.superseded_by}; retry that one")
    jobs = session.scalars(
        select(SweepJob).where(
            SweepJob.sweep_id == sweep.id, SweepJob.state.in_((JobState.FAILED, JobState.CANCELLED))
        )
    ).all()
    if not jobs:
        raise SweepError(f"sweep {sweep.id} has no failed or cancelled job to retry")
    for job in jobs:
        _requeue(job, f"retried by {actor}")
    _reopen(sweep)
    record(
        session,
        actor=actor,
        action="sweep.retry",
        target=f"{sweep.repo}#{sweep.pr_number}",
        detail={"sweep": sweep.id, "jobs": [j.id for j in jobs]},
    )
    _mark_dirty(session, sweep.id)
    return sweep


def _requeue(job: SweepJob, reason: str) -> None:
    job.state, job.reason, job.claim = JobState.QUEUED, reason, None
    job.run_id = job.run_url = job.run_name = job.run_conclusion = None
    job.dispatched_at = job.started_at = job.finished_at = None
    job.updated_at = _now()


def _reopen(sweep: Sweep) -> None:
    approved = sweep.approved_sha is not None and sweep.approved_sha == sweep.head_sha
    sweep.state = SweepState.AWAITING_APPROVAL if sweep.is_fork and not approved else SweepState.ACTIVE
    sweep.finished_at, sweep.updated_at = None, _now()


def set_label_paused(session: Session, label: str, paused: bool, *, actor: str) -> RunnerLabel:
    """Pause (nothing new is released; runs in flight finish) or resume a runner label."""
    if not LABEL_RE.match(label):
        raise SweepError(f"runner label {label!r} is malformed")
    row = session.get(RunnerLabel, label)
    if row is None:
        row = RunnerLabel(label=label, paused=False, release_seq=0)
        session.add(row)
    row.paused = paused
    row.paused_by, row.paused_at = (actor, _now()) if paused else (None, None)
    row.updated_at = _now()
    session.flush()
    record(session, actor=actor, action="runners.pause" if paused else "runners.resume", target=label)
    return row


def finish_job(
    session: Session, job_id: int, state: str, *, reason: str | None = None, result_url: str | None = None
) -> SweepJob:
    """Record a job's final state (idempotent: a job already final keeps its first outcome)."""
    if state not in JobState.FINAL:
        raise SweepError(f"finish_job state {state!r} must be one of {', '.join(JobState.FINAL)}")
    job = session.get(SweepJob, job_id)
    if job is None:
        raise SweepError(f"job {job_id} does not exist")
    if job.state in JobState.FINAL:
        return job
    now = _now()
    job.state, job.finished_at, job.updated_at = state, now, now
    if reason is not None:
        job.reason = reason
    if result_url is not None:
        job.result_url = result_url
    session.flush()
    sweep = session.get(Sweep, job.sweep_id)
    if sweep is not None:
        _maybe_finish_sweep(session, sweep)
    _mark_dirty(session, job.sweep_id)
    return job


def _maybe_finish_sweep(session: Session, sweep: Sweep) -> None:
    if sweep.state not in SweepState.OPEN:
        return
    open_jobs = session.scalars(
        select(SweepJob.id).where(SweepJob.sweep_id == sweep.id, SweepJob.state.notin_(JobState.FINAL))
    ).first()
    if open_jobs is None:
        now = _now()
        sweep.state, sweep.finished_at, sweep.updated_at = SweepState.DONE, now, now


# ---------------------------------------------------------------------------------------------
# the tick


@dataclass
class _Claimed:
    sweep_id: int
    repo: str
    pr_number: int
    is_fork: bool
    approved_sha: str | None
    head_sha: str
    head_ref: str
    base_ref: str
    config_key: str
    run_name: str
    job_ids: list[int]
    seq: str
    conc: int
    tp: int
    token: str = ""  # this claim's token: only jobs still holding it are dispatched
    config_file: str = ""  # repo path of the master file holding the key


def _labels_with_work(session: Session) -> list[tuple[str, str]]:
    rows = session.execute(
        select(SweepJob.runner_label, func.min(Sweep.repo))
        .join(Sweep, Sweep.id == SweepJob.sweep_id)
        .where(SweepJob.state == JobState.QUEUED, Sweep.state == SweepState.ACTIVE)
        .group_by(SweepJob.runner_label)
    ).all()
    return [(str(r[0]), str(r[1])) for r in rows]


def _ensure_label(session_factory: sessionmaker[Session], label: str) -> None:
    with session_factory() as session:
        if session.get(RunnerLabel, label) is not None:
            return
        session.add(RunnerLabel(label=label, paused=False, release_seq=0, updated_at=_now()))
        try:
            session.commit()
        except IntegrityError:  # another tick created it first
            session.rollback()


def _lock_label(session: Session, label: str) -> RunnerLabel | None:
    """Take the label's lock row for this transaction; None when another tick holds it (PostgreSQL)."""
    if session.get_bind().dialect.name == "postgresql":
        return session.scalars(
            select(RunnerLabel).where(RunnerLabel.label == label).with_for_update(skip_locked=True)
        ).first()
    # SQLite: a write as the transaction's first statement takes the database write lock, so the
    # reads that follow see every committed claim and no other tick can claim until we commit.
    session.execute(
        update(RunnerLabel).where(RunnerLabel.label == label).values(release_seq=RunnerLabel.release_seq + 0)
    )
    return session.get(RunnerLabel, label)


def inflight_slots(session: Session, label: str) -> int:
    """Runner slots in use on ``label``: each in-flight dispatch counts its slots once.

    A job whose workflow job already succeeded only waits for collection: its runner is free.
    """
    rows = session.execute(
        select(SweepJob.run_name, SweepJob.id, SweepJob.slots).where(
            SweepJob.runner_label == label,
            SweepJob.state.in_(JobState.IN_FLIGHT),
            or_(SweepJob.run_conclusion.is_(None), SweepJob.run_conclusion != "success"),
        )
    ).all()
    per_run: dict[str, int] = {}
    for run_name, job_id, slots in rows:
        key = run_name or f"job-{job_id}"
        per_run[key] = max(per_run.get(key, 0), int(slots or 1))
    return sum(per_run.values())


def _real_waiting_slots(queues: dict[int, list[SweepJob]], sweeps: dict[int, Sweep]) -> int:
    """Slots of the real (non-canary) dispatches still queued: one count per dispatch group."""
    groups: dict[tuple[int, str], int] = {}
    for sid, queue in queues.items():
        if sweeps[sid].reason == CANARY_REASON:
            continue
        for job in queue:
            groups[(sid, job.group_key)] = max(1, job.slots)
    return sum(groups.values())


def _canary_budget(session: Session, repo: str) -> tuple[float, float | None, float]:
    """(canary runner-hours of ``repo`` used this week, the weekly budget, hours one canary takes)."""
    from app.flows.canary_budget import canary_budget

    usage = canary_budget(session, repo)
    return usage.used_hours, usage.budget_hours, usage.expected_job_hours


def _preempt_canaries(
    session: Session, label: str, capacity: int, in_flight: int, result: TickResult
) -> bool:
    """Put back in the queue the canary runs that stand in the way of waiting real work."""
    waiting = session.execute(
        select(SweepJob.sweep_id, SweepJob.group_key, func.max(SweepJob.slots))
        .join(Sweep, Sweep.id == SweepJob.sweep_id)
        .where(
            SweepJob.runner_label == label,
            SweepJob.state == JobState.QUEUED,
            Sweep.state == SweepState.ACTIVE,
            Sweep.reason != CANARY_REASON,
        )
        .group_by(SweepJob.sweep_id, SweepJob.group_key)
    ).all()
    real_waiting = sum(max(1, int(r[2] or 1)) for r in waiting)
    if real_waiting == 0 or capacity - in_flight >= min(real_waiting, capacity):
        return False
    running = session.execute(
        select(SweepJob, Sweep)
        .join(Sweep, Sweep.id == SweepJob.sweep_id)
        .where(
            SweepJob.runner_label == label,
            SweepJob.state.in_(JobState.IN_FLIGHT),
            Sweep.reason == CANARY_REASON,
            or_(SweepJob.run_conclusion.is_(None), SweepJob.run_conclusion != "success"),
        )
    ).all()
    by_run: dict[str, list[tuple[SweepJob, Sweep]]] = {}
    for job, sweep in running:
        by_run.setdefault(job.run_name or f"job-{job.id}", []).append((job, sweep))
    runs = [
        CanaryRun(name, max(max(1, j.slots) for j, _ in pairs), _aware(pairs[0][0].dispatched_at) or _now())
        for name, pairs in by_run.items()
    ]
    view = LabelView(label=label, capacity=capacity, in_flight=in_flight, real_waiting_slots=real_waiting)
    picked = pick_preemptions(view, runs)
    now = _now()
    for name in picked:
        pairs = by_run[name]
        job0, sweep0 = pairs[0]
        spent = ((now - (_aware(job0.dispatched_at) or now)).total_seconds() / 3600.0) * max(1, job0.slots)
        run_id = job0.run_id
        for job, _ in pairs:
            _requeue(job, f"preempted by real work waiting on {label}")
            job.attempts = max(0, job.attempts - 1)
        if run_id is not None:
            result.preempted.append((sweep0.repo, int(run_id)))
        _note_preempted_hours(session, sweep0.id, spent)
        record(
            session,
            actor=BOT,
            action="canary.preempt",
            target=name,
            detail={
                "sweep": sweep0.id,
                "jobs": [j.id for j, _ in pairs],
                "run_id": run_id,
                "label": label,
                "real_waiting_slots": real_waiting,
                "runner_hours": round(spent, 4),
            },
        )
    return bool(picked)


def _note_preempted_hours(session: Session, sweep_id: int, hours: float) -> None:
    from app.flows.canary_budget import note_preempted_hours

    note_preempted_hours(session, sweep_id, hours)


def _claim_label(session: Session, gw: Any, label: str, repo: str, result: TickResult) -> list[_Claimed]:
    row = _lock_label(session, label)
    if row is None:
        result.skipped_labels.append(label)
        return []
    if row.paused:
        result.skipped_labels.append(label)
        return []
    capacity, source = label_capacity(gw, label, repo)
    row.capacity, row.capacity_source = capacity, source
    in_flight = inflight_slots(session, label)
    if _preempt_canaries(session, label, capacity, in_flight, result):
        in_flight = inflight_slots(session, label)
    free = capacity - in_flight

    rows = session.execute(
        select(SweepJob, Sweep)
        .join(Sweep, Sweep.id == SweepJob.sweep_id)
        .where(
            SweepJob.runner_label == label,
            SweepJob.state == JobState.QUEUED,
            Sweep.state == SweepState.ACTIVE,
        )
        .order_by(Sweep.priority, Sweep.last_release, Sweep.id, SweepJob.position)
    ).all()
    queues: dict[int, list[SweepJob]] = {}
    sweeps: dict[int, Sweep] = {}
    for queued_job, queued_sweep in rows:
        queues.setdefault(queued_sweep.id, []).append(queued_job)
        sweeps[queued_sweep.id] = queued_sweep
    budgets: dict[str, tuple[float, float | None, float]] = {}  # repo -> (used, budget, expected)

    claimed: list[_Claimed] = []
    token = uuid.uuid4().hex
    now = _now()
    # Priority class first; inside a class, round-robin (one dispatch per sweep per round, the
    # sweep served least recently first); inside a sweep, its point order (``point_order``).
    for prio in sorted({s.priority for s in sweeps.values()}):
        order = [sid for sid in queues if sweeps[sid].priority == prio]
        progress = True
        while progress and order:
            progress = False
            for sid in list(order):
                sweep = sweeps[sid]
                queue = queues[sid]
                job: SweepJob | None = None
                while queue:
                    candidate = queue[0]
                    reusable = _find_reusable(
                        session,
                        image=sweep.image,
                        fingerprint=sweep.fingerprint,
                        result_name=candidate.result_name,
                        point=candidate.point if isinstance(candidate.point, dict) else None,
                    )
                    if reusable is None:
                        job = candidate
                        break
                    queue.pop(0)
                    candidate.state, candidate.finished_at, candidate.updated_at = JobState.REUSED, now, now
                    candidate.result_url = _result_link(reusable)
                    candidate.reason = "same image, recipe and point already measured"
                    result.reused += 1
                    _mark_dirty(session, sid)
                if job is None:
                    order.remove(sid)
                    _maybe_finish_sweep(session, sweep)
                    continue
                cost = max(1, job.slots)
                canary = sweep.reason == CANARY_REASON
                used, budget, expected = 0.0, None, 0.0
                if canary:
                    if sweep.repo not in budgets:
                        budgets[sweep.repo] = _canary_budget(session, sweep.repo)
                    used, budget, expected = budgets[sweep.repo]
                decision = release_decision(
                    Candidate(slots=cost, canary=canary, expected_hours=expected * cost),
                    LabelView(
                        label=label,
                        capacity=capacity,
                        in_flight=in_flight,
                        real_waiting_slots=_real_waiting_slots(queues, sweeps) if canary else 0,
                        canary_hours_used=used,
                        canary_budget_hours=budget,
                    ),
                )
                if not decision.release:
                    if canary and decision.reason not in result.held:
                        result.held.append(decision.reason)
                        log.info("canary_held", label=label, sweep=sid, reason=decision.reason)
                    order.remove(sid)
                    continue
                group = [j for j in queue if j.group_key == job.group_key]
                ids = [j.id for j in group]
                run_name = f"sweepbot-{sid}-{min(ids)}"
                got = session.execute(  # type: ignore[attr-defined]
                    update(SweepJob)
                    .where(SweepJob.id.in_(ids), SweepJob.state == JobState.QUEUED)
                    .values(
                        state=JobState.DISPATCHED,
                        claim=token,
                        run_name=run_name,
                        dispatched_at=now,
                        updated_at=now,
                        attempts=SweepJob.attempts + 1,
                        reason=None,
                    )
                    .execution_options(synchronize_session=False)
                ).rowcount
                if got != len(ids):  # cannot happen under the label lock; refuse rather than double-run
                    raise TransientError(f"label {label}: claim of jobs {ids} raced; retrying the tick")
                for j in group:
                    queue.remove(j)
                    session.expire(j)
                row.release_seq += 1
                sweep.last_release = row.release_seq
                free -= cost
                in_flight += cost
                if canary:
                    budgets[sweep.repo] = (used + expected * cost, budget, expected)
                progress = True
                claimed.append(
                    _Claimed(
                        sid,
                        sweep.repo,
                        sweep.pr_number,
                        sweep.is_fork,
                        sweep.approved_sha,
                        sweep.head_sha,
                        sweep.head_ref,
                        sweep.base_ref,
                        sweep.config_key,
                        run_name,
                        ids,
                        job.seq,
                        job.conc,
                        job.tp,
                        token,
                        sweep.config_path or "",
                    )
                )
                _mark_dirty(session, sid)
                if not queue:
                    order.remove(sid)
                if free <= 0:
                    return claimed
    return claimed


def _workflow_name(settings: Settings) -> str | None:
    # A templated workflow file cannot be named without a point: search all of the repo's runs.
    return None if "{" in settings.dispatch_workflow else settings.dispatch_workflow


WORKFLOW_CACHE_SECONDS = 60.0
_workflow_cache: dict[tuple[str, str, str], tuple[float, Any]] = {}


def workflow_spec(gw: Any, repo: str, workflow: str, ref: str) -> Any:
    """The target workflow as declared at ``ref`` (app.core.workflows.WorkflowSpec); SweepError if unusable.

    Cached for a minute per (repo, workflow, ref): a tick dispatching ten groups reads it once.
    """
    from app.core.workflows import WorkflowFileError, parse_workflow, workflow_path

    key = (repo, workflow, ref)
    hit = _workflow_cache.get(key)
    if hit is not None and time.monotonic() - hit[0] < WORKFLOW_CACHE_SECONDS:
        return hit[1]
    try:
        path = workflow_path(workflow)
        got = gw.get_file(repo, path, ref=ref)
        if got is None:
            raise SweepError(
                f"{repo} has no {path} at {ref}: set SWEEPBOT_DISPATCH_WORKFLOW to a workflow the repo has"
            )
        spec = parse_workflow(got[0], path)
    except WorkflowFileError as exc:
        raise SweepError(str(exc)) from exc
    _workflow_cache[key] = (time.monotonic(), spec)
    return spec


def check_dispatch(gw: Any, repo: str, workflow: str, ref: str, inputs: dict[str, str]) -> str:
    """Validate ``inputs`` against the workflow's declared dispatch inputs; the run's expected title."""
    from app.core.workflows import dispatch_problems, dispatch_title

    spec = workflow_spec(gw, repo, workflow, ref)
    problems = dispatch_problems(spec, inputs)
    if problems:
        raise SweepError(f"{workflow} at {ref} would refuse this dispatch: " + "; ".join(problems))
    return str(dispatch_title(spec, inputs))


def _find_run(gw: Any, repo: str, workflow: str | None, title: str) -> dict[str, Any] | None:
    """Our dispatched run by its ``display_title`` (runmatch.match_run: id first, then title)."""
    from app.core.runmatch import match_run

    runs = gw.list_workflow_runs(repo, workflow, event="workflow_dispatch", limit=200)
    found = match_run(runs, display_title=title)
    log.info("run_lookup", title=title, how=found.how, reason=found.reason)
    return dict(found.run) if found.run is not None else None


def _find_job_run(
    gw: Any, sweep: Sweep, job: SweepJob, settings: Settings, session: Session | None = None
) -> dict[str, Any] | None:
    """The run of a dispatched job that never learnt its run id, by the title it was given."""
    from app.core.runmatch import match_run, run_name_in_title

    try:
        workflow, ref, inputs = _job_dispatch(sweep, job, settings, session)
        title: str | None = check_dispatch(gw, sweep.repo, workflow, ref, inputs)
    except SweepError as exc:  # the template or the workflow changed since: fall back to the name
        log.warning("run_title_unknown", job=job.id, error=str(exc))
        title = None
    runs = gw.list_workflow_runs(sweep.repo, _workflow_name(settings), event="workflow_dispatch", limit=200)
    if title is not None:
        found = match_run(runs, display_title=title)
        log.info("run_lookup", job=job.id, title=title, how=found.how, reason=found.reason)
        return dict(found.run) if found.run is not None else None
    for run in runs:
        if run_name_in_title(str(run.get("display_title") or "")) == job.run_name:
            return dict(run)
    return None


def _find_label_run(session: Session, gw: Any, sweep: Sweep) -> dict[str, Any] | None:
    """Label mode: the repo's run-sweep.yml run for the sweep's head commit (runmatch.match_label_run)."""
    from app.core.runmatch import match_label_run

    cfg = sweep_settings(session, sweep.repo)
    runs = gw.list_workflow_runs(
        sweep.repo, cfg.workflow, event="pull_request", head_sha=sweep.head_sha, limit=50
    )
    found = match_label_run(runs, head_sha=sweep.head_sha)
    log.info("label_run_lookup", sweep=sweep.id, how=found.how, reason=found.reason)
    return dict(found.run) if found.run is not None else None


def _adopt_label_run(session: Session, sweep: Sweep, run: dict[str, Any]) -> bool:
    """Give the sweep's waiting label-mode jobs the repo's run; True when some were adopted."""
    waiting = session.scalars(
        select(SweepJob).where(
            SweepJob.sweep_id == sweep.id,
            SweepJob.run_id.is_(None),
            SweepJob.state.in_(JobState.IN_FLIGHT),
        )
    ).all()
    for job in waiting:
        job.run_id, job.run_url, job.reason = int(run["id"]), run.get("html_url"), None
        job.updated_at = _now()
    if waiting:
        record(
            session,
            actor=BOT,
            action="sweep.follow_run",
            target=f"{sweep.repo}#{sweep.pr_number}",
            detail={
                "sweep": sweep.id,
                "run_id": run["id"],
                "title": run.get("display_title"),
                "jobs": len(waiting),
            },
        )
        _mark_dirty(session, sweep.id)
    return bool(waiting)


def _label_sweeps_for_run(session: Session, run: dict[str, Any]) -> list[Sweep]:
    """Active label-mode sweeps whose head commit this (repo-started) run is for."""
    head_sha = str(run.get("head_sha") or "")
    if not head_sha or run.get("event") not in (None, "pull_request"):
        return []
    sweeps = session.scalars(
        select(Sweep).where(Sweep.head_sha == head_sha, Sweep.state == SweepState.ACTIVE)
    ).all()
    path = str(run.get("path") or "")
    return [
        s
        for s in sweeps
        if sweep_mode(s) == "label"
        and (not path or path.endswith("/" + sweep_settings(session, s.repo).workflow))
    ]


def _job_dispatch(
    sweep: Sweep, job: SweepJob, settings: Settings, session: Session | None = None
) -> tuple[str, str, dict[str, str]]:
    """The (workflow, ref, inputs) a job of ``sweep`` was dispatched with (rendering is deterministic)."""
    group = [job]
    if session is not None and job.run_name:
        group = list(
            session.scalars(
                select(SweepJob).where(SweepJob.sweep_id == sweep.id, SweepJob.run_name == job.run_name)
            ).all()
        ) or [job]
    return render_dispatch(
        settings,
        key=sweep.config_key,
        seq=job.seq,
        conc=job.conc,
        tp=job.tp,
        head_sha=sweep.head_sha,
        head_ref=sweep.base_ref if sweep.is_fork else sweep.head_ref,
        base_ref=sweep.base_ref,
        run_name=job.run_name or "",
        pr=sweep.pr_number,
        config_file=sweep.config_path or "",
        evals=dispatch_eval_flags(
            [j.point for j in group if isinstance(j.point, dict)],
            str((sweep.filters or {}).get("evals") or "default"),
        ),
        concs=_row_concs(group),
    )


def _dispatch(session: Session, gw: Any, claim: _Claimed, settings: Settings, result: TickResult) -> None:
    from app.adapters.github import GitHubError

    jobs = session.scalars(select(SweepJob).where(SweepJob.id.in_(claim.job_ids))).all()
    sweep = session.get(Sweep, claim.sweep_id)
    if sweep is None or any(j.state != JobState.DISPATCHED or j.claim != claim.token for j in jobs):
        # Cancelled between claim and dispatch, or cancelled, retried and claimed again by another
        # tick (which holds a newer token and dispatches it): nothing to send.
        return
    target = f"{claim.repo}#{claim.pr_number}"
    if claim.is_fork:
        # Re-check just before the dispatch: the approval binds the exact head sha.
        pr = gw.get_pull(claim.repo, claim.pr_number)
        current = str((pr.get("head") or {}).get("sha") or "")
        if not claim.approved_sha or current != claim.approved_sha or current != claim.head_sha:
            for job in jobs:
                _requeue(job, "waiting for approval of the new head")
                job.attempts = max(0, job.attempts - 1)
            sweep.state, sweep.approved_by, sweep.approved_sha, sweep.approved_at = (
                SweepState.AWAITING_APPROVAL,
                None,
                None,
                None,
            )
            sweep.state_reason = f"head moved to {current[:7]}: approval voided"
            record(
                session,
                actor=BOT,
                action="sweep.approval_voided",
                target=target,
                detail={"sweep": sweep.id, "approved": claim.approved_sha, "head": current},
            )
            result.voided += 1
            _mark_dirty(session, sweep.id)
            return
    ref_head = claim.base_ref if claim.is_fork else claim.head_ref
    try:
        workflow, ref, inputs = render_dispatch(
            settings,
            key=claim.config_key,
            seq=claim.seq,
            conc=claim.conc,
            tp=claim.tp,
            head_sha=claim.head_sha,
            head_ref=ref_head,
            base_ref=claim.base_ref,
            run_name=claim.run_name,
            pr=claim.pr_number,
            config_file=claim.config_file,
            evals=dispatch_eval_flags(
                [j.point for j in jobs if isinstance(j.point, dict)],
                str((sweep.filters or {}).get("evals") or "default"),
            ),
            concs=_row_concs(jobs),
        )
        # Checked against the workflow as the repo declares it at that ref, before any runner
        # time is asked for (GitHub would answer 422; a clear reason is better).
        title = check_dispatch(gw, claim.repo, workflow, ref, inputs)
    except (SweepError, SettingsError) as exc:
        for job in jobs:
            finish_job(session, job.id, JobState.FAILED, reason=f"cannot dispatch: {exc}")
        record(
            session,
            actor=BOT,
            action="sweep.dispatch",
            target=target,
            outcome="refused",
            detail={"sweep": claim.sweep_id, "jobs": claim.job_ids, "error": str(exc)},
        )
        result.failed += len(jobs)
        result.errors.append(str(exc))
        return
    detail: dict[str, Any] = {
        "sweep": claim.sweep_id,
        "jobs": claim.job_ids,
        "run_name": claim.run_name,
        "workflow": workflow,
        "ref": ref,
        "inputs": inputs,
        "title": title,
    }
    run: dict[str, Any] | None = None
    try:
        run = gw.dispatch_workflow(claim.repo, workflow, ref, inputs)
        if run is None:  # the server did not return run details: find the run by its title
            found = _find_run(gw, claim.repo, workflow, title)
            run = {"workflow_run_id": found["id"], "html_url": found.get("html_url")} if found else None
    except TransientError as exc:
        # The POST may or may not have happened: look for the run before re-queueing.
        try:
            found = _find_run(gw, claim.repo, workflow, title)
        except TransientError:
            found = None
        if found is None:
            for job in jobs:
                _requeue(job, f"dispatch failed, will retry: {exc}")
                job.attempts = max(0, job.attempts - 1)
            record(
                session,
                actor=BOT,
                action="sweep.dispatch",
                target=target,
                outcome="failed",
                detail={**detail, "error": str(exc)},
            )
            result.errors.append(str(exc))
            _mark_dirty(session, claim.sweep_id)
            return
        run = {"workflow_run_id": found["id"], "html_url": found.get("html_url")}
    except GitHubError as exc:
        for job in jobs:
            finish_job(session, job.id, JobState.FAILED, reason=f"dispatch refused: {exc}")
        record(
            session,
            actor=BOT,
            action="sweep.dispatch",
            target=target,
            outcome="failed",
            detail={**detail, "error": str(exc)},
        )
        result.failed += len(jobs)
        result.errors.append(str(exc))
        return
    now = _now()
    for job in jobs:
        if run is not None:
            job.run_id = int(run["workflow_run_id"])
            job.run_url = str(run.get("html_url") or run.get("run_url") or "") or None
        job.updated_at = now
    record(
        session,
        actor=BOT,
        action="sweep.dispatch",
        target=target,
        detail={**detail, "run_id": run.get("workflow_run_id") if run else None},
    )
    result.dispatched_runs += 1
    result.dispatched_jobs += len(jobs)
    _mark_dirty(session, claim.sweep_id)


def tick(session_factory: sessionmaker[Session], gw_factory: GatewayFactory) -> TickResult:
    """Release queued jobs onto free runner capacity. Safe to run concurrently (module docstring).

    ``gw_factory(session)`` returns the GitHub gateway (writes audited in that session).
    """
    settings = get_settings()
    result = TickResult()
    with session_factory() as session:
        labels = _labels_with_work(session)
    for label, repo in labels:
        _ensure_label(session_factory, label)
        with session_factory() as session:
            try:
                claims = _claim_label(session, gw_factory(session), label, repo, result)
                session.commit()
            except Exception:
                session.rollback()
                raise
        for run_repo, run_id in result.preempted:
            with session_factory() as session:
                try:
                    errors = _cancel_runs(gw_factory(session), run_repo, [run_id])
                    session.commit()
                except Exception as exc:  # the requeued job runs again later; the stray run is harmless
                    session.rollback()
                    errors = [str(exc)]
                result.errors.extend(errors)
        result.preempted.clear()
        for claim in claims:
            with session_factory() as session:
                try:
                    _dispatch(session, gw_factory(session), claim, settings, result)
                    session.commit()
                except Exception as exc:
                    # Leave the jobs dispatched: the repair poll finds the run by name or re-queues.
                    session.rollback()
                    log.exception("dispatch_error", run_name=claim.run_name)
                    result.errors.append(f"{claim.run_name}: {exc}")
    if result.dispatched_runs or result.reused:
        log.info(
            "scheduler_tick",
            dispatched=result.dispatched_jobs,
            runs=result.dispatched_runs,
            reused=result.reused,
            skipped=result.skipped_labels,
        )
    return result


# ---------------------------------------------------------------------------------------------
# tracking runs


def _failure_of(gw: Any, repo: str, wf_job: dict[str, Any]) -> Any:
    """Why a finished workflow job failed (runmatch.Failure), from its check-run annotations.

    On GitHub a job's check run has the job's id; a lost runner is only said there.
    """
    from app.core.runmatch import classify_failure

    annotations: list[dict[str, Any]] = []
    if gw is not None and wf_job.get("id") is not None and repo:
        try:
            annotations = gw.list_check_run_annotations(repo, int(wf_job["id"]))
        except TransientError:
            raise
        except Exception as exc:  # an unreadable annotation list must not lose the job's state
            log.warning("annotations_unreadable", job=wf_job.get("id"), error=str(exc))
    return classify_failure(
        annotations, conclusion=str(wf_job.get("conclusion") or ""), steps=wf_job.get("steps") or []
    )


def _match_jobs(session: Session, run_id: int, run_name: str | None) -> list[SweepJob]:
    jobs = list(session.scalars(select(SweepJob).where(SweepJob.run_id == run_id)).all())
    if run_name and run_name.startswith("sweepbot-"):
        # Jobs whose dispatch never recorded the run id (204 answer, crash): adopt them by name.
        jobs += session.scalars(
            select(SweepJob).where(
                SweepJob.run_name == run_name,
                SweepJob.run_id.is_(None),
                SweepJob.state.in_(JobState.IN_FLIGHT),
            )
        ).all()
    return jobs


def _job_for_wf_job(
    session: Session, gw: Any, jobs: Sequence[SweepJob], wf_job: dict[str, Any]
) -> SweepJob | None:
    """Our job that a workflow job runs, by the real job-name format (app.core.runmatch)."""
    from app.core.runmatch import assign_jobs, job_matches_point, parse_job_name

    parsed = parse_job_name(str(wf_job.get("name") or ""))
    if parsed is None:
        return None  # get-jobs, collect-results, ...: not a benchmark job
    hits = sorted((j for j in jobs if job_matches_point(parsed, j.point)), key=lambda j: j.id)
    if len(hits) <= 1:
        return hits[0] if hits else None
    # Same name for several of our points (seq-lens share a conc in e2e-tests.yml): matrix order.
    if gw is None or wf_job.get("run_id") is None:
        return None
    run_jobs = gw.list_run_jobs(_sweep_repo(session, hits[0]), int(wf_job["run_id"]))
    assigned = assign_jobs(run_jobs, [j.point for j in hits])
    for index, got in assigned.items():
        if got.get("id") == wf_job.get("id"):
            return hits[index]
    return None


def _retry_or_fail(session: Session, job: SweepJob, why: str, settings: Settings) -> str:
    retries = job.attempts - 1  # the first dispatch is not a retry
    sweep = session.get(Sweep, job.sweep_id)
    if sweep is not None and sweep_mode(sweep) == "label":
        # The repo's run, not ours: re-dispatching through e2e-tests.yml would be both modes.
        finish_job(
            session,
            job.id,
            JobState.FAILED,
            reason=f"infrastructure failure in the repo's sweep run (label mode does not re-run it; "
            f"re-run the failed job there or re-add the sweep label): {why}",
        )
        return "failed"
    if retries < settings.infra_retry_limit:
        record(
            session,
            actor=BOT,
            action="sweep.infra_retry",
            target=job.run_name,
            detail={"job": job.id, "run_id": job.run_id, "reason": why, "attempt": job.attempts},
        )
        _requeue(job, f"infrastructure failure, retry {retries + 1}/{settings.infra_retry_limit}: {why}")
        _mark_dirty(session, job.sweep_id)
        return "requeued"
    finish_job(
        session,
        job.id,
        JobState.FAILED,
        reason=f"infrastructure failure after {job.attempts} attempt(s): {why}",
    )
    return "failed"


def apply_workflow_job(
    session: Session,
    wf_job: dict[str, Any],
    *,
    after_commit: list[Callable[[], None]],
    settings: Settings | None = None,
    gw: Any = None,
) -> bool:
    """Fold one ``workflow_job`` (webhook or REST shape) into our job; True when something changed.

    ``gw`` reads the failed job's check-run annotations (and, rarely, the run's job list).
    """
    settings = settings or get_settings()
    run_id = wf_job.get("run_id")
    if run_id is None:
        return False
    job = _job_for_wf_job(session, gw, _match_jobs(session, int(run_id), None), wf_job)
    if job is None or job.run_id != int(run_id):
        return False
    status, conclusion = wf_job.get("status"), wf_job.get("conclusion")
    now = _now()
    if job.state in JobState.FINAL:
        return False
    if status == "in_progress" and job.state == JobState.DISPATCHED:
        job.state, job.started_at, job.updated_at = JobState.RUNNING, now, now
        _mark_dirty(session, job.sweep_id)
        return True
    if status != "completed":
        return False
    if conclusion == "success":
        if job.run_conclusion != "success":
            job.run_conclusion, job.updated_at = "success", now
            job.started_at = job.started_at or now
            job.state = JobState.RUNNING  # until collection stores the result
            after_commit.append(_collect_later(job.id))
            after_commit.append(lambda: _enqueue("sweepbot.scheduler_tick"))
            _mark_dirty(session, job.sweep_id)
            return True
        return False
    job.run_conclusion = str(conclusion)
    failure = _failure_of(gw, _sweep_repo(session, job), wf_job)
    if failure.infrastructure:
        runner = wf_job.get("runner_name") or "the runner"
        _retry_or_fail(session, job, f"{runner}: {failure.message}", settings)
    else:
        url = wf_job.get("html_url") or job.run_url
        finish_job(
            session, job.id, JobState.FAILED, reason=f"benchmark {conclusion}: {failure.message} (see {url})"
        )
    after_commit.append(lambda: _enqueue("sweepbot.scheduler_tick"))
    return True


def apply_workflow_run(
    session: Session,
    gw: Any,
    run: dict[str, Any],
    *,
    after_commit: list[Callable[[], None]],
    settings: Settings | None = None,
) -> bool:
    """Fold one ``workflow_run`` (webhook or REST shape) into our jobs; True when something changed."""
    from app.core.runmatch import run_name_in_title

    settings = settings or get_settings()
    run_id = int(run["id"])
    # `name` is the workflow's name; the run's own title (run-name) is `display_title`.
    jobs = _match_jobs(session, run_id, run_name_in_title(str(run.get("display_title") or "")))
    if not jobs:
        return False
    now = _now()
    changed = False
    for job in jobs:
        if job.run_id is None and job.state in JobState.IN_FLIGHT:  # found by name: adopt the run
            job.run_id, job.run_url, changed = run_id, run.get("html_url"), True
    live = [j for j in jobs if j.state not in JobState.FINAL and j.run_id == run_id]
    if run.get("status") != "completed":
        if (
            any(j.state == JobState.CANCELLED and j.run_id == run_id for j in jobs)
            and not live
            and gw is not None
        ):
            _cancel_runs(gw, _sweep_repo(session, jobs[0]), [run_id])  # a cancel that did not take
        if run.get("status") == "in_progress":
            for job in live:
                if job.state == JobState.DISPATCHED:
                    job.state, job.started_at, job.updated_at = JobState.RUNNING, now, now
                    _mark_dirty(session, job.sweep_id)
                    changed = True
        return changed
    conclusion = run.get("conclusion")
    if not live:
        return changed
    label_jobs = [j for j in live if _is_label_job(session, j)]
    if conclusion == "cancelled" and label_jobs:
        # run-sweep.yml cancels a PR's older run when a newer one starts (its concurrency group):
        # follow the next run instead of reading the cancel as the benchmark's failure.
        for job in label_jobs:
            job.run_id, job.run_url, job.updated_at = None, None, now
            job.reason = f"the repo cancelled its run {run_id}; following its next sweep run"
            _mark_dirty(session, job.sweep_id)
        return True
    wf_jobs: list[dict[str, Any]] | None = None
    by_job: dict[int, dict[str, Any]] = {}
    if conclusion != "success" and gw is not None:
        from app.core.runmatch import assign_jobs

        wf_jobs = gw.list_run_jobs(_sweep_repo(session, live[0]), run_id)
        ordered = sorted(live, key=lambda j: j.id)
        for index, got in assign_jobs(wf_jobs, [j.point for j in ordered]).items():
            by_job[ordered[index].id] = dict(got)
    for job in live:
        if conclusion == "success":
            if job.run_conclusion != "success":
                job.run_conclusion, job.state, job.updated_at = "success", JobState.RUNNING, now
                job.started_at = job.started_at or now
                after_commit.append(_collect_later(job.id))
                _mark_dirty(session, job.sweep_id)
                changed = True
            continue
        wf_job = by_job.get(job.id)
        if wf_job is not None and wf_job.get("status") == "completed":
            changed |= _apply_assigned(session, gw, job, {**wf_job, "run_id": run_id}, after_commit, settings)
            continue
        if conclusion in ("startup_failure", "cancelled"):
            why = "startup_failure" if conclusion == "startup_failure" else "cancelled by the system"
            _retry_or_fail(session, job, f"run {conclusion}: {why}", settings)
        else:
            finish_job(
                session,
                job.id,
                JobState.FAILED,
                reason=f"run {conclusion} without a job for this point: see {run.get('html_url')}",
            )
        after_commit.append(lambda: _enqueue("sweepbot.scheduler_tick"))
        changed = True
    return changed


def _apply_assigned(
    session: Session,
    gw: Any,
    job: SweepJob,
    wf_job: dict[str, Any],
    after_commit: list[Callable[[], None]],
    settings: Settings,
) -> bool:
    """A completed workflow job already matched to ``job`` (by the run's job list)."""
    if job.state in JobState.FINAL:
        return False
    if wf_job.get("conclusion") == "success":
        if job.run_conclusion == "success":
            return False
        now = _now()
        job.run_conclusion, job.state, job.updated_at = "success", JobState.RUNNING, now
        job.started_at = job.started_at or now
        after_commit.append(_collect_later(job.id))
        _mark_dirty(session, job.sweep_id)
        return True
    job.run_conclusion = str(wf_job.get("conclusion"))
    failure = _failure_of(gw, _sweep_repo(session, job), wf_job)
    if failure.infrastructure:
        runner = wf_job.get("runner_name") or "the runner"
        _retry_or_fail(session, job, f"{runner}: {failure.message}", settings)
    else:
        url = wf_job.get("html_url") or job.run_url
        finish_job(
            session,
            job.id,
            JobState.FAILED,
            reason=f"benchmark {wf_job.get('conclusion')}: {failure.message} (see {url})",
        )
    after_commit.append(lambda: _enqueue("sweepbot.scheduler_tick"))
    return True


def _is_label_job(session: Session, job: SweepJob) -> bool:
    sweep = session.get(Sweep, job.sweep_id)
    return sweep is not None and sweep_mode(sweep) == "label"


def _collect_later(job_id: int) -> Callable[[], None]:
    return lambda: _enqueue("sweepbot.collect_job", job_id)


def _sweep_repo(session: Session, job: SweepJob) -> str:
    sweep = session.get(Sweep, job.sweep_id)
    return sweep.repo if sweep is not None else ""


def _handler_gateway(ctx: HandlerContext) -> Any:
    return ctx.gateway()


class _LazyGateway:
    """The handler's gateway, made only when a call needs it (most job events need none)."""

    def __init__(self, ctx: HandlerContext) -> None:
        self._ctx = ctx
        self._gw: Any = None

    def __getattr__(self, name: str) -> Any:
        if self._gw is None:
            self._gw = _handler_gateway(self._ctx)
        return getattr(self._gw, name)


@router.register("workflow_job")
def on_workflow_job(ctx: HandlerContext) -> None:
    wf_job = ctx.event.payload.get("workflow_job") or {}
    if not isinstance(wf_job, dict) or not apply_workflow_job(
        ctx.session, wf_job, after_commit=ctx.after_commit, gw=_LazyGateway(ctx)
    ):
        raise HandlerSkipped("not a job of ours, or nothing new")


@router.register("workflow_run")
def on_workflow_run(ctx: HandlerContext) -> None:
    from app.core.runmatch import run_name_in_title

    run = ctx.event.payload.get("workflow_run") or {}
    if not isinstance(run, dict) or "id" not in run:
        raise HandlerSkipped("no workflow_run in the payload")
    adopted = False
    for sweep in _label_sweeps_for_run(ctx.session, run):
        adopted |= _adopt_label_run(ctx.session, sweep, run)
    if (
        not adopted
        and run_name_in_title(str(run.get("display_title") or "")) is None
        and ctx.session.scalars(select(SweepJob.id).where(SweepJob.run_id == int(run["id"]))).first() is None
    ):
        raise HandlerSkipped("not a sweepbot run")
    if not apply_workflow_run(ctx.session, _handler_gateway(ctx), run, after_commit=ctx.after_commit):
        raise HandlerSkipped("nothing new for our jobs")


@router.register("pull_request", "synchronize")
def on_pull_request_synchronize(ctx: HandlerContext) -> None:
    payload = ctx.event.payload
    pr = payload.get("pull_request") or {}
    repo = ctx.event.repo
    new_sha = str((pr.get("head") or {}).get("sha") or "")
    if not repo or not new_sha:
        raise HandlerSkipped("no repository or head sha")
    closed = cancel_pr_sweeps(
        ctx.session,
        _handler_gateway(ctx),
        repo=repo,
        pr_number=int(pr["number"]),
        actor=ctx.event.sender or BOT,
        reason=f"superseded by push {new_sha[:7]}",
        keep_head_sha=new_sha,
    )
    if not closed:
        raise HandlerSkipped("no open sweep on an older head")
    ctx.after_commit.append(lambda: _enqueue("sweepbot.scheduler_tick"))


@router.register("pull_request", "closed")
def on_pull_request_closed(ctx: HandlerContext) -> None:
    pr = ctx.event.payload.get("pull_request") or {}
    repo = ctx.event.repo
    if not repo:
        raise HandlerSkipped("no repository")
    closed = cancel_pr_sweeps(
        ctx.session,
        _handler_gateway(ctx),
        repo=repo,
        pr_number=int(pr["number"]),
        actor=ctx.event.sender or BOT,
        reason="pull request closed",
    )
    if not closed:
        raise HandlerSkipped("no open sweep")


# ---------------------------------------------------------------------------------------------
# repair poll


def repair_jobs(session_factory: sessionmaker[Session], gw_factory: GatewayFactory) -> RepairResult:
    """Poll fallback for missed deliveries: adopt runs by name, apply run states, fail timeouts."""
    settings = get_settings()
    result = RepairResult()
    with session_factory() as session:
        ids = list(
            session.scalars(
                select(SweepJob.id).where(SweepJob.state.in_(JobState.IN_FLIGHT)).order_by(SweepJob.id)
            ).all()
        )
    done_runs: set[int] = set()
    for job_id in ids:
        after: list[Callable[[], None]] = []
        with session_factory() as session:
            job = session.get(SweepJob, job_id)
            if job is None or job.state not in JobState.IN_FLIGHT:
                continue
            if job.run_id is not None and job.run_id in done_runs:
                continue
            sweep = session.get(Sweep, job.sweep_id)
            if sweep is None:
                continue
            gw = gw_factory(session)
            result.checked += 1
            now = _now()
            age = (now - (_aware(job.dispatched_at) or now)).total_seconds()
            try:
                if age > settings.job_timeout_seconds:
                    if job.run_id is not None:
                        _cancel_runs(gw, sweep.repo, [job.run_id])
                    finish_job(
                        session,
                        job.id,
                        JobState.FAILED,
                        reason=f"timed out: no result {age:.0f} s after dispatch "
                        f"(limit job_timeout_seconds={settings.job_timeout_seconds:.0f})",
                    )
                    record(
                        session,
                        actor=BOT,
                        action="sweep.timeout",
                        target=job.run_name,
                        detail={"job": job.id, "run_id": job.run_id},
                    )
                    result.timed_out += 1
                    after.append(lambda: _enqueue("sweepbot.scheduler_tick"))
                elif job.run_id is None and sweep_mode(sweep) == "label":
                    # The repo starts this run itself (label + changelog change): find it, never
                    # re-queue (that would dispatch the same sweep a second way).
                    found = _find_label_run(session, gw, sweep)
                    if found is not None and _adopt_label_run(session, sweep, found):
                        apply_workflow_run(session, gw, found, after_commit=after, settings=settings)
                        result.updated += 1
                elif job.run_id is None:
                    found = _find_job_run(gw, sweep, job, settings, session)
                    if found is not None:
                        if apply_workflow_run(session, gw, found, after_commit=after, settings=settings):
                            result.updated += 1
                    elif age > settings.dispatch_lost_grace_seconds:
                        _requeue(job, "dispatch left no run; re-queued")
                        job.attempts = max(0, job.attempts - 1)
                        result.requeued += 1
                elif job.run_conclusion == "success":
                    # Collected results finish the job; re-ring in case the collect task was lost.
                    after.append(_collect_later(job.id))
                    result.collect_enqueued += 1
                else:
                    run = gw.get_run(sweep.repo, job.run_id)
                    if apply_workflow_run(session, gw, run, after_commit=after, settings=settings):
                        result.updated += 1
                    if run.get("status") == "completed":
                        done_runs.add(job.run_id)
                session.commit()
            except TransientError as exc:
                session.rollback()
                log.warning("repair_job_transient", job=job_id, error=str(exc))
                continue
        for callback in after:
            callback()
    return result


# ---------------------------------------------------------------------------------------------
# views


def sweep_summary(session: Session, sweep_id: int) -> dict[str, Any]:
    """A sweep and its jobs, listed by ``display_key``; ``position`` is each job's release order."""
    sweep = _get_sweep(session, sweep_id)
    jobs = sorted(
        session.scalars(select(SweepJob).where(SweepJob.sweep_id == sweep.id)).all(), key=display_key
    )
    counts: dict[str, int] = {}
    for job in jobs:
        counts[job.state] = counts.get(job.state, 0) + 1
    done = sum(1 for j in jobs if j.state in JobState.FINAL)

    def iso(value: datetime | None) -> str | None:
        value = _aware(value)
        return value.isoformat() if value else None

    return {
        "id": sweep.id,
        "repo": sweep.repo,
        "pr": sweep.pr_number,
        "head_sha": sweep.head_sha,
        "head_ref": sweep.head_ref,
        "config_key": sweep.config_key,
        "config_path": sweep.config_path,
        "image": sweep.image,
        "fingerprint": sweep.fingerprint,
        "requested_by": sweep.requested_by,
        "reason": sweep.reason,
        "priority": next((k for k, v in PRIORITIES.items() if v == sweep.priority), str(sweep.priority)),
        "state": sweep.state,
        "state_reason": sweep.state_reason,
        "superseded_by": sweep.superseded_by,
        "fork": sweep.is_fork,
        "approved_by": sweep.approved_by,
        "approved_sha": sweep.approved_sha,
        "filters": sweep.filters,
        "created_at": iso(sweep.created_at),
        "finished_at": iso(sweep.finished_at),
        "counts": counts,
        "done": done,
        "total": len(jobs),
        "jobs": [
            {
                "id": j.id,
                "position": j.position,
                "result_name": j.result_name,
                "seq": j.seq,
                "conc": j.conc,
                "tp": j.tp,
                "runner": j.runner_label,
                "state": j.state,
                "reason": j.reason,
                "attempts": j.attempts,
                "run_id": j.run_id,
                "run_url": j.run_url,
                "result_url": j.result_url,
                "dispatched_at": iso(j.dispatched_at),
                "started_at": iso(j.started_at),
                "finished_at": iso(j.finished_at),
            }
            for j in jobs
        ],
    }


def queue_snapshot(session: Session, gw: Any = None) -> list[dict[str, Any]]:
    """Per runner label: capacity, busy, free, queued, paused, and each open sweep's progress."""
    labels = {r.label: r for r in session.scalars(select(RunnerLabel)).all()}
    open_rows = session.execute(
        select(SweepJob.runner_label, Sweep.id)
        .join(Sweep, Sweep.id == SweepJob.sweep_id)
        .where(Sweep.state.in_(SweepState.OPEN))
        .distinct()
    ).all()
    per_label: dict[str, set[int]] = {}
    for label, sid in open_rows:
        per_label.setdefault(str(label), set()).add(int(sid))
    out = []
    for label in sorted(set(labels) | set(per_label)):
        row = labels.get(label)
        sweeps = [session.get(Sweep, sid) for sid in sorted(per_label.get(label, ()))]
        repo = sweeps[0].repo if sweeps and sweeps[0] is not None else None
        if row is not None and row.capacity is not None:
            capacity, source = row.capacity, row.capacity_source or "last tick"
        else:
            capacity, source = label_capacity(gw, label, repo)
        busy = inflight_slots(session, label)
        queued = session.execute(
            select(func.count())
            .select_from(SweepJob)
            .join(Sweep, Sweep.id == SweepJob.sweep_id)
            .where(
                SweepJob.runner_label == label,
                SweepJob.state == JobState.QUEUED,
                Sweep.state.in_(SweepState.OPEN),
            )
        ).scalar_one()
        items = []
        for sweep in sweeps:
            if sweep is None:
                continue
            states = [
                s
                for (s,) in session.execute(
                    select(SweepJob.state).where(
                        SweepJob.sweep_id == sweep.id, SweepJob.runner_label == label
                    )
                ).all()
            ]
            items.append(
                {
                    "id": sweep.id,
                    "repo": sweep.repo,
                    "pr": sweep.pr_number,
                    "config_key": sweep.config_key,
                    "state": sweep.state,
                    "total": len(states),
                    "done": sum(1 for s in states if s in JobState.FINAL),
                    "running": sum(1 for s in states if s in JobState.IN_FLIGHT),
                    "queued": sum(1 for s in states if s == JobState.QUEUED),
                }
            )
        out.append(
            {
                "label": label,
                "capacity": capacity,
                "capacity_source": source,
                "busy": busy,
                "free": max(0, capacity - busy),
                "queued": int(queued),
                "paused": bool(row.paused) if row is not None else False,
                "sweeps": items,
            }
        )
    return out
