"""GitHub Actions: dispatching workflows, their runs, jobs, check-run annotations and artifacts."""

from __future__ import annotations

import threading
from typing import Any

import httpx

from app.adapters.github.base import GatewayBase, quote_segment
from app.adapters.github.errors import Conflict, Forbidden, GitHubError, NotFound
from app.core.routing import TransientError

MAX_ARTIFACT_BYTES = 64 * 1024 * 1024

_download_lock = threading.Lock()
_downloads: httpx.Client | None = None


def _download_client() -> httpx.Client:
    """One client for artifact archives per process: a fresh one per download loaded the CA bundle
    each time (~0.1 s of CPU per artifact). No token is ever set on it (the URL is pre-signed)."""
    global _downloads
    with _download_lock:
        if _downloads is None:
            _downloads = httpx.Client(timeout=60, follow_redirects=True)
        return _downloads


class ActionsGateway(GatewayBase):
    """The benchmark jobs' side of GitHub: workflow runs the bot starts, watches and collects."""

    def dispatch_workflow(
        self, repo: str, workflow: str, ref: str, inputs: dict[str, str]
    ) -> dict[str, Any] | None:
        """Dispatch and return ``{workflow_run_id, run_url, html_url}`` when the server tells it."""
        data = self._write(
            "actions/create-workflow-dispatch",
            "POST",
            f"/repos/{repo}/actions/workflows/{quote_segment(workflow)}/dispatches",
            {"ref": ref, "inputs": inputs, "return_run_details": True},
            target=f"{repo}:{workflow}",
        )
        return data if isinstance(data, dict) and data.get("workflow_run_id") else None

    def list_workflow_runs(
        self, repo: str, workflow: str | None = None, **params: Any
    ) -> list[dict[str, Any]]:
        path = (
            f"/repos/{repo}/actions/workflows/{quote_segment(workflow)}/runs"
            if workflow
            else f"/repos/{repo}/actions/runs"
        )
        op = "actions/list-workflow-runs" if workflow else "actions/list-workflow-runs-for-repo"
        return list(
            self._paginate(op, path, params, key="workflow_runs", limit=int(params.pop("limit", 300)))
        )

    def get_run(self, repo: str, run_id: int) -> dict[str, Any]:
        return self._get("actions/get-workflow-run", f"/repos/{repo}/actions/runs/{run_id}")

    def list_run_jobs(self, repo: str, run_id: int) -> list[dict[str, Any]]:
        return list(
            self._paginate(
                "actions/list-jobs-for-workflow-run", f"/repos/{repo}/actions/runs/{run_id}/jobs", key="jobs"
            )
        )

    def list_check_run_annotations(self, repo: str, check_run_id: int) -> list[dict[str, Any]]:
        """A check run's annotations; a workflow job's check run has the job's id."""
        return list(
            self._paginate(
                "checks/list-annotations",
                f"/repos/{repo}/check-runs/{check_run_id}/annotations",
                limit=200,
            )
        )

    def cancel_run(self, repo: str, run_id: int) -> None:
        """Ask GitHub to cancel a run. A 409 (it already finished) is the state we wanted; a 403
        ("Must have admin rights to Repository.", as GitHub really answers a token that may not)
        is raised as ``Forbidden`` naming the run and the missing permission: not a cancel, and
        not worth retrying."""
        try:
            self._write(
                "actions/cancel-workflow-run",
                "POST",
                f"/repos/{repo}/actions/runs/{run_id}/cancel",
                target=f"{repo} run {run_id}",
            )
        except Conflict:
            return
        except Forbidden as exc:
            message = exc.data.get("message") if isinstance(exc.data, dict) else None
            raise Forbidden(
                exc.status,
                f"actions/cancel-workflow-run: run {run_id} of {repo} was not cancelled "
                f"({message or 'forbidden'}): the bot's credentials need write access to Actions there",
                exc.data,
            ) from exc

    def list_run_artifacts(self, repo: str, run_id: int) -> list[dict[str, Any]]:
        return list(
            self._paginate(
                "actions/list-workflow-run-artifacts",
                f"/repos/{repo}/actions/runs/{run_id}/artifacts",
                key="artifacts",
            )
        )

    def download_artifact(self, repo: str, artifact_id: int, max_bytes: int = MAX_ARTIFACT_BYTES) -> bytes:
        """The artifact's zip, refusing anything larger than ``max_bytes`` before reading it whole."""
        # PyGithub's requestJson does not follow redirects, which is what we want: the archive URL
        # is short-lived and must be fetched without our token. ``_call`` classifies errors (a
        # dropped connection is transient, like every other GitHub call).
        path = f"/repos/{repo}/actions/artifacts/{artifact_id}/zip"
        status, headers, _ = self._call("actions/download-artifact", "GET", path)
        location = {k.lower(): v for k, v in headers.items()}.get("location")
        if status != 302 or not location:
            raise GitHubError(status, f"artifact {artifact_id}: expected a redirect to the archive")
        try:
            with _download_client().stream("GET", location) as resp:
                if resp.status_code >= 400:
                    if resp.status_code >= 500:
                        raise TransientError(f"artifact {artifact_id}: download answered {resp.status_code}")
                    raise GitHubError(resp.status_code, f"artifact {artifact_id}: download refused")
                declared = int(resp.headers.get("content-length") or 0)
                if declared > max_bytes:
                    raise GitHubError(
                        413, f"artifact {artifact_id} is {declared} bytes, over the {max_bytes} cap"
                    )
                chunks: list[bytes] = []
                total = 0
                for chunk in resp.iter_bytes():
                    total += len(chunk)
                    if total > max_bytes:
                        raise GitHubError(413, f"artifact {artifact_id} is over the {max_bytes}-byte cap")
                    chunks.append(chunk)
        except httpx.TransportError as exc:  # connection reset, timeout mid-download
            raise TransientError(
                f"artifact {artifact_id}: download failed: {exc.__class__.__name__}: {exc}"
            ) from exc
        return b"".join(chunks)


def _runners_base(repo: str) -> str:
    """``owner/name`` -> the repository's runners; ``org:NAME`` -> the organisation's."""
    if repo.startswith("org:"):
        return f"/orgs/{quote_segment(repo[4:])}/actions/runners"
    return f"/repos/{repo}/actions/runners"


def _scope(repo: str) -> str:
    return "org" if repo.startswith("org:") else "repo"


def _label_names(data: Any) -> list[str]:
    labels = data.get("labels") if isinstance(data, dict) else None
    return [x["name"] for x in labels or [] if isinstance(x, dict) and isinstance(x.get("name"), str)]


class RunnersGateway(GatewayBase):
    """Self-hosted runners and their custom labels (the priority controller's effects), and the
    repository variable that says whether the label contract is on. ``repo`` is ``owner/name``,
    or ``org:NAME`` for the organisation's runners."""

    def list_runners(self, repo: str) -> list[dict[str, Any]]:
        """Every runner: ``{id, name, status, busy, labels: [names]}``."""
        scope = _scope(repo)
        rows = self._paginate(
            f"actions/list-self-hosted-runners-for-{scope}", _runners_base(repo), key="runners", limit=5000
        )
        return [{**r, "labels": _label_names(r)} for r in rows]

    def get_runner(self, repo: str, runner_id: int) -> dict[str, Any]:
        data = self._get(
            f"actions/get-self-hosted-runner-for-{_scope(repo)}", f"{_runners_base(repo)}/{runner_id}"
        )
        return {**data, "labels": _label_names(data)}

    def add_runner_labels(self, repo: str, runner_id: int, labels: list[str]) -> list[str]:
        """Add custom labels; GitHub answers the runner's labels after the change (returned)."""
        data = self._write(
            f"actions/add-custom-labels-to-self-hosted-runner-for-{_scope(repo)}",
            "POST",
            f"{_runners_base(repo)}/{runner_id}/labels",
            {"labels": labels},
            target=f"{repo} runner {runner_id}",
        )
        return _label_names(data)

    def remove_runner_label(self, repo: str, runner_id: int, name: str) -> list[str] | None:
        """Remove one custom label; ``None`` when the runner no longer had it (the state we wanted)."""
        try:
            data = self._write(
                f"actions/remove-custom-label-from-self-hosted-runner-for-{_scope(repo)}",
                "DELETE",
                f"{_runners_base(repo)}/{runner_id}/labels/{quote_segment(name)}",
                target=f"{repo} runner {runner_id}",
            )
        except NotFound:
            return None
        return _label_names(data)

    def get_repo_variable(self, repo: str, name: str) -> str | None:
        """An Actions variable's value; ``None`` when the repository has no such variable."""
        try:
            data = self._get(
                "actions/get-repo-variable", f"/repos/{repo}/actions/variables/{quote_segment(name)}"
            )
        except NotFound:
            return None
        value = data.get("value") if isinstance(data, dict) else None
        return value if isinstance(value, str) else None

    def queued_jobs(self, repo: str) -> list[dict[str, Any]] | None:
        """The fallback for missed ``workflow_job`` deliveries: the queued runs (a conditional
        listing: ``None`` when GitHub answers 304, nothing changed, no rate limit spent), then each
        one's latest jobs that are queued, with their ``labels``."""
        got = self.get_conditional(
            "actions/list-workflow-runs-for-repo",
            f"/repos/{repo}/actions/runs",
            {"status": "queued", "per_page": 100},
        )
        if not got.changed:
            return None
        runs = got.data.get("workflow_runs", []) if isinstance(got.data, dict) else []
        out: list[dict[str, Any]] = []
        for run in runs[:100]:
            jobs = self._paginate(
                "actions/list-jobs-for-workflow-run",
                f"/repos/{repo}/actions/runs/{int(run['id'])}/jobs",
                {"filter": "latest"},
                key="jobs",
            )
            out += [j for j in jobs if j.get("status") == "queued"]
        return out
