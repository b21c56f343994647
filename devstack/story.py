"""The seed story's expected effects, read from the simulated GitHub and the bot's database.

Shared by ``sweepbot demo --until-done``, the end-to-end test and ``bench/story.py``, so the three
agree on what "the story happened, once" means:

1. one status comment on the recipe PR (listing each dependency's fate);
2. one bot commit on the recipe branch: exactly the key's ``image:`` line, pinned to the newest
   nightly containing the remaining merge commits, plus one appended perf-changelog entry;
3. one sweep with one job per point of the key's 8k1k search space, never more in flight on a
   label than its runners;
4. one report comment with the gap against the ATOM table at every conc it publishes;
5. an audit entry for every command and every write the bot made to GitHub.
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

import yaml
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.recipes import expand_points, parse_master
from app.models import AuditEntry
from app.models.nightly import CanaryState, NightlyCanary, NightlyRegression, RegressionState
from app.models.results import Result
from app.models.sweeps import Sweep, SweepJob
from sim.naming import is_agentic, point_identity
from sim.scenario import SEED_KEY

STATUS_MARKER = "<!-- sweepbot:status -->"
REPORT_MARKER_PREFIX = "<!-- sweepbot:report"
ATOM_CONCS = (4, 8, 16, 32, 64)


@dataclass
class Check:
    name: str
    ok: bool
    detail: str


@dataclass
class StoryReport:
    checks: list[Check] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return bool(self.checks) and all(c.ok for c in self.checks)

    def add(self, name: str, ok: bool, detail: str) -> None:
        self.checks.append(Check(name, bool(ok), detail))

    def as_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "checks": [asdict(c) for c in self.checks], **self.summary}


def bot_comments(world: Any, repo: str, number: int, marker: str) -> list[Any]:
    with world.lock:
        comments = list(world.repo(repo).comments.values())
    return [c for c in comments if c.issue_number == number and marker in c.body]


def expected_tag(scenario: Any) -> str | None:
    """The newest nightly containing every remaining dependency when the bump became possible."""
    wanted = "nightly-after-47269" if scenario.variant == "seed" else "nightly-contains-both"
    for entry in scenario.history:
        if entry["step"] == wanted:
            return str(entry["result"]["tag"])
    return None


def _commits_since(world: Any, repo_name: str, base: str, branch: str) -> list[tuple[str, Any]]:
    with world.lock:
        repo = world.repo(repo_name)
        head = repo.refs.get(f"refs/heads/{branch}")
        if head is None:
            return []
        shas = repo.objects.commits_between(base, head)
        return [(sha, repo.objects.commits[sha]) for sha in shas]


def _file_at(world: Any, repo_name: str, sha: str, path: str) -> str:
    data = world.read_file(repo_name, path, sha)
    return data.decode() if data is not None else ""


def _flatten(world: Any, repo_name: str, sha: str) -> dict[str, Any]:
    with world.lock:
        repo = world.repo(repo_name)
        return dict(repo.objects.flatten(repo.objects.commits[sha].tree))


def changed_lines(old: str, new: str) -> tuple[list[str], list[str]]:
    removed, added = [], []
    for line in difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=0):
        if line.startswith("---") or line.startswith("+++") or line.startswith("@@"):
            continue
        if line.startswith("-"):
            removed.append(line[1:])
        elif line.startswith("+"):
            added.append(line[1:])
    return removed, added


def peak_in_flight(world: Any, label: str) -> int:
    with world.lock:
        spans = [
            (j.started_at, j.completed_at or float("inf"))
            for j in world.jobs.values()
            if j.label == label and j.started_at is not None
        ]
    events = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans], key=lambda x: (x[0], x[1]))
    peak = level = 0
    for _, delta in events:
        level += delta
        peak = max(peak, level)
    return peak


def report_table(body: str) -> list[str]:
    """The gap table (``conc | vLLM | ATOM ref | gap | verdict``) of a report comment."""
    return _table(body, "| conc |", "| gap |")


def accuracy_table(body: str) -> list[str]:
    """The accuracy table (``task | filter | conc | vLLM (± stderr, n) | ...``) of a report comment."""
    return _table(body, "| task | filter |", "| diff |")


def _table(body: str, starts: str, holds: str) -> list[str]:
    lines = body.splitlines()
    for i, line in enumerate(lines):
        if line.startswith(starts) and holds in line:
            table = []
            for row in lines[i:]:
                if not row.startswith("|"):
                    break
                table.append(row)
            return table
    return []


@dataclass(frozen=True)
class _Story:
    """Where the seed story happens: the sim, the recipe PR and its key."""

    world: Any
    repo: str
    pr: int
    key: str
    branch: str
    master_path: str
    bot_login: str

    @classmethod
    def of(cls, world: Any, scenario: Any) -> _Story:
        facts = scenario.facts
        return cls(
            world=world,
            repo=facts["bench_repo"],
            pr=facts["recipe_pr"],
            key=facts["config_key"],
            branch=facts["recipe_branch"],
            master_path=facts["master_path"],
            bot_login=world.settings.default_token_user,
        )


def observe(
    world: Any,
    scenario: Any,
    session: Session,
    *,
    recipe_base_sha: str,
    changelog_path: str = "perf-changelog.yaml",
) -> StoryReport:
    """Check every expected effect; ``recipe_base_sha`` is the recipe branch head before the story."""
    story = _Story.of(world, scenario)
    report = StoryReport()
    _check_status_comment(story, report)
    bump, expected_names = _check_bump(story, scenario, recipe_base_sha, changelog_path, report)
    sweeps, states = _check_sweep(story, session, expected_names, report)
    mode, lost = _check_one_way(story, sweeps, expected_names, report)
    _check_artifacts(story, session, sweeps, report)
    table = _check_report(story, mode, report)
    calls = _check_audit(story, session, report)
    reports = bot_comments(world, story.repo, story.pr, REPORT_MARKER_PREFIX)
    report.summary = {
        "bump_commit": bump,
        "mode": mode,
        "runner_lost": len(lost),
        "jobs": dict(states),
        "report_table": table,
        "accuracy_table": accuracy_table(reports[0].body) if reports else [],
        "links": story_links(story, bump.get("sha"), reports[0].id if reports else None),
        "github_calls": calls,
    }
    return report


def story_links(story: _Story, bump_sha: str | None, report_id: int | None) -> dict[str, str]:
    """Where to look: the recipe PR, the bump commit's diff, the report comment and the sweep's
    run(s) on the recipe branch, on the simulated GitHub (the URLs its API hands out)."""
    world, repo, pr = story.world, story.repo, story.pr
    base = f"{world.settings.base_url.rstrip('/')}/{repo}"
    links = {"PR": f"{base}/pull/{pr}"}
    if bump_sha:
        links["bump diff"] = f"{base}/commit/{bump_sha}"
    if report_id is not None:
        links["report"] = f"{base}/pull/{pr}#issuecomment-{report_id}"
    with world.lock:
        runs = sorted(
            run.id
            for run in world.runs.values()
            if run.repo == repo
            and run.head_branch == story.branch
            and any(world.jobs[j].point for j in run.jobs)
        )
    for n, run_id in enumerate(runs[:3]):
        links["run" if n == 0 else f"run {n + 1}"] = f"{base}/actions/runs/{run_id}"
    if len(runs) > 3:
        links["runs"] = f"{len(runs) - 3} more under {base}/actions"
    return links


def _check_status_comment(story: _Story, report: StoryReport) -> None:
    """1. the status comment."""
    status = bot_comments(story.world, story.repo, story.pr, STATUS_MARKER)
    report.add("one status comment", len(status) == 1, f"{len(status)} status comment(s) on #{story.pr}")


def _check_bump(
    story: _Story, scenario: Any, recipe_base_sha: str, changelog_path: str, report: StoryReport
) -> tuple[dict[str, Any], list[str]]:
    """2. the bump commit: the one new commit on the recipe branch, and the bot's. Returns its
    summary and the result names of the points the bumped config plans (none without the commit)."""
    world, login = story.world, story.bot_login
    commits = _commits_since(world, story.repo, recipe_base_sha, story.branch)
    bot_commits = [
        (sha, c)
        for sha, c in commits
        if login in str(getattr(c, "author", "")) or login in str(getattr(c, "committer", ""))
    ]
    report.add(
        "one bump commit",
        len(bot_commits) == 1 and len(commits) == 1,
        f"{len(commits)} new commit(s) on {story.branch}, {len(bot_commits)} by {login}",
    )
    if len(commits) != 1:
        return {}, []
    sha, commit = commits[0]
    return _check_bump_commit(story, scenario, sha, commit.parents[0], changelog_path, report)


def _check_bump_commit(
    story: _Story, scenario: Any, sha: str, parent: str, changelog_path: str, report: StoryReport
) -> tuple[dict[str, Any], list[str]]:
    """2. what the bump commit changed: exactly the key's image line and one changelog entry."""
    world, repo, key = story.world, story.repo, story.key
    before, after = _flatten(world, repo, parent), _flatten(world, repo, sha)
    changed = sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))
    old_master, new_master = (
        _file_at(world, repo, parent, story.master_path),
        _file_at(world, repo, sha, story.master_path),
    )
    removed, added = changed_lines(old_master, new_master)
    tag = expected_tag(scenario)
    new_image_ok = (
        len(added) == 1 and tag is not None and added[0].strip() == f"image: {scenario.facts['image']}:{tag}"
    )
    old_key_image = parse_master(old_master)[key]["image"]
    report.add(
        "bump edits exactly the image line",
        len(removed) == 1 and removed[0].strip() == f"image: {old_key_image}" and new_image_ok,
        f"-{removed} +{added}; expected tag {tag}",
    )
    old_log, new_log = (
        _file_at(world, repo, parent, changelog_path),
        _file_at(world, repo, sha, changelog_path),
    )
    entries = yaml.safe_load(new_log) or []
    last = entries[-1] if entries else {}
    report.add(
        "one changelog entry appended",
        new_log.startswith(old_log)
        and len(entries) == len(yaml.safe_load(old_log) or []) + 1
        and last.get("config-keys") == [key]
        and str(last.get("pr-link", "")).endswith(f"/pull/{story.pr}"),
        f"entry: {last}",
    )
    report.add(
        "the commit touches only the config and the changelog",
        changed == sorted({story.master_path, changelog_path}),
        f"files changed: {changed}",
    )
    plus, minus = changed_lines(old_log, new_log)
    bump = {
        "sha": sha,
        "files": changed,
        "image": added[0].strip() if added else None,
        "lines_added": len(added) + len(minus),
        "lines_removed": len(removed) + len(plus),
    }
    # the seed's recipe keeps 8k1k alone; another story key is swept whole
    points = expand_points(parse_master(new_master), key, seq="8k1k" if key == SEED_KEY else None)
    return bump, sorted(p.result_name for p in points)


def _check_sweep(
    story: _Story, session: Session, expected_names: list[str], report: StoryReport
) -> tuple[list[Sweep], Counter[str]]:
    """3. the sweep: one job per point, all finished, never more in flight than runners."""
    sweeps = list(
        session.execute(
            select(Sweep).where(
                Sweep.repo == story.repo, Sweep.pr_number == story.pr, Sweep.config_key == story.key
            )
        )
        .scalars()
        .all()
    )
    jobs = (
        session.execute(select(SweepJob).where(SweepJob.sweep_id.in_([s.id for s in sweeps]))).scalars().all()
    )
    states = Counter(j.state for j in jobs)
    report.add(
        "one sweep, one job per 8k1k point",
        len(sweeps) == 1 and sorted(j.result_name for j in jobs) == expected_names and bool(expected_names),
        f"{len(sweeps)} sweep(s), {len(jobs)} job(s), expected {len(expected_names)}",
    )
    report.add(
        "every job finished",
        bool(jobs) and all(j.state in ("succeeded", "reused") for j in jobs),
        f"job states: {dict(states)}",
    )
    label = jobs[0].runner_label if jobs else "mi355x"
    with story.world.lock:
        capacity = len(story.world.runners.get(label, []))
    peak = peak_in_flight(story.world, label)
    report.add(
        "never more in flight than runners",
        0 < peak <= capacity,
        f"peak {peak} on {capacity} {label} runners",
    )
    return sweeps, states


def _check_one_way(
    story: _Story, sweeps: list[Sweep], expected_names: list[str], report: StoryReport
) -> tuple[str, list[str]]:
    """3b. one sweep, one way: the bot's e2e-tests.yml runs (dispatch) or the repo's own
    run-sweep.yml run (label), never both; every point ran to success exactly once (a lost
    runner's attempt is retried, and counted apart). Returns the mode and the lost attempts."""
    world = story.world
    mode = str((sweeps[0].filters or {}).get("mode") or "dispatch") if sweeps else "dispatch"
    with world.lock:
        by_event: Counter[str] = Counter()
        ok_runs: Counter[str] = Counter()
        lost: list[str] = []
        for run in world.runs.values():
            bench = [world.jobs[j] for j in run.jobs if world.jobs[j].point]
            if run.repo == story.repo and bench:
                by_event[run.event] += 1
            for job in bench:
                if job.point.get("eval-only"):
                    continue  # an evaluated point's separate eval job (e2e-tests.yml's `eval /`)
                if job.conclusion == "success":
                    ok_runs[point_identity(job.point)] += 1
                elif job.fate == "runner_lost" and job.status == "completed":
                    lost.append(point_identity(job.point))
        decisions = [d["decision"] for d in world.sweep_decisions if d["pr"] == story.pr]
    wanted_event = "pull_request" if mode == "label" else "workflow_dispatch"
    report.add(
        f"one way to the runners ({mode} mode)",
        set(by_event) == {wanted_event},
        f"runs with benchmark jobs by event: {dict(by_event)}; run-sweep.yml decisions: {decisions}",
    )
    report.add(
        "every point measured exactly once",
        bool(expected_names) and all(ok_runs.get(n) == 1 for n in expected_names),
        f"successful jobs per point: {sorted(set(ok_runs.values()))}; runner-lost attempts: {len(lost)}",
    )
    report.add(
        "lost runners retried",
        all(ok_runs.get(n) == 1 for n in lost),
        f"lost: {lost}",
    )
    return mode, lost


def _check_artifacts(story: _Story, session: Session, sweeps: list[Sweep], report: StoryReport) -> None:
    """3c. every point's result was collected from the artifact its job uploaded under the
    template's real name (`bmk_<RESULT_FILENAME>`, `bmk_agentic_<RESULT_FILENAME>` for an agentic
    job; a multi-node job's one file per conc): each stored result names an artifact of the sim's
    run, by id and by that name."""
    jobs = list(session.scalars(select(SweepJob).where(SweepJob.sweep_id.in_([s.id for s in sweeps]))))
    results = list(session.scalars(select(Result).where(Result.job_id.in_([j.id for j in jobs]))))
    with story.world.lock:
        uploaded = {a.id: a.name for a in story.world.artifacts.values()}
    wrong: list[str] = []
    for job in jobs:
        prefix = "bmk_agentic_" if is_agentic(job.point or {}) else "bmk_"
        own = [r for r in results if r.job_id == job.id]
        names = {r.artifact_name for r in own}
        if job.state == "reused":
            continue  # measured by an earlier run (its results were collected there)
        if (
            not own
            or any(uploaded.get(int(r.artifact_id or 0)) != r.artifact_name for r in own)
            or not all(str(n).startswith(prefix) for n in names)
        ):
            wrong.append(f"{job.result_name}: {sorted(str(n) for n in names)}")
    report.add(
        "every point's result collected under its real artifact name",
        bool(jobs) and not wrong,
        f"{len(results)} result(s) for {len(jobs)} job(s); wrong: {wrong[:3]}",
    )


def report_final(body: str, key: str) -> bool:
    """Whether a report comment shows the sweep's end: the gap at every ATOM conc (the seed key,
    which the ATOM reference covers), else the report's `**Finished**` header."""
    if key == SEED_KEY:
        table = "\n".join(report_table(body))
        return all(f"| {c} |" in table for c in ATOM_CONCS) and "running" not in body.lower()
    return "**Finished**" in body and "running" not in body.lower()


def _check_report(story: _Story, mode: str, report: StoryReport) -> list[str]:
    """4. the report comment: the gap at every ATOM conc (the seed key; another key: the report's
    final state), and the sweep mode. Returns its table."""
    reports = bot_comments(story.world, story.repo, story.pr, REPORT_MARKER_PREFIX)
    table = report_table(reports[0].body) if len(reports) == 1 else []
    if story.key != SEED_KEY:
        report.add(
            "one report comment, final",
            len(reports) == 1 and report_final(reports[0].body, story.key),
            f"{len(reports)} report comment(s)",
        )
        report.add(
            "the report says which sweep mode ran",
            len(reports) == 1 and f"Sweep mode: **{mode}**" in reports[0].body,
            f"mode {mode}",
        )
        return table
    rows = {int(m.group(1)): line for line in table if (m := re.match(r"\|\s*(\d+)\s*\|", line))}
    with_gap = [c for c in ATOM_CONCS if c in rows and re.search(r"\d+\.\d+%", rows[c])]
    report.add(
        "one report comment with the gap at every ATOM conc",
        len(reports) == 1 and with_gap == list(ATOM_CONCS),
        f"{len(reports)} report comment(s); gap at conc {with_gap}",
    )
    report.add(
        "the report says which sweep mode ran",
        len(reports) == 1 and f"Sweep mode: **{mode}**" in reports[0].body,
        f"mode {mode}",
    )
    return table


def _check_audit(story: _Story, session: Session, report: StoryReport) -> dict[str, Any]:
    """5. the audit log accounts for every GitHub write and command, and who caused each.
    Returns the sim's call summary."""
    audit = session.execute(select(AuditEntry)).scalars().all()
    audited_writes = Counter(
        a.action.removeprefix("github.") for a in audit if a.action.startswith("github.")
    )
    calls: dict[str, Any] = story.world.call_summary()
    sim_writes: Counter[str] = Counter()
    for op, by_status in calls["by_operation"].items():
        ok = sum(n for status, n in by_status.items() if status.startswith("2"))
        if ok and _is_write(op):
            sim_writes[op] = ok
    # op -> (writes GitHub accepted, writes audited): says how many are missing, not only where.
    unaccounted = {
        op: (n, audited_writes.get(op, 0)) for op, n in sim_writes.items() if audited_writes.get(op, 0) < n
    }
    human = _human_comments(story.world, story.repo, story.pr, story.bot_login)
    commands = [c for c in human if c.body.lstrip().startswith("/")]
    audited_commands = [a for a in audit if a.action.startswith("command.")]
    report.add(
        "audit accounts for every GitHub write",
        not unaccounted,
        f"writes by op {dict(sim_writes)}; unaccounted (accepted, audited) {unaccounted}",
    )
    report.add(
        "audit accounts for every command",
        len(audited_commands) >= len(commands),
        f"{len(commands)} command comment(s), {len(audited_commands)} audited",
    )
    # Every GitHub write is the bot's; a command's writes name the commenter as their cause.
    not_bot = sorted({a.actor for a in audit if a.action.startswith("github.") and a.actor != "sweepbot"})
    commenters = {c.user for c in commands}
    caused = sorted({a.caused_by for a in audit if a.action.startswith("github.") and a.caused_by})
    bump_refs = [a for a in audit if a.action in ("github.git/update-ref", "github.git/create-ref")]
    report.add(
        "audit says who made each GitHub write and who caused it",
        not not_bot and set(caused) <= commenters and bool(bump_refs),
        f"writes made by someone else: {not_bot}; caused by {caused}; bump ref writes by "
        f"{[(a.actor, a.caused_by) for a in bump_refs]}",
    )
    return calls


def _is_write(op: str) -> bool:
    # Token exchange is authentication, not a change the bot made to a repository.
    if op == "apps/create-installation-access-token":
        return False
    return op.split("/")[-1].startswith(("create", "update", "delete", "merge", "cancel", "add"))


def _human_comments(world: Any, repo: str, number: int, bot_login: str) -> list[Any]:
    with world.lock:
        comments = list(world.repo(repo).comments.values())
    return [c for c in comments if c.issue_number == number and c.user != bot_login]


NIGHTLY_MARKER_PREFIX = "<!-- sweepbot:nightly-regression:"


def nightly_issues(world: Any, repo: str) -> list[Any]:
    with world.lock:
        issues = list(world.repo(repo).issues.values())
    return [i for i in issues if NIGHTLY_MARKER_PREFIX in (i.body or "")]


def observe_nightly(world: Any, story: Any, session: Session, report: StoryReport) -> None:
    """The nightly regression story's expected effects, added to ``report``."""
    facts = story.facts
    repo = world.scenario.facts["bench_repo"]
    regs = list(session.scalars(select(NightlyRegression)))
    reg = regs[0] if len(regs) == 1 else None
    report.add(
        "nightly watch: one regression, bisected to the first bad nightly",
        reg is not None
        and (reg.last_good_tag, reg.first_bad_tag) == (facts["last_good_tag"], facts["first_bad_tag"])
        and reg.bisect_runs >= 1,
        f"regressions {[(r.last_good_tag, r.first_bad_tag, r.state, r.bisect_runs) for r in regs]}; "
        f"expected {facts['last_good_tag']} -> {facts['first_bad_tag']}",
    )
    shas = {c.get("sha") for c in (reg.commits or [])} if reg else set()
    report.add(
        "nightly watch: the upstream range holds the bad commit and its PR",
        reg is not None and facts["bad_commit"] in shas and facts["perf_pr"] in (reg.pulls or []),
        f"{len(shas)} commit(s), PRs {reg.pulls if reg else None}; expected #{facts['perf_pr']}",
    )
    issues = nightly_issues(world, repo)
    report.add(
        "nightly watch: one issue, closed when the fix's nightlies recovered",
        len(issues) == 1
        and issues[0].state == "closed"
        and "**Recovered**" in issues[0].body
        and reg is not None
        and reg.state == RegressionState.RECOVERED
        and reg.recovered_tag == facts.get("recovered_tag"),
        f"issues {[(i.number, i.state) for i in issues]}; regression "
        f"{(reg.state, reg.recovered_tag) if reg else None}; "
        f"expected recovery in {facts.get('recovered_tag')}",
    )
    canaries = list(session.scalars(select(NightlyCanary)))
    with world.lock:
        left = [r for r in world.repo(repo).refs if "sweepbot/canary/" in r]
    report.add(
        "nightly watch: canaries measured, their branches deleted",
        bool(canaries) and not left and any(c.state == CanaryState.MEASURED for c in canaries),
        f"{sum(c.state == CanaryState.MEASURED for c in canaries)} of {len(canaries)} nightlies measured; "
        f"branches left {left}",
    )
