"""The runner-label contract of GitHub as the simulator plays it: repo variables, runners' custom
labels, every job's ``runs-on`` labels from the real templates, and GitHub's assignment rule.

- GitHub's rule: an idle online runner takes the **oldest** queued job whose ``runs-on`` labels are
  all among its own (case-insensitive). No priority; extra labels on a job only narrow it.
- A job's labels: with the repo variable ``PRIORITY_SCHEDULER_ENABLED`` = ``true``, the templates'
  ``runs-on`` expression (``benchmark-tmpl.yml``, ``benchmark-multinode-tmpl.yml`` for a row with
  ``prefill``) evaluated by ``sim.priority`` with the score and queue token computed from
  ``configs/ci-priority.yaml``; otherwise ``[runner]``. ``NODE_SLOT_SCHEDULER_ENABLED`` = ``true``
  adds ``nodes:<N>`` (the issue's description of the later templates; the 843c6254 files the sim
  carries have no node slots): N is the row's ``node-count``, else 1.
- A runner's labels: ``self-hosted``, ``Linux``, ``X64`` (read-only), its hardware label, its
  extra labels (``cluster:…`` of a multi-node pool) and the custom labels a controller added.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from sim.models import Job, Run, Runner, SimError
from sim.priority import queue_token, runs_on, score
from sim.world_registry import Registry

DATA = Path(__file__).resolve().parent / "data" / "inferencex" / "dot-github"
READ_ONLY = ("self-hosted", "Linux", "X64")
MAX_LABEL = 256


@cache
def _template_runs_on(name: str) -> str:
    doc = yaml.safe_load((DATA / "workflows" / name).read_text())
    return str(doc["jobs"]["benchmark"]["runs-on"])


@cache
def _policy() -> dict[str, Any]:
    return dict(yaml.safe_load((DATA / "configs" / "ci-priority.yaml").read_text()))


def label_set(labels: list[str]) -> frozenset[str]:
    """Labels as GitHub compares them: case-insensitive."""
    return frozenset(x.lower() for x in labels)


def labels_match(job_labels: list[str], runner_labels: list[str]) -> bool:
    """GitHub's AND-matching: every label the job asks for is among the runner's (any case)."""
    return label_set(job_labels) <= label_set(runner_labels)


def _pr_labels(run: Run) -> frozenset[str]:
    raw = run.inputs.get("pr-labels-json") or "[]"
    try:
        value = json.loads(raw) if isinstance(raw, str) else raw
    except json.JSONDecodeError:
        return frozenset()
    return frozenset(x for x in value if isinstance(x, str)) if isinstance(value, list) else frozenset()


class RunnerLabels(Registry):
    def variables(self, full_name: str) -> dict[str, str]:
        return self.repo_variables.setdefault(full_name, {})

    def set_variable(self, full_name: str, name: str, value: str) -> None:
        with self.lock:
            self.variables(full_name)[name] = value

    # -- a job's labels

    def contract_labels(self, run: Run, point: dict[str, Any], index: int) -> list[str]:
        """The labels a matrix job of ``run`` is queued with, as the templates compute them."""
        repo_vars = self.variables(run.repo)
        multi = point.get("prefill") is not None
        pr_labels = _pr_labels(run)
        pr = run.pr_number or _int_or_none(run.inputs.get("pr-number"))
        family = "multi" if multi else "single"
        inputs = {
            "runner": str(point.get("runner", "")),
            "priority": score(point, _policy(), event=run.event, pr_labels=pr_labels),
            "queue-token": queue_token(point, f"{run.id}:1:{family}", (str(index),)),
            "skip-queue-pr": str(pr) if pr and "skip_queue" in pr_labels else "",
        }
        context = {"vars": dict(repo_vars), "inputs": inputs, "github": {"run_attempt": "1"}}
        name = "benchmark-multinode-tmpl.yml" if multi else "benchmark-tmpl.yml"
        labels = runs_on(_template_runs_on(name), context)
        if repo_vars.get("NODE_SLOT_SCHEDULER_ENABLED") == "true" and len(labels) > 1:
            labels.append(f"nodes:{int(point.get('node-count') or 1)}")
        return labels

    # -- runners

    def all_runners(self) -> list[Runner]:
        return sorted((r for rs in self.runners.values() for r in rs), key=lambda r: r.id)

    def runner_by_id(self, runner_id: int) -> Runner:
        for r in self.all_runners():
            if r.id == runner_id:
                return r
        raise SimError(404, "Not Found")

    def runner_labels(self, runner: Runner) -> list[tuple[str, str]]:
        """(name, type) as the runners API lists them: read-only first, then custom."""
        out = [(x, "read-only") for x in READ_ONLY]
        out += [(x, "custom") for x in [runner.label, *runner.extra_labels, *runner.custom_labels]]
        return out

    def add_runner_labels(self, runner_id: int, names: list[str]) -> Runner:
        with self.lock:
            runner = self.runner_by_id(runner_id)
            have = {n.lower() for n, _ in self.runner_labels(runner)}
            for name in names:
                if not isinstance(name, str) or not name.strip() or len(name) > MAX_LABEL:
                    raise SimError(422, "Validation Failed")
                if name.lower() not in have:
                    runner.custom_labels.append(name)
                    have.add(name.lower())
            self._wake()
            return runner

    def remove_runner_label(self, runner_id: int, name: str) -> Runner:
        with self.lock:
            runner = self.runner_by_id(runner_id)
            match = [x for x in runner.custom_labels if x.lower() == name.lower()]
            if not match:
                if name.lower() in {x.lower() for x in READ_ONLY}:
                    raise SimError(422, "Validation Failed")
                raise SimError(404, "Not Found")
            runner.custom_labels.remove(match[0])
            return runner

    def take_runner(self, job: Job) -> Runner | None:
        """GitHub's rule for the oldest queued job (the fleet's tick walks jobs oldest first)."""
        if not job.labels:
            return next((r for r in self.runners.get(job.label, []) if r.idle), None)
        for runner in self.all_runners():
            if runner.idle and labels_match(job.labels, [n for n, _ in self.runner_labels(runner)]):
                return runner
        return None


def _int_or_none(value: Any) -> int | None:
    try:
        return int(value) if value not in (None, "") else None
    except (TypeError, ValueError):
        return None
