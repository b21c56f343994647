"""The benchmark repo's own run-sweep.yml, started by the pull_request events it is triggered by."""

from __future__ import annotations

import io
import json
import zipfile
from typing import Any

from sim.models import Artifact, Event, Job, Pull, Repo, Run, iso
from sim.reusegate import Gate, GateError, gate, reuse_skips
from sim.runs import RUN_SWEEP, changelog_keys, sweep_jobs, sweep_run_wanted
from sim.world_pulls import Pulls

# The primary labels whose runs start with one canary job (run-sweep.yml's `canary-select` if:).
CANARY_LABELS = ("full-sweep-enabled", "full-sweep-fail-fast")

# The pull_request activity types run-sweep.yml is triggered by (its `on: pull_request: types:`).
TRIGGER_TYPES = ("ready_for_review", "synchronize", "labeled", "unlabeled")


class Sweeps(Pulls):
    def run_sweep_on(self, event: Event) -> None:
        """The event listener: a pull_request event of a type run-sweep.yml is triggered by, or a
        push to main (its `on: push: branches: [main]`)."""
        if event.name == "pull_request" and event.action in TRIGGER_TYPES:
            self._maybe_run_sweep(event.repo, event.subject, event.action, event.extra.get("label"))
        elif event.name == "push" and event.extra.get("ref") == f"refs/heads/{event.repo.default_branch}":
            self._maybe_run_main(event.repo, event.extra.get("before"), str(event.extra.get("after")))

    def _maybe_run_main(self, repo: Repo, before: str | None, after: str) -> Run | None:
        """A push to main that changes perf-changelog.yaml: setup runs the reuse gate (sim.reusegate);
        reuse skips every GPU job and trigger-ingest hands on the source run, else main sweeps the
        changed keys itself; a gate that fails closed fails setup and nothing runs."""
        wf = repo.workflows.get(RUN_SWEEP)
        if wf is None or not before:
            return None
        base_log = self.read_file(repo.full_name, "perf-changelog.yaml", before) or b""
        head_log = self.read_file(repo.full_name, "perf-changelog.yaml", after) or b""
        if base_log == head_log:
            return None  # the `paths` filter
        self._run_numbers[repo.full_name] += 1
        now = self.now()
        message = repo.objects.commits[after].message
        keys = changelog_keys(base_log.decode(), head_log.decode())
        run = Run(
            self.next_id(),
            repo.full_name,
            wf.id,
            f"Run Sweep - {message.splitlines()[0] if message else after}",
            repo.default_branch,
            after,
            self.settings.default_token_user,
            {"keys": keys, "labels": []},
            now,
            now,
            self._run_numbers[repo.full_name],
            event="push",
        )
        self.runs[run.id] = run
        self._run_event(run, "requested")
        try:
            decided: Gate | None = gate(self, repo.full_name, after)
        except GateError as exc:
            decided, run.error = None, str(exc)
        run.inputs["reuse"] = {
            "enabled": bool(decided and decided.enabled),
            "source-run-id": decided.source_run_id if decided else None,
            "reason": decided.reason if decided else run.error,
        }
        self.sweep_decisions.append({"pr": None, "push": after, "decision": run.inputs["reuse"]})
        if decided is None:
            self._add_hosted_job(run, "setup", "failure")
            self._conclude(run, "failure")
        elif decided.enabled:
            self._add_hosted_job(run, "setup", "success")
            for family in ("canary /", "single-node 1k1k /", "single-node 8k1k /", "eval /"):
                self._add_hosted_job(run, family, "skipped")
            self._publish(run)
        else:
            self._fan_out(run, lambda: sweep_jobs(self, run), empty_ok=True)
        self._wake()
        return run

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
        if why == "run" and action == "synchronize" and reuse_skips(self, repo, pr):
            why = "reuse-sweep-gate: a maintainer authorized reuse, skip-pr-sweep (the run is not modelled)"
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
        """setup's matrix, run-sweep.yml's order: with `full-sweep-enabled` or
        `full-sweep-fail-fast` one canary first (the lowest-conc single-node throughput row that runs
        no eval, `canary / ...`), the rest only once it succeeded (`canary-select`'s remaining
        space); raises as process_changelog.py would fail `setup`; nothing to sweep: success."""

        def plan() -> list[tuple[str, dict[str, Any]]]:
            planned = sweep_jobs(self, run)
            if not any(lb in CANARY_LABELS for lb in run.inputs.get("labels", [])):
                return planned
            single = [
                job
                for job in planned
                if job[0].startswith("single-node ")
                and not job[1].get("run-eval")
                and not job[1].get("eval-only")
            ]
            if not single:
                return planned
            canary = min(single, key=lambda np: int(np[1]["conc"]))
            self._held[run.id] = [j for j in planned if j is not canary]
            return [("canary /" + canary[0].split(" /", 1)[1], canary[1])]

        self._fan_out(run, plan, empty_ok=True)

    def _maybe_finish_run(self, run: Run) -> None:
        """The canary's outcome releases (or skips) the rest; a run-sweep.yml run's last jobs
        aggregate what its jobs uploaded (`collect-results`, `collect-evals`) and, on a push to
        main, hand it to InferenceX-app (`trigger-ingest`)."""
        if run.status == "completed" or any(self.jobs[j].status != "completed" for j in run.jobs):
            return
        held = self._held.pop(run.id, None)
        if held:
            canary_ok = all(
                self.jobs[j].conclusion == "success"
                for j in run.jobs
                if self.jobs[j].name.startswith("canary /")
            )
            if canary_ok:
                for name, point in held:
                    self._queue_job(run, name, point, len(run.jobs))
                self._wake()
                return
        wf = self.repo(run.repo).workflows.get(RUN_SWEEP)
        if wf is not None and run.workflow_id == wf.id and "aggregated" not in run.inputs:
            run.inputs["aggregated"] = True
            self._aggregate(run)
            if run.event == "push":
                self._publish(run)
                return
        super()._maybe_finish_run(run)

    def _aggregate(self, run: Run) -> None:
        """`results_bmk` (agg_bmk.json) from the run's bmk_ uploads, `eval_results_all`
        (agg_eval_all.json) from its eval uploads, and the `changelog-metadata` of its setup."""
        bmk: list[Any] = []
        evals: list[Any] = []
        for art in [a for a in self.artifacts.values() if a.run_id == run.id]:
            with zipfile.ZipFile(io.BytesIO(art.data)) as zf:
                names = zf.namelist()
                if art.name.startswith("bmk_"):
                    bmk += [json.loads(zf.read(n)) for n in names if n.startswith("agg_")]
                elif art.name.startswith("eval_") and "meta_env.json" in names:
                    meta = json.loads(zf.read("meta_env.json"))
                    for n in names:
                        if n.startswith("results"):
                            evals.append({"meta": meta, "file": n, "results": json.loads(zf.read(n))})
        if bmk:
            self._upload(run, "results_bmk", {"agg_bmk.json": json.dumps(bmk, indent=2)})
        if evals:
            self._upload(run, "eval_results_all", {"agg_eval_all.json": json.dumps(evals, indent=2)})
        keys = {"config-keys": run.inputs.get("keys", []), "head-sha": run.head_sha}
        self._upload(run, "changelog-metadata", {"changelog-metadata.json": json.dumps(keys)})

    def _publish(self, run: Run) -> None:
        """trigger-ingest (push runs): source-run-id is the reused run's, else main's own."""
        reuse = run.inputs.get("reuse") or {}
        source = reuse.get("source-run-id") if reuse.get("enabled") else run.id
        if reuse.get("enabled"):
            self._upload(
                run, "changelog-metadata", {"changelog-metadata.json": json.dumps(run.inputs["keys"])}
            )
        failed = self.faults.trigger_ingest_fail
        self.faults.trigger_ingest_fail = False
        self._add_hosted_job(run, "trigger-ingest", "failure" if failed else "success")
        if not failed:
            self.ingests.append({"repo": run.repo, "source-run-id": source, "merge-run-id": run.id})
        super()._maybe_finish_run(run)

    def _upload(self, run: Run, name: str, members: dict[str, str]) -> None:
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
            for member, text in members.items():
                zf.writestr(member, text)
        art = Artifact(self.next_id(), run.id, name, buf.getvalue(), self.now())
        self.artifacts[art.id] = art

    def _add_hosted_job(self, run: Run, name: str, conclusion: str) -> Job:
        """A job on a GitHub-hosted runner (no runner of ours), done at once."""
        now = self.now()
        job = Job(self.next_id(), run.id, name, "ubuntu-latest", {}, now)
        job.status, job.conclusion, job.started_at, job.completed_at = "completed", conclusion, now, now
        job.runner_name = None if conclusion == "skipped" else "GitHub Actions 1"
        job.steps = (
            []
            if conclusion == "skipped"
            else [
                {
                    "name": "Set up job",
                    "status": "completed",
                    "conclusion": "success",
                    "number": 1,
                    "started_at": iso(now),
                    "completed_at": iso(now),
                },
                {
                    "name": f"Run {name}",
                    "status": "completed",
                    "conclusion": conclusion,
                    "number": 2,
                    "started_at": iso(now),
                    "completed_at": iso(now),
                },
            ]
        )
        self.jobs[job.id] = job
        run.jobs.append(job.id)
        return job
