"""run-sweep.yml's reuse gate on a push to main, as the simulator plays it (its own code, no app).

The benchmark repo's setup job runs ``utils/find_reusable_sweep_run.py`` on a push to main. The
rules played here are the ones its workflows README and the finder's documented requests state:
the merge commit maps to exactly one PR (``/commits/{sha}/pulls``); the latest comment by an
OWNER, MEMBER or COLLABORATOR with a line ``/reuse-sweep-run [id]`` authorizes (its last such
line); the PR has a full-sweep label and is merged; the source is the pinned run, or the latest
successful ``pull_request`` run of run-sweep.yml whose head is still in the PR's commits; it must be
a completed ``pull_request`` run of ``.github/workflows/run-sweep.yml`` whose head is among the PR's
commits (a recovery PR carries another PR's run that way), with a
``results_bmk`` or ``eval_results_all`` artifact. Authorized but unfit raises ``GateError`` (the
setup job fails: reuse fails closed).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from sim.models import Run

PATH = ".github/workflows/run-sweep.yml"
FULL = (
    "full-sweep-enabled",
    "non-canary-full-sweep-enabled",
    "full-sweep-fail-fast",
    "full-sweep-fail-fast-no-canary",
)
UNFIT = ("evals-only", "agentx-fast")
AGGREGATES = ("results_bmk", "eval_results_all")
MAINTAINERS = ("OWNER", "MEMBER", "COLLABORATOR")
_CMD = re.compile(r"(?m)^\s*/reuse-sweep-run(?:\s+(\d+))?\s*$")


class GateError(RuntimeError):
    """Reuse is authorized but not possible: the setup job fails."""


@dataclass(frozen=True)
class Gate:
    enabled: bool
    reason: str
    source_run_id: int | None = None
    pr_number: int | None = None


def _authorized(world: Any, repo: Any, number: int) -> tuple[bool, int | None]:
    comments = sorted(
        (c for c in repo.comments.values() if c.issue_number == number), key=lambda c: (c.created_at, c.id)
    )
    for c in reversed(comments):
        if world.author_association(repo.full_name, c.user) not in MAINTAINERS:
            continue
        found = _CMD.findall(c.body)
        if found:
            return True, int(found[-1]) if found[-1] else None
    return False, None


def _has_aggregate(world: Any, run: Run) -> bool:
    return any(a.run_id == run.id and a.name in AGGREGATES for a in world.artifacts.values())


def _check(world: Any, run: Run, number: int, commits: set[str]) -> None:
    wf = world.repo(run.repo).workflows.get("run-sweep.yml")
    if run.event != "pull_request":
        raise GateError(f"Reusable source run {run.id} is not a pull_request run.")
    if run.status != "completed":
        raise GateError(f"Reusable source run {run.id} has not completed.")
    if wf is None or run.workflow_id != wf.id:
        raise GateError(f"Reusable source run {run.id} is not from {PATH}.")
    if run.head_sha not in commits:
        raise GateError(f"Reusable source run {run.id}'s head is not in PR #{number}'s commits.")
    if not _has_aggregate(world, run):
        raise GateError(f"Reusable source run {run.id} has no results_bmk or eval_results_all artifact.")


def gate(world: Any, full_name: str, sha: str) -> Gate:
    """What the push-to-main run's reuse gate decides for the pushed commit ``sha``."""
    repo = world.repo(full_name)
    pulls = world.pulls_with_commit(full_name, sha)
    if not pulls:
        return Gate(False, "no associated pull request")
    if len(pulls) > 1:
        if any(_authorized(world, repo, p.number)[0] for p in pulls):
            raise GateError(f"Commit {sha} maps to multiple PRs; refusing to reuse artifacts.")
        return Gate(False, "multiple associated pull requests")
    pr = pulls[0]
    ok, pinned = _authorized(world, repo, pr.number)
    if not ok:
        return Gate(False, f"PR #{pr.number} has no /reuse-sweep-run authorization", pr_number=pr.number)
    if not any(lb in pr.labels for lb in FULL) or any(lb in pr.labels for lb in UNFIT):
        raise GateError(
            f"PR #{pr.number} has /reuse-sweep-run authorization but no reusable full-sweep label."
        )
    if not pr.merged:
        raise GateError(f"PR #{pr.number} is not marked as merged.")
    commits = set(world.pull_commits(full_name, pr.number))
    wf = repo.workflows.get("run-sweep.yml")
    if pinned is not None:
        run = world.runs.get(pinned)
        if run is None or run.repo != full_name:
            raise GateError(f"Reusable source run {pinned} does not exist.")
    else:
        candidates = [
            r
            for r in world.runs.values()
            if wf is not None
            and r.workflow_id == wf.id
            and r.event == "pull_request"
            and r.conclusion == "success"
            and r.head_sha in commits
        ]
        if not candidates:
            raise GateError(f"PR #{pr.number} is authorized but no successful run-sweep.yml run remains.")
        run = max(candidates, key=lambda r: r.id)
    _check(world, run, pr.number, commits)
    return Gate(
        True, f"PR #{pr.number} approved reusable full sweep", source_run_id=run.id, pr_number=pr.number
    )


def reuse_skips(world: Any, repo: Any, pr: Any) -> bool:
    """run-sweep.yml's `reuse-sweep-gate` on a PR's later push (synchronize): with a reusable
    full-sweep label and a maintainer's authorization the PR's sweep is skipped."""
    labels = set(pr.labels)
    if not labels & set(FULL) or labels & set(UNFIT):
        return False
    return _authorized(world, repo, pr.number)[0]
