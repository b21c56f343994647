"""The label story to the end of the PR's life (demo and e2e): the report offers
``/reuse-sweep-run <id>``, a maintainer posts it and merges, the bot reports main's outcome.

The maintainer does what the repo's workflows README says (a comment by an OWNER, MEMBER or
COLLABORATOR, then the merge); the simulator plays main's push run with its own reuse gate.
"""

from __future__ import annotations

import re
from typing import Any

from devstack.story import REPORT_MARKER_PREFIX, StoryReport, bot_comments
from devstack.storytimeline import Timeline, wait_until

SWEEP_MODES = ("label", "dispatch")
MAINTAINER = "alice-admin"  # the seed world's admin of the benchmark repo
_OFFER = re.compile(r"`/reuse-sweep-run (\d+)`")


def sweep_mode_setup(world: Any, scenario: Any, mode: str) -> None:
    """``dispatch``: the benchmark repo's bot config says so (label mode is the default)."""
    if mode == "dispatch":
        world.commit_files(
            scenario.facts["bench_repo"],
            "main",
            {".github/sweepbot.yml": "version: 1\nsweep:\n  mode: dispatch\n"},
            "sweepbot: dispatch e2e-tests.yml",
            author=MAINTAINER,
        )


def _report(world: Any, repo: str, pr: int) -> str:
    reports = bot_comments(world, repo, pr, REPORT_MARKER_PREFIX)
    return reports[0].body if reports else ""


def offered_run(world: Any, repo: str, pr: int) -> int | None:
    found = _OFFER.search(_report(world, repo, pr))
    return int(found.group(1)) if found else None


def merge_with_reuse(world: Any, timeline: Timeline, repo: str, pr: int, timeout: float) -> int | None:
    """Wait for the offer, post it as the maintainer, merge once the bot confirms, then wait for
    the bot's report of main's run. Returns the run offered."""
    wait_until(
        lambda: offered_run(world, repo, pr) is not None,
        timeline,
        timeout,
        "the report to offer /reuse-sweep-run for the label-driven run",
        lambda: "judging the PR's run as the repo's reuse finder does",
    )
    run_id = offered_run(world, repo, pr)
    timeline.note("sim", f"{MAINTAINER} posts /reuse-sweep-run {run_id} on #{pr}")
    world.add_comment(repo, pr, MAINTAINER, f"/reuse-sweep-run {run_id}")
    wait_until(
        lambda: "Reuse authorized" in _report(world, repo, pr),
        timeline,
        timeout,
        "the report to confirm the maintainer's authorization",
        lambda: "reading the maintainer's comment and its author_association",
    )
    timeline.note("sim", f"{MAINTAINER} squash-merges #{pr} (as utils/merge_with_reuse.sh does)")
    world.merge_pull(repo, pr, MAINTAINER, method="squash")
    wait_until(
        lambda: "After merge:" in _report(world, repo, pr),
        timeline,
        timeout,
        "the report of main's run for the merge commit",
        lambda: "following main's run-sweep.yml push run",
    )
    return run_id


def observe_merge(world: Any, repo: str, pr: int, report: StoryReport, run_id: int | None) -> None:
    """The checks of the story's end: the offer (``run_id``), main reusing that run, the bot saying so."""
    followed = {
        r.id for r in world.runs.values() if r.event == "pull_request" and r.pr_number == pr and r.jobs
    }
    report.add(
        "the report offers /reuse-sweep-run <id> for the label-driven run",
        run_id is not None and run_id in followed,
        f"offered run {run_id}",
    )
    pull = world.pull(repo, pr)
    push = [r for r in world.runs.values() if r.event == "push" and r.head_sha == pull.merge_commit_sha]
    reuse = push[0].inputs.get("reuse") or {} if push else {}
    report.add(
        "after the maintainer's comment and the merge, the push to main reuses that run",
        bool(push) and reuse.get("enabled") is True and reuse.get("source-run-id") == run_id,
        f"main's run {push[0].id if push else None}: {reuse.get('reason')}",
    )
    body = _report(world, repo, pr)
    report.add(
        "the bot reports main's outcome: reuse taken, results published",
        "✅ published" in body and "reuse taken" in body,
        next((ln for ln in body.splitlines() if "After merge:" in ln), "no After merge line")[:200],
    )
    accuracy = body.split("#### Accuracy", 1)[1].split("####", 1)[0] if "#### Accuracy" in body else ""
    report.add(
        "label mode runs the evals: run-sweep.yml's eval jobs are collected into the report's accuracy",
        "gsm8k" in accuracy.lower() and "No eval result" not in accuracy,
        (accuracy.strip().splitlines() or ["no accuracy section"])[0][:200],
    )
    report.summary["reused_run"] = run_id
