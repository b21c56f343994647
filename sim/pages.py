"""Readable HTML pages for the simulated GitHub's objects: the pages the dashboard links to.

github.com serves a page at every ``html_url`` the REST API hands out (a pull request, its
files, a commit, an Actions run and job); the simulator does the same for its own world, so
every outbound link of the dashboard answers in simulator mode. Pure: each function reads a
``World`` (the caller holds its lock) and returns HTML; unknown objects raise ``SimError(404)``.
Every piece of user text (titles, bodies, comments, file contents) goes through Jinja2's
autoescaping, so nothing in the world can inject markup.
"""

from __future__ import annotations

import difflib
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jinja2 import Environment, FileSystemLoader, select_autoescape

from sim.world import SimError

if TYPE_CHECKING:
    from sim.world import Repo, World

MAX_DIFF_LINES = 2000  # per file: a page stays readable and bounded

TEMPLATES = Path(__file__).resolve().parent / "templates"
_env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(default=True))


def _when(ts: float | None) -> str:
    if not ts:
        return ""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _text(data: bytes | None) -> list[str]:
    if data is None:
        return []
    return data.decode("utf-8", errors="replace").splitlines()


def file_diffs(repo: Repo, base: str | None, head: str) -> list[dict[str, Any]]:
    """Per changed file: its path, status and unified-diff lines (base -> head)."""
    store = repo.objects
    before = store.flatten(store.commits[base].tree) if base else {}
    after = store.flatten(store.commits[head].tree)
    out: list[dict[str, Any]] = []
    for path in sorted(set(before) | set(after)):
        if before.get(path) == after.get(path):
            continue
        old = store.blobs.get(before[path][1]) if path in before else None
        new = store.blobs.get(after[path][1]) if path in after else None
        status = "added" if old is None else "removed" if new is None else "modified"
        lines: list[dict[str, str]] = []
        for line in difflib.unified_diff(_text(old), _text(new), lineterm="", n=3):
            if line.startswith(("---", "+++")):
                continue
            kind = (
                "hunk"
                if line.startswith("@@")
                else "add"
                if line[:1] == "+"
                else "del"
                if line[:1] == "-"
                else ""
            )
            lines.append({"kind": kind, "text": line})
        cut = max(0, len(lines) - MAX_DIFF_LINES)
        out.append({"path": path, "status": status, "lines": lines[:MAX_DIFF_LINES], "cut": cut})
    return out


def _repo(world: World, owner: str, name: str) -> Repo:
    return world.repo(f"{owner}/{name}")


def repo_page(world: World, owner: str, name: str) -> str:
    repo = _repo(world, owner, name)
    branches = sorted(
        (r.removeprefix("refs/heads/"), sha) for r, sha in repo.refs.items() if r.startswith("refs/heads/")
    )
    pulls = [repo.pulls[n] for n in sorted(repo.pulls)]
    return _env.get_template("repo.html").render(
        title=repo.full_name, repo=repo.full_name, branches=branches, pulls=pulls
    )


def _pull(world: World, repo: Repo, number: int) -> Any:
    pull = repo.pulls.get(number)
    if pull is None:
        raise SimError(404, f"no pull request #{number} in {repo.full_name}")
    return pull


def _pull_range(world: World, repo: Repo, pull: Any) -> tuple[str | None, str]:
    head = world.pull_head_sha(pull)
    base_tip = world.pull_base_sha(pull)
    if head not in repo.objects.commits:
        raise SimError(404, f"the head of #{pull.number} is not in {repo.full_name}")
    base = repo.objects.merge_base(base_tip, head) if base_tip in repo.objects.commits else None
    return base, head


def pull_page(world: World, owner: str, name: str, number: int) -> str:
    repo = _repo(world, owner, name)
    pull = _pull(world, repo, number)
    base, head = _pull_range(world, repo, pull)
    shas = repo.objects.commits_between(base, head) if base else [head]
    commits = [
        {
            "sha": s,
            "subject": repo.objects.commits[s].message.splitlines()[0]
            if repo.objects.commits[s].message
            else "",
        }
        for s in shas
    ]
    comments = [
        {"id": c.id, "user": c.user, "body": c.body, "at": _when(c.created_at)}
        for c in sorted(repo.comments.values(), key=lambda c: c.id)
        if c.issue_number == number
    ]
    state = "merged" if pull.merged else pull.state
    return _env.get_template("pull.html").render(
        title=f"{pull.title} #{number}",
        repo=repo.full_name,
        pull=pull,
        state=state,
        commits=commits,
        comments=comments,
    )


def pull_files_page(world: World, owner: str, name: str, number: int) -> str:
    repo = _repo(world, owner, name)
    pull = _pull(world, repo, number)
    base, head = _pull_range(world, repo, pull)
    return _env.get_template("files.html").render(
        title=f"Files changed · #{number}",
        repo=repo.full_name,
        pull=pull,
        base=base or "",
        head=head,
        files=file_diffs(repo, base, head),
    )


def commit_page(world: World, owner: str, name: str, ref: str) -> str:
    repo = _repo(world, owner, name)
    matches = [sha for sha in repo.objects.commits if sha.startswith(ref)] if len(ref) >= 4 else []
    if len(matches) != 1:
        raise SimError(404, f"no commit {ref!r} in {repo.full_name}")
    sha = matches[0]
    commit = repo.objects.commits[sha]
    parent = commit.parents[0] if commit.parents else None
    return _env.get_template("commit.html").render(
        title=f"commit {sha[:7]}",
        repo=repo.full_name,
        sha=sha,
        subject=(commit.message.splitlines() or [""])[0],
        message=commit.message,
        author=commit.author.name,
        at=_when(commit.author.date),
        parents=list(commit.parents),
        files=file_diffs(repo, parent, sha),
    )


def _run(world: World, repo: Repo, run_id: int) -> Any:
    run = world.runs.get(run_id)
    if run is None or run.repo != repo.full_name:
        raise SimError(404, f"no workflow run {run_id} in {repo.full_name}")
    return run


def run_page(world: World, owner: str, name: str, run_id: int) -> str:
    repo = _repo(world, owner, name)
    run = _run(world, repo, run_id)
    jobs = [world.jobs[j] for j in run.jobs if j in world.jobs]
    artifacts = [
        {"id": a.id, "name": a.name, "size": len(a.data)}
        for a in world.artifacts.values()
        if a.run_id == run_id
    ]
    return _env.get_template("run.html").render(
        title=f"{run.name} · run {run_id}",
        repo=repo.full_name,
        run=run,
        inputs=sorted((str(k), str(v)) for k, v in (run.inputs or {}).items()),
        jobs=jobs,
        artifacts=artifacts,
    )


def job_page(world: World, owner: str, name: str, run_id: int, job_id: int) -> str:
    repo = _repo(world, owner, name)
    _run(world, repo, run_id)
    job = world.jobs.get(job_id)
    if job is None or job.run_id != run_id:
        raise SimError(404, f"no job {job_id} in run {run_id}")
    return _env.get_template("job.html").render(
        title=job.name,
        repo=repo.full_name,
        job=job,
        point=sorted((str(k), str(v)) for k, v in job.point.items()),
    )
