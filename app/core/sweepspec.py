"""What a sweep is made of, pure: request filters, the checks on every value a dispatch carries, the
dispatch template, how points group into dispatches, and the orders points are released and shown in.

No Session, no gateway: ``app.flows`` reads the repo and the database and hands values here.
Grouping: the benchmark repo's CLI (``test-config --config-files F --config-keys K --conc C``, see
app/core/sweepcli.py) selects points by key + conc only, so one dispatch covers every point of the
key at that conc (docs/scheduling.md).
"""

from __future__ import annotations

import hashlib
import json
import re
import string
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from app.core.recipes.evals import EvalMode, cli_flags
from app.core.seqlen import AGENTIC_SEQ, SEQ_HINT, is_seq_filter, seq_name
from app.core.sweepcli import CliGrammarError, parse_command

KEY_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")


SHA_RE = re.compile(r"^[0-9a-f]{40}$")


REF_RE = re.compile(r"^(?!.*\.\.)(?!/)[A-Za-z0-9._/-]{1,255}(?<!/)$")


REPO_RE = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")


LABEL_RE = re.compile(r"^[A-Za-z0-9:._-]{1,100}$")


class ListedJob(Protocol):
    """What ``display_key`` reads of a job (app.models.sweeps.SweepJob)."""

    id: int
    seq: str
    conc: int
    tp: int


class DispatchSettings(Protocol):
    """The settings a dispatch is rendered from (app.settings.Settings has them); the core takes
    them as values and never loads settings itself (read only: DispatchTemplates is frozen)."""

    @property
    def dispatch_workflow(self) -> str: ...
    @property
    def dispatch_ref(self) -> str: ...
    @property
    def dispatch_inputs(self) -> str: ...


DISPATCH_ENV_PREFIX = "SWEEPBOT_"


@dataclass(frozen=True)
class DispatchTemplates:
    """The dispatch templates (SWEEPBOT_DISPATCH_*) and their defaults: the one definition
    app.settings.Settings takes its fields' defaults from. `sweepbot recipe dispatch` reads them
    with ``from_environ`` instead of building the settings (pydantic-settings: 80 ms of CPU,
    bench/cli.py); tests/cli/test_cli_dispatch.py checks both read the same values."""

    dispatch_workflow: str = "e2e-tests.yml"
    dispatch_ref: str = "{head_ref}"
    dispatch_inputs: str = (
        '{"generate-cli-command": "test-config --config-files {config_file} --config-keys {key}'
        ' --conc {conc}{evals}", "ref": "{head_sha}", "test-name": "{run_name}"}'
    )

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> DispatchTemplates:
        """The templates ``environ`` sets, as the settings read them (the SWEEPBOT_ prefix, names
        in any case; an unset one keeps its default)."""
        names = {f"{DISPATCH_ENV_PREFIX}{name}".lower(): name for name in cls.__dataclass_fields__}
        given = {names[k.lower()]: v for k, v in environ.items() if k.lower() in names}
        return cls(**given)


class SweepError(ValueError):
    """A sweep request or operation cannot be done as asked; the message says why and the fix."""


class DispatchTemplateError(SweepError):
    """The dispatch template settings (SWEEPBOT_DISPATCH_*) are malformed; the message names the fix."""


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


_EVAL_FLAG_VALUES = ("", " --no-evals", " --evals-only", " --evals-only --all-evals")


def template_fields(settings: DispatchSettings) -> set[str]:
    texts = [settings.dispatch_workflow, settings.dispatch_ref, *input_template(settings).values()]
    found: set[str] = set()
    for text in texts:
        for _lit, name, _spec, _conv in string.Formatter().parse(text):
            if name is None:
                continue
            if name not in _PLACEHOLDERS:
                raise DispatchTemplateError(
                    f"dispatch template uses {{{name}}}; allowed placeholders: "
                    + ", ".join("{" + p + "}" for p in _PLACEHOLDERS)
                )
            found.add(name)
    return found


def input_template(settings: DispatchSettings) -> dict[str, str]:
    try:
        data = json.loads(settings.dispatch_inputs)
    except ValueError as exc:
        raise DispatchTemplateError(f"SWEEPBOT_DISPATCH_INPUTS is not JSON: {exc}") from exc
    if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
        raise DispatchTemplateError("SWEEPBOT_DISPATCH_INPUTS must be a JSON object of string templates")
    return {str(k): v for k, v in data.items()}


def _check_values(*, key: str, seq: str, head_sha: str, head_ref: str, base_ref: str, run_name: str) -> None:
    """Every value a dispatch carries, checked against its grammar (SweepError says which and why)."""
    if not KEY_RE.match(key):
        raise SweepError(f"config key {key!r} has characters a dispatch may not carry")
    if not is_seq_filter(seq):
        raise SweepError(f"seq-len {seq!r} is not a sequence-length name: {SEQ_HINT}")
    if not SHA_RE.match(head_sha):
        raise SweepError(f"head sha {head_sha!r} is not 40 lowercase hex characters")
    for name, ref in (("head ref", head_ref), ("base ref", base_ref)):
        if not REF_RE.match(ref):
            raise SweepError(f"{name} {ref!r} is not a plain branch name")
    if not re.fullmatch(r"sweepbot-\d+-\d+(?:-a\d+)?", run_name):
        raise SweepError(f"run name {run_name!r} is not sweepbot-<sweep>-<job>[-a<attempt>]")


def _check_cli(inputs: dict[str, str]) -> None:
    """A ``generate-cli-command`` input must parse under the repo CLI's grammar (app.core.sweepcli)."""
    if CLI_INPUT not in inputs:
        return
    try:
        parse_command(inputs[CLI_INPUT])
    except CliGrammarError as exc:
        raise SweepError(
            f"the {CLI_INPUT} input would be refused by the repo's generate_sweep_configs.py: {exc}; "
            "fix SWEEPBOT_DISPATCH_INPUTS (see docs/configuration.md)"
        ) from exc


def render_dispatch(
    settings: DispatchSettings,
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
    _check_values(
        key=key, seq=seq, head_sha=head_sha, head_ref=head_ref, base_ref=base_ref, run_name=run_name
    )
    agentic = seq == AGENTIC_SEQ
    if config_file and (not CONFIG_FILE_RE.match(config_file) or ".." in config_file.split("/")):
        raise SweepError(f"config file {config_file!r} is not a plain path inside the repository")
    used = template_fields(settings)  # rejects unknown placeholders with a clear message
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
    templates = input_template(settings)
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
    _check_cli(inputs)
    return workflow, ref, inputs


def dispatch_eval_mode(points: Sequence[Mapping[str, Any]], sweep_mode: str = "default") -> EvalMode:
    """The generator's eval mode for one dispatch of ``points`` (plan dicts with eval marks).

    The bot dispatches a few concurrencies at a time, and the repo's generator would treat each
    such slice as a whole sweep (its highest conc is always "selected"), so the bot says what it
    planned: `--no-evals` when none of the points runs an eval (no eval job is spent on a scarce
    runner), `--evals-only [--all-evals]` for eval-only points, nothing for default evals.
    """
    if any(p.get("eval-only") for p in points):
        return EvalMode.ALL if sweep_mode == EvalMode.ALL.value else EvalMode.ONLY
    if any(p.get("run-eval") for p in points):
        return EvalMode.DEFAULT
    return EvalMode.NONE


def dispatch_eval_flags(points: Sequence[Mapping[str, Any]], sweep_mode: str = "default") -> str:
    """The generator's eval flags for one dispatch of ``points`` (``dispatch_eval_mode``)."""
    flags = cli_flags(dispatch_eval_mode(points, sweep_mode))
    return f" {flags}" if flags else ""


def group_fields(settings: DispatchSettings) -> tuple[str, ...]:
    """Which point fields select a dispatch's points: conc, plus seq / tp when the template uses them."""
    used = template_fields(settings)
    # test-config selects keys and concurrencies only (no --seq-lens, no --tp): one dispatch at a
    # conc runs every seq-len and tp of the key at that conc. A template that names {seq} or {tp}
    # narrows its dispatches, so its groups do too.
    fields = ["conc"]
    if "seq" in used:
        fields.insert(0, "seq")
    if "tp" in used:
        fields.append("tp")
    return tuple(fields)


def group_key(point: dict[str, Any], fields: Sequence[str]) -> str:
    seq = point_seq(point)
    vals = {"seq": seq, "conc": point["conc"], "tp": point_tp(point)}
    if isinstance(point["conc"], list):
        # Multi-node rows: `--conc` cannot pick one topology (a row runs every listed conc), so the
        # key's rows go out in one dispatch whose `--conc` is the union of their lists.
        return "/".join(["conc=rows", *(f"{f}={vals[f]}" for f in fields if f != "conc")])
    return "/".join(f"{f}={vals[f]}" for f in fields)


def point_seq(point: dict[str, Any]) -> str:
    """The point's seq-len name; agentic-coding points have none and say `agentic`."""
    if "isl" not in point:
        return AGENTIC_SEQ
    return seq_name(int(point["isl"]), int(point["osl"]))


def point_conc(point: Mapping[str, Any]) -> int:
    """One conc per job row: a multi-node row (whole conc list on one engine) is keyed by its highest."""
    conc = point["conc"]
    return max(int(c) for c in conc) if isinstance(conc, list) else int(conc)


def row_concs(points: Sequence[Any]) -> list[int] | None:
    """The conc list of dispatched multi-node rows (None for single-conc points)."""
    lists = [p["conc"] for p in points if isinstance(p, dict) and isinstance(p.get("conc"), list)]
    if not lists:
        return None
    return sorted({int(c) for conc in lists for c in conc})


def point_tp(point: Mapping[str, Any]) -> int:
    """A multi-node row has no top-level tp: its decode workers' tp stands for it in views."""
    return int(point["tp"]) if "tp" in point else int(point["decode"]["tp"])


def validate_repo(repo: str) -> None:
    if not REPO_RE.match(repo):
        raise SweepError(f"repository {repo!r} must be OWNER/NAME")


def point_order(points: Sequence[dict[str, Any]]) -> list[int]:
    """The sweep's point order: ``position`` of each point (given in the repo's expansion order).

    Largest conc first, ties in the repo's order: the longest jobs start first, so a sweep's tail
    (and the makespan of several sweeps sharing a label) stays short.
    """
    ranked = sorted(range(len(points)), key=lambda i: (-point_conc(points[i]), i))
    positions = [0] * len(points)
    for rank, index in enumerate(ranked):
        positions[index] = rank
    return positions


def display_key(job: ListedJob) -> tuple[str, int, int, int]:
    """How views list a sweep's jobs: per seq-len and tp, ascending conc (as a curve is read)."""
    return (job.seq, job.tp, job.conc, job.id)


def points_digest(result_names: Iterable[str]) -> str:
    return hashlib.sha256("\n".join(sorted(result_names)).encode()).hexdigest()


def sweep_digest(points: Iterable[Mapping[str, Any]]) -> str:
    """What a sweep runs, as one digest: its points' result names with their eval marks (the same
    points under another eval mode are another sweep)."""
    return points_digest(
        str(p["result-name"])
        + ("|eval" if p.get("run-eval") else "")
        + ("|eval-only" if p.get("eval-only") else "")
        for p in points
    )


def pr_heads(pr: dict[str, Any], repo: str) -> tuple[str, str, str | None, str, bool]:
    head = pr.get("head") or {}
    base = pr.get("base") or {}
    head_repo = ((head.get("repo") or {}).get("full_name")) if isinstance(head.get("repo"), dict) else None
    sha = str(head.get("sha") or "")
    ref = str(head.get("ref") or "")
    base_ref = str(base.get("ref") or "main")
    # A deleted fork has no head repo: treat it as a fork (the conservative side).
    is_fork = head_repo is None or head_repo.lower() != repo.lower()
    return sha, ref, head_repo, base_ref, is_fork
