"""A small in-memory stand-in for the GitHub gateway methods the scheduler calls."""

from __future__ import annotations

import itertools
import json
import threading
from typing import Any

from tests.conftest import FIXTURES

REPO = "SemiAnalysisAI/InferenceX"
KEY = "minimaxm3-fp4-mi355x-vllm"
SHA1 = "a" * 40
SHA2 = "b" * 40


def bench_files() -> dict[str, str]:
    return {
        ".github/configs/amd-master.yaml": (FIXTURES / "inferencex" / "amd-master.f8f9b66.yaml").read_text(),
        ".github/configs/runners.yaml": (FIXTURES / "inferencex" / "runners.yaml").read_text(),
        # the real workflow: dispatches are checked against its declared inputs
        ".github/workflows/e2e-tests.yml": (
            FIXTURES / "inferencex" / "workflows" / "e2e-tests.yml"
        ).read_text(),
    }


class FakeGateway:
    def __init__(self, *, fork: bool = False, return_details: bool = True) -> None:
        self.files = bench_files()
        self.head_sha = SHA1
        self.fork = fork
        self.return_details = return_details
        self.perms = {"maint": "maintain", "outsider": "read"}
        self.runs: dict[int, dict[str, Any]] = {}
        self.run_jobs: dict[int, list[dict[str, Any]]] = {}
        self.annotations: dict[int, list[dict[str, Any]]] = {}
        self.dispatches: list[dict[str, Any]] = []
        self.cancelled: list[int] = []
        self._ids = itertools.count(1000)
        self.lock = threading.Lock()
        self.run_reads = 0
        self.listings: list[tuple[str, str, dict[str, Any], bool]] = []
        self._etags: dict[str, str] = {}

    def get_pull(self, repo: str, number: int) -> dict[str, Any]:
        head_repo = "someone/InferenceX" if self.fork else repo
        return {
            "number": number,
            "state": "open",
            "head": {"sha": self.head_sha, "ref": "recipe-branch", "repo": {"full_name": head_repo}},
            "base": {"ref": "main", "repo": {"full_name": repo}},
        }

    def get_repo(self, repo: str) -> dict[str, Any]:
        return {"full_name": repo, "default_branch": "main"}

    def list_dir(self, repo: str, path: str, ref: str | None = None) -> list[dict[str, Any]]:
        return [
            {"type": "file", "path": p, "name": p.rsplit("/", 1)[-1]}
            for p in self.files
            if p.rsplit("/", 1)[0] == path
        ]

    def get_file(self, repo: str, path: str, ref: str | None = None) -> tuple[str, str] | None:
        text = self.files.get(path)
        return None if text is None else (text, "blobsha")

    def dispatch_workflow(
        self, repo: str, workflow: str, ref: str, inputs: dict[str, str]
    ) -> dict[str, Any] | None:
        with self.lock:
            run_id = next(self._ids)
            run = {
                "id": run_id,
                "name": "End-to-End Tests",
                # e2e-tests.yml's run-name: `e2e Test - ${{ inputs.test-name || ... }}`
                "display_title": f"e2e Test - {inputs['test-name']}",
                "status": "queued",
                "conclusion": None,
                "html_url": f"https://github.test/{repo}/actions/runs/{run_id}",
            }
            self.runs[run_id] = run
            self.dispatches.append(
                {"workflow": workflow, "ref": ref, "inputs": dict(inputs), "run_id": run_id}
            )
        if not self.return_details:
            return None
        return {"workflow_run_id": run_id, "run_url": f"api/{run_id}", "html_url": run["html_url"]}

    def list_workflow_runs(
        self, repo: str, workflow: str | None = None, **params: Any
    ) -> list[dict[str, Any]]:
        with self.lock:
            return [dict(r) for r in self.runs.values()]

    def get_run(self, repo: str, run_id: int) -> dict[str, Any]:
        self.run_reads += 1
        return dict(self.runs[run_id])

    def get_conditional(self, op: str, path: str, params: dict[str, Any] | None = None) -> Any:
        """The runs listing (the repair poll's one read), 304-like when nothing changed since."""
        from app.adapters.github.base import Conditional

        with self.lock:
            runs = sorted((dict(r) for r in self.runs.values()), key=lambda r: -int(r["id"]))
        body = {"total_count": len(runs), "workflow_runs": runs}
        etag = json.dumps(body, sort_keys=True)
        key = f"{path}?{sorted((params or {}).items())}"
        changed = self._etags.get(key) != etag
        self._etags[key] = etag
        self.listings.append((op, path, dict(params or {}), changed))
        return Conditional(body, changed, str(hash(etag)))

    def list_run_jobs(self, repo: str, run_id: int) -> list[dict[str, Any]]:
        return list(self.run_jobs.get(run_id, []))

    def list_check_run_annotations(self, repo: str, check_run_id: int) -> list[dict[str, Any]]:
        return list(self.annotations.get(check_run_id, []))

    def cancel_run(self, repo: str, run_id: int) -> None:
        with self.lock:
            self.cancelled.append(run_id)
            run = self.runs[run_id]
            if run["status"] != "completed":
                run["status"], run["conclusion"] = "completed", "cancelled"

    def permission(self, repo: str, username: str) -> str:
        return self.perms.get(username, "none")
