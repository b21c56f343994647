"""The benchmark repo's own run-sweep.yml, started by the pull_request events it is triggered by."""

from __future__ import annotations

from sim.models import Event, Pull, Repo, Run
from sim.runs import RUN_SWEEP, changelog_keys, sweep_jobs, sweep_run_wanted
from sim.world_pulls import Pulls

# The pull_request activity types run-sweep.yml is triggered by (its `on: pull_request: types:`).
TRIGGER_TYPES = ("ready_for_review", "synchronize", "labeled", "unlabeled")


class Sweeps(Pulls):
    def run_sweep_on(self, event: Event) -> None:
        """The event listener: a pull_request event of a type run-sweep.yml is triggered by."""
        if event.name == "pull_request" and event.action in TRIGGER_TYPES:
            self._maybe_run_sweep(event.repo, event.subject, event.action, event.extra.get("label"))

    def _maybe_run_sweep(self, repo: Repo, pr: Pull, action: str, label: str | None) -> Run | None:
        """run-sweep.yml's `on: pull_request` + `setup` conditions, then its sweep run.

        Runs (sim/runs.py `sweep_run_wanted`) only when the PR changes perf-changelog.yaml, carries
        exactly one primary sweep label, comes from the same repo, and its head commit message has
        no `[skip-sweep]`; a newer run cancels the PR's older one (its concurrency group).
        """
        wf = repo.workflows.get(RUN_SWEEP)
        if wf is None or pr.state != "open":
            return None
        head = self.pull_head_sha(pr)
        base = self.repo_base_sha(pr)
        base_log = self.read_file(repo.full_name, "perf-changelog.yaml", base)
        head_log = self.read_file(repo.full_name, "perf-changelog.yaml", head)
        message = repo.objects.commits[head].message if head in repo.objects.commits else ""
        why = sweep_run_wanted(
            action=action,
            label=label,
            labels=pr.labels,
            same_repo=pr.head_repo == repo.full_name,
            changelog_changed=base_log != head_log,
            head_message=message,
        )
        self.sweep_decisions.append({"pr": pr.number, "action": action, "head": head, "decision": why})
        if why != "run":
            return None
        keys = changelog_keys((base_log or b"").decode(), (head_log or b"").decode())
        for old in self.runs.values():
            if old.pr_number == pr.number and old.workflow_id == wf.id and old.status != "completed":
                self.cancel_run(old.id)
        self._run_numbers[repo.full_name] += 1
        now = self.now()
        run = Run(
            self.next_id(),
            repo.full_name,
            wf.id,
            f"Run Sweep - {pr.title}",  # run-name: Run Sweep - ${{ github.event.pull_request.title || ... }}
            pr.head_ref,
            head,
            pr.user,
            {"keys": keys, "labels": list(pr.labels)},
            now,
            now,
            self._run_numbers[repo.full_name],
            event="pull_request",
            pr_number=pr.number,
        )
        self.runs[run.id] = run
        self._run_event(run, "requested")
        self._plan_sweep_jobs(run)
        self._wake()
        return run

    def _plan_sweep_jobs(self, run: Run) -> None:
        # raises as process_changelog.py would fail `setup`; nothing to sweep: the run just succeeds
        self._fan_out(run, lambda: sweep_jobs(self, run), empty_ok=True)
