"""The self-hosted runner fleet: runners, the tick that starts and finishes jobs, and what a
finished job leaves behind (steps, annotations, uploaded artifacts).
"""

from __future__ import annotations

import hashlib
import io
import json
import time
import zipfile
from datetime import UTC, datetime
from typing import Any

from sim import collect, naming, perf
from sim.models import Artifact, Event, Job, Run, Runner, iso
from sim.naming import point_identity, result_filename
from sim.world_runners import RunnerLabels


class Fleet(RunnerLabels):
    def set_runners(self, label: str, count: int) -> None:
        with self.lock:
            current = self.runners.setdefault(label, [])
            nodes = self.runner_nodes.get(label, [])
            taken = {r.name for r in current}
            while len(current) < count:
                # Node names as the repo's runners.yaml lists them; invented ones past its end.
                spare = [n for n in nodes if n not in taken]
                name = spare[0] if spare else f"{label}-amds_{len(current):02d}"
                while name in taken:
                    name += "x"
                taken.add(name)
                current.append(Runner(self.next_id(), name, label))
            # shrinking removes idle runners only; busy ones finish their job first
            keep = [r for r in current if r.busy_job is not None]
            idle = [r for r in current if r.busy_job is None]
            self.runners[label] = (keep + idle)[: max(count, len(keep))]
            self._wake()

    def free_runners(self, label: str) -> int:
        with self.lock:
            return sum(1 for r in self.runners.get(label, []) if r.busy_job is None)

    def tick(self) -> float | None:
        """Advance the fleet: start queued jobs on free runners, finish due jobs.

        Returns the real seconds until the next deadline (None when nothing is running).
        """
        with self.lock:
            mono = time.monotonic()
            for job in sorted(self.jobs.values(), key=lambda j: j.id):
                if job.status == "in_progress" and job.ends_at_real is not None and job.ends_at_real <= mono:
                    self._complete_job(job)
            for job in sorted(self.jobs.values(), key=lambda j: j.id):
                if job.status != "queued":
                    continue
                runner = self.take_runner(job)
                if runner is None:
                    continue
                if self.faults.queue_delay_s and (mono - job.created_mono) < (
                    self.faults.queue_delay_s * self.settings.time_scale
                ):
                    continue
                self._start_job(job, runner, mono)
            deadlines = [
                j.ends_at_real
                for j in self.jobs.values()
                if j.status == "in_progress" and j.ends_at_real is not None
            ]
            queued = any(j.status == "queued" for j in self.jobs.values())
            if deadlines:
                wait = max(0.0, min(deadlines) - mono)
                return min(wait, 0.05) if queued else wait
            return 0.05 if queued else None

    def _start_job(self, job: Job, runner: Runner, mono: float) -> None:
        run = self.runs[job.run_id]
        runner.busy_job = job.id
        job.status, job.started_at = "in_progress", self.now()
        job.runner_name, job.runner_id = runner.name, runner.id
        if self.faults.runner_lost_next > 0:
            self.faults.runner_lost_next -= 1
            job.fate = "runner_lost"
        elif self.faults.benchmark_fail_next > 0:
            self.faults.benchmark_fail_next -= 1
            job.fate = "benchmark_failure"
        result = self._result_for(job)
        seconds = perf.job_seconds(result)
        if job.fate == "runner_lost":
            seconds *= 0.5
        job.ends_at_real = mono + seconds * self.settings.time_scale
        if run.status == "queued":
            run.status, run.run_started_at, run.updated_at = "in_progress", self.now(), self.now()
            self._run_event(run, "in_progress")
        self._job_event(job, "in_progress")

    def _result_for(self, job: Job) -> dict[str, Any]:
        p = job.point
        attempt = sum(
            1 for j in self.jobs.values() if j.id < job.id and point_identity(j.point) == point_identity(p)
        )
        # A multi-node row runs its whole conc list on one engine; the simulated result is the
        # row's highest conc on its decode workers (one result per job, as the bot tracks them).
        conc = max(p["conc"]) if isinstance(p["conc"], list) else p["conc"]
        return perf.benchmark_result(self._perf_input(p, int(conc)), self.settings.seed, attempt)

    def _complete_job(self, job: Job) -> None:
        if job.fate == "runner_lost":
            self._finish_job(job, "failure", lost=True)
        elif job.fate == "benchmark_failure":
            self._finish_job(job, "failure")
        else:
            self._upload_artifacts(job, self._result_for(job))
            self._finish_job(job, "success")
        self._maybe_finish_run(self.runs[job.run_id])

    def _upload_logs(self, job: Job) -> None:
        """A failed job still uploads its logs and metrics (those steps run `if: always()`)."""
        self._upload_artifacts(job, None)

    def _upload_artifacts(self, job: Job, result: dict[str, Any] | None) -> None:
        """What one template job uploads (its `Upload ...` steps, sim.naming); no result: logs only.
        A multi-node row's throughput holds one result per concurrency of its list."""
        fingerprint = str(job.point.get("recipe-fingerprint") or "")
        if not fingerprint and self.recipe_suffix:
            fingerprint = hashlib.sha256(point_identity(job.point).encode()).hexdigest()
        rf = result_filename(job.point, str(job.runner_name), fingerprint)

        def result_at(conc: int) -> dict[str, Any]:
            if result is None or not isinstance(job.point.get("conc"), list):
                return result or {}
            return perf.benchmark_result(self._perf_input(job.point, conc), self.settings.seed, 0)

        made = naming.uploads(
            job.point, rf, None if result is None else result_at, lambda: self._eval_members(job)
        )
        for name, members in made.items():
            self._store_artifact(job.run_id, name, members)

    def _store_artifact(self, run_id: int, name: str, members: dict[str, str]) -> None:
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
            for member, text in members.items():
                zf.writestr(member, text)
        art = Artifact(self.next_id(), run_id, name, buf.getvalue(), self.now())
        self.artifacts[art.id] = art

    def _eval_members(self, job: Job) -> dict[str, str]:
        """The eval upload: `meta_env.json` and the harness's `results_<time>.json` (EVALS.md); a
        multi-node eval at several concs (`all-evals`) stages one `results_<time>_conc<N>.json` each."""
        p = job.point
        when = self.now()
        stamp = datetime.fromtimestamp(when, UTC).strftime("%Y-%m-%dT%H-%M-%S.%f")
        attempt = sum(
            1 for j in self.jobs.values() if j.id < job.id and point_identity(j.point) == point_identity(p)
        )
        concs = perf.eval_concs(p)
        members = {"meta_env.json": json.dumps(perf.meta_env(p, str(job.label)), indent=2)}
        for conc in concs:
            result = perf.eval_result(
                self._perf_input(p, conc),
                self.settings.seed,
                attempt,
                limit=self.eval_limit,
                accuracy=self.eval_accuracy.get(str(p.get("framework"))),
                date=when,
            )
            suffix = f"_conc{conc}" if len(concs) > 1 else ""
            members[f"results_{stamp}{suffix}.json"] = json.dumps(result, indent=2)
        return members

    def _perf_input(self, p: dict[str, Any], conc: int) -> perf.PerfInput:
        # A multi-node row: its decode workers' TP (one engine serves the whole conc list).
        tp = p["tp"] if "tp" in p else (p.get("decode") or {}).get("tp", 4)
        return perf.PerfInput(
            str(p.get("framework", "vllm")),
            int(conc),
            int(p.get("isl", 8192)),
            int(p.get("osl", 1024)),
            int(tp),
            str(p.get("model", "")),
            str(p.get("image", "")),
            self.image_slowdown(str(p.get("image", ""))),
        )

    # benchmark-tmpl.yml's steps of a fixed-seq-len throughput job, with the `if:` that runs each
    # (None: only on success so far; "always": `always()`; "never": an eval-only or agentic step).
    BENCH_STEPS: tuple[tuple[str, str | None], ...] = (
        ("Set up job", None),
        ("Resource cleanup (pre-run)", None),
        ("Run actions/checkout@9c091bb21b7c1c1d1991bb908d89e4e9dddfe3e0", None),
        ("Launch job script", None),
        ("Process result", None),
        ("Upload result", None),
        ("Upload agentic aggregated result", "never"),
        ("Upload agentic raw results", "never"),
        ("Upload server logs", "always"),
        ("Upload GPU metrics", "always"),
        ("Upload power audit bundle", "always"),
        ("Upload eval results (if any)", "never"),
        ("Verify eval scores", "never"),
        ("Cleanup eval outputs (post-upload)", "never"),
        ("Resource cleanup (post-run)", "always"),
        ("Post Run actions/checkout@9c091bb21b7c1c1d1991bb908d89e4e9dddfe3e0", "always"),
        ("Complete job", "always"),
    )

    def _finish_job(self, job: Job, conclusion: str, lost: bool = False) -> None:
        was_running = job.status == "in_progress"
        job.status, job.conclusion, job.completed_at = "completed", conclusion, self.now()
        job.ends_at_real = None
        started = job.started_at or job.completed_at
        steps: list[dict[str, Any]] = []
        launch = [n for n, _ in self.BENCH_STEPS].index("Launch job script")
        for number, (name, when) in enumerate(self.BENCH_STEPS, start=1):
            index = number - 1
            if not was_running or when == "never":
                state = "skipped"
            elif conclusion == "success" or index < launch:
                state = "success"
            elif index == launch:
                state = "cancelled" if lost or conclusion == "cancelled" else "failure"
            elif lost:
                state = "skipped"  # the runner is gone: not even `always()` steps ran
            else:
                state = "success" if when == "always" else "skipped"
            steps.append(
                {
                    "name": name,
                    "status": "completed",
                    "conclusion": state,
                    "number": number,
                    "started_at": iso(started),
                    "completed_at": iso(job.completed_at),
                }
            )
        job.steps = steps
        # What GitHub writes on the job's check run (GET /check-runs/{job id}/annotations).
        note = {
            "path": ".github",
            "blob_href": None,
            "start_line": 1,
            "end_line": 1,
            "start_column": None,
            "end_column": None,
            "annotation_level": "failure",
            "title": "",
            "raw_details": "",
        }
        if lost:
            job.annotations = [
                note
                | {
                    "message": f"The self-hosted runner: {job.runner_name} lost communication with the "
                    "server. "
                    "Verify the machine is running and has a healthy network connection. Anything in your "
                    "workflow that terminates the runner process, starves it for CPU/Memory, or blocks its "
                    "network access can cause this error."
                }
            ]
        elif conclusion == "failure":
            job.annotations = [note | {"message": "Process completed with exit code 1."}]
        elif conclusion == "cancelled" and was_running:
            job.annotations = [note | {"message": "The operation was canceled."}]
        if was_running and conclusion != "success" and not lost:
            self._upload_logs(job)
        for runners in self.runners.values():
            for r in runners:
                if r.busy_job == job.id:
                    r.busy_job = None
        self._job_event(job, "completed")

    def _maybe_finish_run(self, run: Run) -> None:
        if run.status == "completed":
            return
        jobs = [self.jobs[j] for j in run.jobs]
        if any(j.status != "completed" for j in jobs):
            return
        conclusions = {j.conclusion for j in jobs}
        if "cancelled" in conclusions:
            run.conclusion = "cancelled"
        elif "failure" in conclusions:
            run.conclusion = "failure"
        else:
            run.conclusion = "success"
        for name, members in collect.aggregates(run, jobs, self.artifacts.values()).items():
            self._store_artifact(run.id, name, members)
        run.status, run.updated_at = "completed", self.now()
        self._run_event(run, "completed")

    def _run_event(self, run: Run, action: str) -> None:
        self.emit(Event("workflow_run", action, self.repo(run.repo), run.actor, run))

    def _job_event(self, job: Job, action: str) -> None:
        run = self.runs[job.run_id]
        self.emit(Event("workflow_job", action, self.repo(run.repo), run.actor, job))
