"""GitHub Actions: workflows, dispatch, runs and their jobs, cancellation."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from sim.getjobs import MatrixFailure, matrix_failures
from sim.models import Job, Run, SimError, Workflow, iso
from sim.runs import dispatch_error, e2e_jobs, evaluate_title, read_workflow
from sim.world_fleet import Fleet


class Actions(Fleet):
    def add_workflow(self, full_name: str, path: str, name: str) -> Workflow:
        with self.lock:
            repo = self.repo(full_name)
            wf = repo.workflows.get(path.rsplit("/", 1)[-1])
            if wf is None:
                wf = Workflow(self.next_id(), path, name)
                repo.workflows[path.rsplit("/", 1)[-1]] = wf
            return wf

    def workflow(self, full_name: str, workflow_id: str) -> Workflow:
        repo = self.repo(full_name)
        if workflow_id in repo.workflows:
            return repo.workflows[workflow_id]
        for wf in repo.workflows.values():
            if str(wf.id) == workflow_id:
                return wf
        raise SimError(404, "Not Found")

    def dispatch(self, full_name: str, workflow_id: str, ref: str, inputs: dict[str, Any], actor: str) -> Run:
        with self.lock:
            repo = self.repo(full_name)
            wf = self.workflow(full_name, workflow_id)
            try:
                sha = self.resolve(repo, ref)
            except SimError as exc:
                raise SimError(422, f"No ref found for: {ref}") from exc
            for k, v in inputs.items():
                if not isinstance(v, str | bool | int | float):
                    raise SimError(422, f"input {k!r} must be a scalar")
            # GitHub reads the workflow file at the dispatched ref and refuses what it does not declare.
            text = self.read_file(full_name, wf.path, sha)
            if text is None:
                raise SimError(404, "Not Found")
            spec = read_workflow(text.decode())
            problem = dispatch_error(spec, inputs)
            if problem is not None:
                raise SimError(422, problem)
            branch = ref[len("refs/heads/") :] if ref.startswith("refs/heads/") else ref
            self._run_numbers[full_name] += 1
            now = self.now()
            str_inputs = {k: (str(v).lower() if isinstance(v, bool) else str(v)) for k, v in inputs.items()}
            context = {"inputs": str_inputs, "github": {"event": {"inputs": str_inputs}}}
            name = evaluate_title(spec.run_name, spec.name or wf.name, context)
            run = Run(
                self.next_id(),
                full_name,
                wf.id,
                name,
                branch,
                sha,
                actor,
                dict(inputs),
                now,
                now,
                self._run_numbers[full_name],
            )
            self.runs[run.id] = run
            self._run_event(run, "requested")
            self._plan_jobs(run, matrix_failures(text.decode(), wf.path))
            self._wake()
            return run

    def _plan_jobs(self, run: Run, failures: Sequence[MatrixFailure] = ()) -> None:
        unexpanded = {f.caller for f in failures}
        self._fan_out(run, lambda: e2e_jobs(self, run, unexpanded), failures=failures)

    def _fan_out(
        self,
        run: Run,
        plan: Callable[[], list[tuple[str, dict[str, Any]]]],
        *,
        empty_ok: bool = False,
        failures: Sequence[MatrixFailure] = (),
    ) -> None:
        """The setup job plans the matrix (`plan`: each job's name and point), then one queued job
        per entry, and one failed job per matrix GitHub cannot evaluate (``failures``). A planning
        error fails the run, as the matrix job would; so does an empty matrix of a dispatch
        (`empty_ok`: a run-sweep.yml run with nothing to sweep just succeeds)."""
        try:
            planned = plan()
        except Exception as exc:  # a bad command or config fails the setup job
            run.error = str(exc)
            self._add_setup_job(run, ok=False)
            self._conclude(run, "failure")
            return
        self._add_setup_job(run, ok=True)
        for index, (name, p) in enumerate(planned):
            self._queue_job(run, name, p, index)
        for failure in failures:
            self._add_unexpanded_job(run, failure)
        if not planned:
            if not empty_ok and not failures:
                run.error = "the command matched no points"
            self._conclude(run, "success" if empty_ok and not failures else "failure")

    def _queue_job(self, run: Run, name: str, point: dict[str, Any], index: int) -> Job:
        """A matrix job queued with the runner labels the templates give it (``index``: its place
        in the run's matrix, which the queue token is derived from)."""
        job = Job(self.next_id(), run.id, name, point["runner"], point, self.now())
        job.labels = self.contract_labels(run, point, index)
        self.jobs[job.id] = job
        run.jobs.append(job.id)
        self._job_event(job, "queued")
        return job

    def _add_unexpanded_job(self, run: Run, failure: MatrixFailure) -> None:
        """A matrix job whose `strategy` did not evaluate: GitHub fails it once its `needs` are done
        (get-jobs, here at once), before any runner: named by its `name:`, no steps, no runner, no
        labels, its reason only in its check run's annotation (sim/getjobs.py says more). No
        workflow_job event is sent for it, as none is for get-jobs: the bot reads it from the run."""
        now = self.now()
        job = Job(self.next_id(), run.id, failure.caller, "", {}, now)
        job.status, job.conclusion, job.started_at, job.completed_at = "completed", "failure", now, now
        job.annotations = [
            {
                "path": ".github",
                "blob_href": None,
                "start_line": 1,
                "end_line": 1,
                "start_column": None,
                "end_column": None,
                "annotation_level": "failure",
                "title": "",
                "raw_details": "",
                "message": failure.message,
            }
        ]
        self.jobs[job.id] = job
        run.jobs.append(job.id)

    def _conclude(self, run: Run, conclusion: str) -> None:
        run.status, run.conclusion, run.updated_at = "completed", conclusion, self.now()
        self._run_event(run, "completed")

    def _add_setup_job(self, run: Run, *, ok: bool) -> None:
        """e2e-tests.yml's `get-jobs` (ubuntu-latest, no runner of ours): done by the time jobs exist."""
        now = self.now()
        job = Job(self.next_id(), run.id, "get-jobs", "ubuntu-latest", {}, now)
        job.status, job.conclusion, job.started_at, job.completed_at = (
            "completed",
            "success" if ok else "failure",
            now,
            now,
        )
        job.runner_name = "GitHub Actions 1"
        job.steps = [
            {
                "name": n,
                "status": "completed",
                "conclusion": c,
                "number": i,
                "started_at": iso(now),
                "completed_at": iso(now),
            }
            for i, (n, c) in enumerate(
                [
                    ("Set up job", "success"),
                    ("Run get-jobs", "success" if ok else "failure"),
                    ("Complete job", "success"),
                ],
                start=1,
            )
        ]
        if not ok:
            job.annotations = [
                {
                    "path": ".github",
                    "start_line": 1,
                    "end_line": 1,
                    "annotation_level": "failure",
                    "title": "",
                    "raw_details": "",
                    "message": "Process completed with exit code 2.",
                }
            ]
        self.jobs[job.id] = job
        run.jobs.append(job.id)

    def cancel_run(self, run_id: int) -> Run:
        with self.lock:
            run = self.runs.get(run_id)
            if run is None:
                raise SimError(404, "Not Found")
            if run.status == "completed":
                raise SimError(409, "Cannot cancel a workflow run that is completed.")
            for jid in run.jobs:
                job = self.jobs[jid]
                if job.status != "completed":
                    self._finish_job(job, "cancelled")
            self._maybe_finish_run(run)
            self._wake()
            return run
