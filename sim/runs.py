"""What the benchmark repo's workflows do when the simulator "runs" them.

Modelled on the real files (sim/data/inferencex/dot-github/workflows/, copied from
tests/fixtures/inferencex/workflows/ at InferenceX 843c6254):

- dispatch checks (GitHub's 422s): the workflow must declare ``on: workflow_dispatch``; every
  input sent must be declared there; every required input must be sent;
- ``run-name`` evaluated into the run's ``display_title``;
- e2e-tests.yml's ``get-jobs``: ``generate_sweep_configs.py $GENERATE_COMMAND`` parsed with the
  repo CLI's documented grammar (app.core.sweepcli, written from the repo's workflows README) and
  expanded by the master-config rules the sim already shares (app.core.recipes.expand_points), reading
  only the ``--config-files`` given, with ``*``/``?`` key patterns and an error for a pattern that
  matches nothing;
- a matrix job whose `get-jobs` output is never assigned fails as GitHub fails it
  (``sim.getjobs``: at 843c6254 ``eval /``);
- benchmark-tmpl.yml's job name (``p<priority> | <prefix> <precision> <runner> <fw> TP<tp>... c<conc>``
  behind the caller's ``single-node /``) and its ``RESULT_FILENAME``.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import functools
import re
from collections.abc import Collection
from typing import Any

import yaml

from app.core.artifacts import result_stem
from app.core.recipes import expand_points, parse_master
from app.core.recipes.errors import RecipeError
from app.core.recipes.evals import EvalMode, plan_evals
from app.core.sweepcli import CliGrammarError, parse_command
from sim.models import Run
from sim.world_git import GitData as World

WORKFLOWS_DIR = ".github/workflows"
RUN_SWEEP = "run-sweep.yml"
# run-sweep.yml's primary sweep labels (exactly one must be on the PR) and the labels whose
# `labeled` event re-evaluates the sweep (check-changelog's `if:`).
PRIMARY_LABELS = (
    "sweep-enabled",
    "full-sweep-enabled",
    "non-canary-full-sweep-enabled",
    "full-sweep-fail-fast",
    "full-sweep-fail-fast-no-canary",
)
TRIGGER_LABELS = (
    *PRIMARY_LABELS,
    "all-evals",
    "evals-only",
    "agentx-fast",
    "skip_queue",
    "ci-patchwork",
    "engine-patch",
    "ci-patchwork-waived",
    "ci-checklist-complete",
)
# run-sweep.yml's throughput jobs per seq-len, in the file's order (sweep-*-1k1k, sweep-*-8k1k)
SWEEP_SEQS = ("1k1k", "8k1k")
SIM_PRIORITY = 50  # what utils/ci_priority.py would score; any number, the bot must not care
_FW_SHORT = {"sglang": "sgl", "dynamo-sglang": "dyn-sgl", "sglang-disagg": "sgl-disagg"}
_EXPR = re.compile(r"\$\{\{(.*?)\}\}", re.S)


class CommandError(ValueError):
    """The workflow's `generate-cli-command` input cannot be understood (the get-jobs job fails)."""


# -- the workflow file -------------------------------------------------------------------------------


@dataclasses.dataclass
class WorkflowFile:
    name: str
    run_name: str | None
    triggers: dict[str, Any]
    dispatch_inputs: dict[str, dict[str, Any]]


@functools.lru_cache(maxsize=32)
def read_workflow(text: str) -> WorkflowFile:
    # cached and libyaml-parsed: every dispatch reads the 700-line e2e-tests.yml again
    doc = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) or {}
    on = doc.get("on", doc.get(True))  # YAML 1.1 reads a bare `on` key as True
    if isinstance(on, str):
        triggers: dict[str, Any] = {on: None}
    elif isinstance(on, list):
        triggers = {str(t): None for t in on}
    else:
        triggers = {str(k): v for k, v in (on or {}).items()}
    wd = triggers.get("workflow_dispatch") or {}
    inputs = (wd.get("inputs") if isinstance(wd, dict) else None) or {}
    return WorkflowFile(
        str(doc.get("name") or ""),
        doc.get("run-name"),
        triggers,
        {str(k): (v or {}) for k, v in inputs.items()},
    )


def dispatch_error(wf: WorkflowFile, inputs: dict[str, Any]) -> str | None:
    """GitHub's 422 message for this dispatch, or None when GitHub accepts it."""
    if "workflow_dispatch" not in wf.triggers:
        return "Workflow does not have 'workflow_dispatch' trigger"
    unexpected = [k for k in inputs if k not in wf.dispatch_inputs]
    if unexpected:
        return "Unexpected inputs provided: [" + ", ".join(f'"{k}"' for k in unexpected) + "]"
    for name, spec in wf.dispatch_inputs.items():
        if spec.get("required") and name not in inputs and spec.get("default") is None:
            return f"Required input '{name}' not provided"
    return None


def _lookup(context: dict[str, Any], path: str) -> Any:
    node: Any = context
    for part in path.split("."):
        if not isinstance(node, dict):
            return None
        node = node.get(part)
    return node


def evaluate_title(template: str | None, fallback: str, context: dict[str, Any]) -> str:
    """The run's display_title: `run-name` with `${{ a || b }}` evaluated (GitHub: falsy -> next)."""
    if template is None:
        return fallback

    def one(m: re.Match[str]) -> str:
        for alt in m.group(1).split("||"):
            alt = alt.strip()
            value = alt[1:-1] if alt.startswith("'") and alt.endswith("'") else _lookup(context, alt)
            if value:
                return str(value)
        return ""

    return _EXPR.sub(one, str(template)).strip()


# -- names --------------------------------------------------------------------------------------------


def _flag(value: Any) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value).lower()


def result_filename(point: dict[str, Any], node: str, recipe_fingerprint: str = "") -> str:
    """`RESULT_FILENAME` as benchmark-tmpl.yml's "Launch job script" step exports it on `node`."""
    if "tp" not in point or isinstance(point.get("conc"), list):
        base = f"{result_stem(point)}_{node}"  # multi-node / agentic rows: the bot's own naming
        return f"{base}_recipe-{recipe_fingerprint[:16]}" if recipe_fingerprint else base
    base = (
        f"{point['exp-name']}_{point['precision']}_{point['framework']}_tp{point['tp']}"
        f"-pp{point.get('pp', 1)}-dcp{point.get('dcp-size', 1)}-pcp{point.get('pcp-size', 1)}"
        f"-ep{point.get('ep', 1)}-dpa{_flag(point.get('dp-attn', False))}"
        f"_disagg-{_flag(point.get('disagg', False))}_spec-{point.get('spec-decoding', 'none')}"
        f"_conc{point['conc']}_{node}"
    )
    return f"{base}_recipe-{recipe_fingerprint[:16]}" if recipe_fingerprint else base


def _eval_suffix(point: dict[str, Any]) -> str:
    return " | eval-only" if point.get("eval-only") else (" | eval" if point.get("run-eval") else "")


def _parallel(w: dict[str, Any]) -> str:
    par = "".join(
        f"/{tag}{w.get(k)}"
        for tag, k in (("PP", "pp"), ("DCP", "dcp-size"), ("PCP", "pcp-size"), ("EP", "ep"))
        if str(w.get(k, 1)) not in ("", "1")
    )
    return f"TP{w['tp']}{par}{'/DPA' if w.get('dp-attn') else ''}"


def multinode_job_name(caller: str, point: dict[str, Any], priority: int = SIM_PRIORITY) -> str:
    """benchmark-multinode-tmpl.yml's job name behind the caller's: seven folded lines, the
    prefill count and the decode workers only for a disaggregated row, the conc list joined by x.

    That template is not among the fixtures (843c6254); the format is its later copy's, which
    names the same fields (app.core.runmatch's docstring says more).
    """
    fw = str(point["framework"])
    pre, dec = point["prefill"], point["decode"]
    disagg = _flag(point.get("disagg", False)) == "true"
    spec = str(point.get("spec-decoding") or "none")
    concs = point["conc"] if isinstance(point["conc"], list) else [point["conc"]]
    fw = _FW_SHORT.get(fw, fw)
    lines = [
        f"p{priority} | {point['model-prefix']} {point['precision']} {point['runner']} {fw}",
        (f"{pre['num-worker']}P " if disagg else "") + f"({_parallel(pre)})",
        f"x {dec['num-worker']}D ({_parallel(dec)})" if disagg else "",
        spec if spec != "none" else "",
        *_offload_words(point),
        f"c{'x'.join(str(c) for c in concs)}{_eval_suffix(point)}",
    ]
    return f"{caller} {' '.join(lines)}"


def _offload_words(point: dict[str, Any]) -> tuple[str, str]:
    """The name's kv-offload lines (agentic rows): `<mode> KV offload`, and the backend's name
    unless it is none/default."""
    if point.get("scenario-type") != "agentic-coding":
        return "", ""
    mode = str(point.get("kv-offloading") or "")
    backend = point.get("kv-offload-backend")
    name = str(backend.get("name") or "") if isinstance(backend, dict) else str(backend or "")
    return (
        f"{mode} KV offload" if mode not in ("", "none") else "",
        name if name not in ("", "none", "default") else "",
    )


def job_name(caller: str, point: dict[str, Any], priority: int = SIM_PRIORITY) -> str:
    """benchmark-tmpl.yml's `name: >-` (six folded lines, empty expressions kept) behind the caller's
    (a multi-node row: benchmark-multinode-tmpl.yml's, `multinode_job_name`)."""
    if "prefill" in point:
        return multinode_job_name(caller, point, priority)
    fw = str(point["framework"])
    spec = str(point.get("spec-decoding") or "none")
    lines = [
        f"p{priority} | {point['model-prefix']} {point['precision']} {point['runner']} "
        f"{_FW_SHORT.get(fw, fw)}",
        _parallel(point),
        spec if spec != "none" else "",
        *_offload_words(point),
        f"c{point['conc']}{_eval_suffix(point)}",
    ]
    return f"{caller} {' '.join(lines)}"


# -- e2e-tests.yml's get-jobs -----------------------------------------------------------------------


def point_dict(point: Any) -> dict[str, Any]:
    raw = point.to_json() if hasattr(point, "to_json") else dict(point)
    return {k.replace("_", "-"): v for k, v in raw.items()}


def plan_points(world: World, run: Run) -> list[dict[str, Any]]:
    """The rows `generate_sweep_configs.py $GENERATE_COMMAND` emits for the run's command, each with
    the generator's eval marks (`run-eval`, `eval-only`; e2e_jobs splits them into jobs)."""

    cmd = str(run.inputs.get("generate-cli-command") or "")
    if not cmd:
        raise CommandError("generate-cli-command is required outside trusted changelog dispatch mode")
    try:
        parsed = parse_command(cmd)
    except CliGrammarError as exc:
        raise CommandError(str(exc)) from exc
    masters: dict[str, dict[str, Any]] = {}
    for path in parsed.config_files:
        text = world.read_file(run.repo, path, run.head_sha)
        if text is None:
            raise CommandError(f"FileNotFoundError: {path}")
        masters[path] = parse_master(text.decode())
    points: list[dict[str, Any]] = []
    try:
        if parsed.command == "test-config":
            for pattern in parsed.config_keys:
                hits = [(p, k) for p, m in masters.items() for k in m if fnmatch.fnmatchcase(k, pattern)]
                if not hits:
                    raise CommandError(f"config key pattern {pattern!r} matches no keys")
                for path, key in hits:
                    for p in expand_points(masters[path], key, conc=list(parsed.conc) or None):
                        points.append(point_dict(p))
        else:
            f = parsed.filters
            for master in masters.values():
                for key in master:
                    try:
                        expanded = expand_points(master, key)
                    except RecipeError:
                        continue  # multinode / agentic keys: not single-node fixed-seq-len
                    for p in expanded:
                        d = point_dict(p)
                        if _full_sweep_keeps(d, f, parsed.seq_lens):
                            points.append(d)
    except RecipeError as exc:
        raise CommandError(str(exc)) from exc
    # The generator's eval selection runs on the rows it generated (the dispatched slice), in the
    # command's eval mode.
    return plan_evals(points, EvalMode.ALL if parsed.all_evals else EvalMode(parsed.evals))


def _throughput_row(point: dict[str, Any]) -> dict[str, Any]:
    return point | {"run-eval": False, "eval-only": False}


def _eval_row(point: dict[str, Any]) -> dict[str, Any]:
    return point | {"run-eval": True, "eval-only": True}


def e2e_jobs(world: World, run: Run, unexpanded: Collection[str] = ()) -> list[tuple[str, dict[str, Any]]]:
    """e2e-tests.yml's matrix jobs for the run, in the file's job order, each (name, point).

    get-jobs splits the generated rows by `prefill` (multi-node: benchmark-multinode-tmpl.yml) and
    `scenario-type` (agentic) into throughput families (`multi-node /`, `agentic /`,
    `multi-node agentic /`, `single-node /`, each passing `run-eval: false`: a throughput job never
    runs the eval) and eval families (`multi-node eval /`, `agentic eval /`,
    `multi-node agentic eval /`, `eval /`, each passing `eval-only: true`): every row the selection
    marked `run-eval` has its own eval-only job.

    ``unexpanded``: the callers whose matrix GitHub cannot evaluate (``sim.getjobs``, read from
    the dispatched file: at 843c6254 ``eval /``, get-jobs never assigning ``EVALS``): they get no
    job per row (the run has the caller's failed job instead, ``Actions._fan_out``).
    """
    rows = plan_points(world, run)

    def rows_of(*, multi: bool, agentic: bool) -> list[dict[str, Any]]:
        return [
            r
            for r in rows
            if ("prefill" in r) == multi and (r.get("scenario-type") == "agentic-coding") == agentic
        ]

    multi, single = rows_of(multi=True, agentic=False), rows_of(multi=False, agentic=False)
    agentic, multi_agentic = rows_of(multi=False, agentic=True), rows_of(multi=True, agentic=True)
    # get-jobs' filters: fixed-seq-len throughput skips eval-only rows, agentic throughput skips
    # run-eval rows; every eval family takes the run-eval rows (its callers pass eval-only: true).
    families = (
        ("multi-node /", [_throughput_row(r) for r in multi if not r.get("eval-only")]),
        ("multi-node eval /", [_eval_row(r) for r in multi if r.get("run-eval")]),
        ("agentic /", [_throughput_row(r) for r in agentic if not r.get("run-eval")]),
        ("agentic eval /", [_eval_row(r) for r in agentic if r.get("run-eval")]),
        ("multi-node agentic /", [_throughput_row(r) for r in multi_agentic if not r.get("run-eval")]),
        ("multi-node agentic eval /", [_eval_row(r) for r in multi_agentic if r.get("run-eval")]),
        ("single-node /", [_throughput_row(r) for r in single if not r.get("eval-only")]),
        ("eval /", [_eval_row(r) for r in single if r.get("run-eval")]),
    )
    return [
        (job_name(caller, r), r) for caller, family in families if caller not in unexpanded for r in family
    ]


def _full_sweep_keeps(point: dict[str, Any], f: dict[str, Any], seq_lens: tuple[str, ...]) -> bool:
    checks = (
        ("model_prefix", "model-prefix"),
        ("precision", "precision"),
        ("framework", "framework"),
        ("runner_type", "runner"),
    )
    for flag, field in checks:
        if flag in f and point[field] not in f[flag]:
            return False
    if seq_lens and str(point["exp-name"]).rsplit("_", 1)[-1] not in seq_lens:
        return False
    conc, tp = int(point["conc"]), int(point["tp"])
    if "min_conc" in f and conc < int(f["min_conc"]):
        return False
    if "max_conc" in f and conc > int(f["max_conc"]):
        return False
    return not ("max_tp" in f and tp > int(f["max_tp"]))


# -- run-sweep.yml ------------------------------------------------------------------------------------


def sweep_run_wanted(
    *,
    action: str,
    label: str | None,
    labels: list[str],
    same_repo: bool,
    changelog_changed: bool,
    head_message: str,
) -> str:
    """ "run", or why run-sweep.yml would not fan a sweep out for this pull_request event."""
    if action not in ("ready_for_review", "synchronize", "labeled", "unlabeled"):
        return f"not a run-sweep.yml trigger ({action})"
    if not changelog_changed:
        return "perf-changelog.yaml unchanged (the `paths` filter)"
    if action in ("labeled", "unlabeled") and label not in TRIGGER_LABELS:
        return f"label {label!r} does not trigger a sweep"
    primary = [lb for lb in labels if lb in PRIMARY_LABELS]
    if not primary:
        return "no primary sweep label"
    if len(primary) > 1:
        return "conflicting sweep labels (check-changelog fails)"
    if not same_repo:
        return "fork PR (no secrets: trusted-external-sweep.yml's business)"
    if "[skip-sweep]" in head_message:
        return "head commit says [skip-sweep]"
    return "run"


def changelog_keys(base_text: str, head_text: str) -> list[str]:
    """Config keys of the perf-changelog entries the PR adds (what process_changelog.py sweeps)."""
    base = yaml.safe_load(base_text) or []
    head = yaml.safe_load(head_text) or []
    keys: list[str] = []
    for entry in head:
        if entry in base or not isinstance(entry, dict):
            continue
        for key in entry.get("config-keys") or []:
            if str(key) not in keys:
                keys.append(str(key))
    return keys


def sweep_points(world: World, run: Run) -> list[dict[str, Any]]:
    """The rows a run-sweep.yml run plans: every point of each changed key (multi-node rows too).

    `sweep-enabled` trims each single-node configuration to its minimum concurrency (TRIM_CONC;
    multi-node rows are kept whole); the full-sweep labels run everything (the canary-first
    ordering of `full-sweep-enabled` is not modelled).
    """
    masters = find_master_files(world, run.repo, run.head_sha)
    points: list[dict[str, Any]] = []
    trim = "sweep-enabled" in run.inputs.get("labels", [])
    for key in run.inputs.get("keys", []):
        for path in masters:
            master = parse_master((world.read_file(run.repo, path, run.head_sha) or b"").decode())
            if key not in master:
                continue
            try:
                expanded = [point_dict(p) for p in expand_points(master, key)]
            except RecipeError:
                continue  # a key the planner cannot expand (process_changelog.py would fail setup)
            points.extend(_trimmed(expanded) if trim else expanded)
    return points


def _trimmed(expanded: list[dict[str, Any]]) -> list[dict[str, Any]]:
    low: dict[tuple[Any, ...], dict[str, Any]] = {}
    kept: list[dict[str, Any]] = []
    for d in expanded:
        if "prefill" in d or d.get("scenario-type") == "agentic-coding":
            kept.append(d)
            continue
        ident = (d["exp-name"], d["tp"], d["ep"], d["dp-attn"], d["spec-decoding"])
        if ident not in low or int(d["conc"]) < int(low[ident]["conc"]):
            low[ident] = d
    return list(low.values()) + kept


def sweep_jobs(world: World, run: Run) -> list[tuple[str, dict[str, Any]]]:
    """run-sweep.yml's matrix jobs, each (name, point), in the file's job order.

    setup's process_changelog.py runs with the PR's modifier labels (`all-evals`: every
    fixed-seq-len eval besides throughput; `evals-only`: the selected evals without throughput;
    both: every eval only) and splits the rows into `single_node[seq]` (`single-node <seq> /`),
    `multi_node[seq]` (`multi-node <seq> /`), `evals` (`eval /`) and `multinode_evals`
    (`multi-node eval /`), the eval jobs being eval-only. The file has throughput jobs for 1k1k
    and 8k1k only: rows of another seq-len are not run. Not modelled: agentic families, the
    canary, the changelog entries' own `evals-only`/`all-evals` fields.
    """
    labels = run.inputs.get("labels", [])
    everything, only = "all-evals" in labels, "evals-only" in labels
    mode = EvalMode.ALL if everything and only else EvalMode.ONLY if only else EvalMode.DEFAULT
    rows = plan_evals(sweep_points(world, run), mode)
    if everything and not only:  # throughput as usual, and an eval of every fixed-seq-len row
        rows = [r | {"run-eval": True} for r in rows]
    fixed = [r for r in rows if r.get("scenario-type") != "agentic-coding"]
    jobs: list[tuple[str, dict[str, Any]]] = []
    for multi, family in ((True, "multi-node"), (False, "single-node")):
        for seq in SWEEP_SEQS:
            caller = f"{family} {seq} /"
            jobs += [
                (job_name(caller, _throughput_row(r)), _throughput_row(r))
                for r in fixed
                if ("prefill" in r) == multi
                and not r.get("eval-only")
                and str(r["exp-name"]).endswith(f"_{seq}")
            ]
    for multi, caller in ((False, "eval /"), (True, "multi-node eval /")):
        jobs += [
            (job_name(caller, _eval_row(r)), _eval_row(r))
            for r in fixed
            if ("prefill" in r) == multi and r.get("run-eval")
        ]
    return jobs


def _seq_order(seq: str) -> tuple[int, str]:
    # the workflow's job order: 1k1k before 8k1k
    return (0 if seq == "1k1k" else 1, seq)


def find_master_files(world: World, full_name: str, sha: str) -> list[str]:
    repo = world.repo(full_name)
    files = repo.objects.flatten(repo.objects.commits[sha].tree)
    return sorted(
        p
        for p in files
        if any(p.startswith(d + "/") and "/" not in p[len(d) + 1 :] for d in (".github/configs", "configs"))
        and p.endswith("master.yaml")
    )
