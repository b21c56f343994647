"""What the benchmark repo's workflows do when the simulator "runs" them.

Modelled on the real files (sim/data/inferencex/dot-github/workflows/, copied from
tests/fixtures/inferencex/workflows/ at InferenceX 843c6254):

- dispatch checks (GitHub's 422s): the workflow must declare ``on: workflow_dispatch``; every
  input sent must be declared there; every required input must be sent;
- ``run-name`` evaluated into the run's ``display_title``;
- e2e-tests.yml's ``get-jobs``: ``generate_sweep_configs.py $GENERATE_COMMAND`` parsed with the
  repo CLI's grammar (sim.gencli) and expanded as the repo's generator does (sim.matrix,
  sim.matrix_evals, sim.matrix_full: the simulator's own code, checked against what the real
  generator printed for every key), reading only the ``--config-files`` given;
- a matrix job whose `get-jobs` output is never assigned fails as GitHub fails it
  (``sim.getjobs``: at 843c6254 ``eval /``);
- the templates' job names and ``RESULT_FILENAME`` (sim.naming, re-exported here).
"""

from __future__ import annotations

import dataclasses
import functools
import pickle
import re
from collections.abc import Collection
from typing import Any

import yaml

from sim import gencli
from sim.matrix import MatrixError, conc_pick, key_rows, test_config
from sim.matrix_dram import DramError
from sim.matrix_evals import EvalMode, apply_eval_mode
from sim.matrix_full import FilterError, full_sweep
from sim.models import Run
from sim.naming import SIM_PRIORITY, job_name, multinode_job_name, result_filename
from sim.world_git import GitData as World

__all__ = ["SIM_PRIORITY", "job_name", "multinode_job_name", "result_filename"]  # sim.naming's, for callers

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


# -- e2e-tests.yml's get-jobs -----------------------------------------------------------------------


def point_dict(point: Any) -> dict[str, Any]:
    raw = point.to_json() if hasattr(point, "to_json") else dict(point)
    return {k.replace("_", "-"): v for k, v in raw.items()}


@functools.lru_cache(maxsize=16)
def _pickled_yaml(text: str) -> bytes:
    return pickle.dumps(yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) or {})


def fresh_yaml(text: str) -> Any:
    """``text`` parsed once (libyaml; the master files are megabytes and every dispatch reads them
    again), handed out as a fresh copy each time: callers merge and edit what they get."""
    return pickle.loads(_pickled_yaml(text))


def _masters(world: World, run: Run, paths: tuple[str, ...]) -> dict[str, Any]:
    """The master files given, merged in order (a key in a later file wins, as the script's
    dict update does)."""
    merged: dict[str, Any] = {}
    for path in paths:
        text = world.read_file(run.repo, path, run.head_sha)
        if text is None:
            raise CommandError(f"FileNotFoundError: {path}")
        merged.update(fresh_yaml(text.decode()))
    return merged


def _runners(world: World, run: Run, cmd: gencli.Command) -> dict[str, Any]:
    """``--runner-config`` (default configs/runners.yaml); absent there, the runners.yaml beside
    the first master file (the sim's repo keeps the older .github/configs layout)."""
    beside = cmd.config_files[0].rsplit("/", 1)[0] + "/runners.yaml" if "/" in cmd.config_files[0] else ""
    for path in (cmd.runner_config, beside):
        text = world.read_file(run.repo, path, run.head_sha) if path else None
        if text is not None:
            return dict(fresh_yaml(text.decode()))
    return {}


def plan_points(world: World, run: Run) -> list[dict[str, Any]]:
    """The rows `generate_sweep_configs.py $GENERATE_COMMAND` prints for the run's command, eval
    marks included (sim.gencli reads the command, sim.matrix expands it; e2e_jobs splits the
    rows into jobs)."""
    try:
        cmd = gencli.parse(str(run.inputs.get("generate-cli-command") or ""))
        if cmd.options.get("runner_node_filter"):
            raise CommandError("--runner-node-filter is not played by the simulator")
        masters, runners = _masters(world, run, cmd.config_files), _runners(world, run, cmd)
        o = cmd.options
        if cmd.name == "test-config":
            return test_config(
                masters,
                o["config_keys"],
                runners,
                cmd.mode,
                conc=o.get("conc") or (),
                seq_lens=o.get("seq_lens") or (),
                scenarios=o.get("scenario_type") or (),
            )
        return full_sweep(masters, runners, o, cmd.mode)
    except (gencli.GrammarError, MatrixError, FilterError, DramError) as exc:
        raise CommandError(str(exc)) from exc
    except (KeyError, TypeError) as exc:  # a master entry missing a field the script needs
        raise CommandError(f"{type(exc).__name__}: {exc}") from exc


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
    pairs = e2e_families(plan_points(world, run))
    return [(job_name(caller, r), r) for caller, r in pairs if caller not in unexpanded]


# test-sweep-agentic-evals passes no `pp`, `dcp-size` or `pcp-size` (test-sweep-agentic does):
# benchmark-tmpl.yml runs it with its defaults, which its job name and RESULT_FILENAME show.
AGENTIC_EVAL_UNPASSED = {"pp": 1, "dcp-size": 1, "pcp-size": 1}


def e2e_families(rows: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """get-jobs' split of the generated rows, (caller, row as the caller passes it), in the file's
    job order: by `prefill` and `scenario-type`; fixed-seq-len throughput skips eval-only rows,
    agentic throughput skips run-eval rows; every eval family takes the run-eval rows."""

    def rows_of(*, multi: bool, agentic: bool) -> list[dict[str, Any]]:
        return [
            r
            for r in rows
            if ("prefill" in r) == multi and (r.get("scenario-type") == "agentic-coding") == agentic
        ]

    multi, single = rows_of(multi=True, agentic=False), rows_of(multi=False, agentic=False)
    agentic, multi_agentic = rows_of(multi=False, agentic=True), rows_of(multi=True, agentic=True)
    families = (
        ("multi-node /", [_throughput_row(r) for r in multi if not r.get("eval-only")]),
        ("multi-node eval /", [_eval_row(r) for r in multi if r.get("run-eval")]),
        ("agentic /", [_throughput_row(r) for r in agentic if not r.get("run-eval")]),
        ("agentic eval /", [_eval_row(r) | AGENTIC_EVAL_UNPASSED for r in agentic if r.get("run-eval")]),
        ("multi-node agentic /", [_throughput_row(r) for r in multi_agentic if not r.get("run-eval")]),
        ("multi-node agentic eval /", [_eval_row(r) for r in multi_agentic if r.get("run-eval")]),
        ("single-node /", [_throughput_row(r) for r in single if not r.get("eval-only")]),
        ("eval /", [_eval_row(r) for r in single if r.get("run-eval")]),
    )
    return [(caller, r) for caller, family in families for r in family]


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
            master = fresh_yaml((world.read_file(run.repo, path, run.head_sha) or b"").decode())
            if key not in master:
                continue
            try:
                expanded = key_rows(master[key], {}, conc_pick(()))
            except (KeyError, TypeError, DramError):
                continue  # a key the generator cannot expand (process_changelog.py would fail setup)
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
    rows = apply_eval_mode(sweep_points(world, run), mode)
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
