"""Reuse at merge (pure): may the push to ``main`` publish a PR's label-driven sweep instead of
running it again, and what must a maintainer post for it.

The benchmark repo decides this itself on its push-to-main run (run-sweep.yml's ``setup`` runs
``utils/find_reusable_sweep_run.py``); this module judges the same facts the same way, so the bot's
report can say ahead of the merge what that run will do. The repo's rules (its workflows README,
"Reusing an Approved PR Full Sweep", and the finder's documented requests):

* Authorization is a PR comment by an ``OWNER``, ``MEMBER`` or ``COLLABORATOR``
  (``author_association``) with a line that is exactly ``/reuse-sweep-run`` or
  ``/reuse-sweep-run <run id>``. The latest such comment wins (comments ordered by
  ``created_at``), and inside it the last such line. The bot's own comments never count: an App
  has no maintainer association, so the bot offers the line and a maintainer posts it.
* A source run is a ``pull_request`` run of ``.github/workflows/run-sweep.yml``, completed, whose
  head commit is still in the PR's commit list (``GET /pulls/{n}/commits``), with the aggregate
  artifacts ``results_bmk`` or ``eval_results_all``. Unpinned, the latest such run that
  succeeded is taken; a pinned run may also have failed (only its completed points publish).
* The PR carries a full-sweep label (``full-sweep-enabled``, ``non-canary-full-sweep-enabled``,
  ``full-sweep-fail-fast``, ``full-sweep-fail-fast-no-canary``) and no label that makes a run
  unfit for reuse (``evals-only``, ``agentx-fast``; ``all-evals`` full sweeps are reusable).
* Authorized but ineligible fails closed: main's setup job fails and nothing is published.
  Without authorization main runs the whole sweep again.

``decide_reuse`` is the one decision; every path returns a ``ReuseDecision`` saying why.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import structlog

log = structlog.get_logger(__name__)

COMMAND = "/reuse-sweep-run"
ALLOWED_ASSOCIATIONS = frozenset({"OWNER", "MEMBER", "COLLABORATOR"})
REUSABLE_LABELS = (
    "full-sweep-enabled",
    "non-canary-full-sweep-enabled",
    "full-sweep-fail-fast",
    "full-sweep-fail-fast-no-canary",
)
INCOMPATIBLE_LABELS = ("evals-only", "agentx-fast")
AGGREGATES = ("results_bmk", "eval_results_all")
_LINE = re.compile(rf"(?m)^\s*{re.escape(COMMAND)}(?:\s+(\d+))?\s*$")

ReuseKind = Literal["pending", "ineligible", "offer", "authorized", "fails_closed"]


@dataclass(frozen=True)
class ReuseFacts:
    """What GitHub says about one PR, as the repo's finder reads it."""

    workflow_path: str  # ".github/workflows/run-sweep.yml"
    labels: Collection[str]
    commits: Collection[str]  # the PR's commit shas (GET /pulls/{n}/commits)
    runs: Sequence[Mapping[str, Any]]  # the PR's runs of that workflow (REST workflow-run shapes)
    artifacts: Mapping[int, Collection[str]]  # run id -> unexpired artifact names (runs asked about)
    comments: Sequence[Mapping[str, Any]]  # issue comments: body, created_at, author_association, user
    bot_login: str = ""


@dataclass(frozen=True)
class ReuseDecision:
    kind: ReuseKind
    why: str
    run_id: int | None = None  # the run offered or authorized
    pinned: int | None = None  # the run id the authorizing comment names
    main_will: str = ""  # what the push to main will do
    source_sha: str = ""  # the offered or authorized run's head commit
    best_run: int | None = None  # the latest reusable run whatever was authorized (a recovery's source)
    best_sha: str = ""
    per_run: dict[int, str] = field(default_factory=dict)  # run id -> why it is (not) reusable

    @property
    def line(self) -> str:
        """What a maintainer posts to authorize the offered run."""
        return f"{COMMAND} {self.run_id}" if self.run_id is not None else ""


def authorization(comments: Sequence[Mapping[str, Any]], bot_login: str = "") -> tuple[bool, int | None]:
    """(authorized, pinned run id) from the PR's comments, as the repo's finder reads them."""
    ordered = sorted(comments, key=lambda c: str(c.get("created_at") or ""))
    for comment in reversed(ordered):
        login = str((comment.get("user") or {}).get("login") or "")
        if bot_login and login == bot_login:
            continue
        if str(comment.get("author_association") or "") not in ALLOWED_ASSOCIATIONS:
            continue
        found = _LINE.findall(str(comment.get("body") or ""))
        if found:
            return True, int(found[-1]) if found[-1] else None
    return False, None


def run_unfit(run: Mapping[str, Any], facts: ReuseFacts, *, pinned: bool) -> str | None:
    """Why ``run`` cannot be a reuse source (None: it can)."""
    rid = run.get("id")
    if run.get("event") != "pull_request":
        return f"run {rid} is a {run.get('event')} run; only pull_request runs of run-sweep.yml are reusable"
    path = str(run.get("path") or "")
    if path and path != facts.workflow_path:
        return f"run {rid} is from {path}, not {facts.workflow_path}"
    if run.get("status") != "completed":
        return f"run {rid} has not completed ({run.get('status')})"
    if not pinned and run.get("conclusion") != "success":
        return f"run {rid} concluded {run.get('conclusion')}; only a pinned run may have failed"
    if str(run.get("head_sha") or "") not in set(facts.commits):
        return f"run {rid}'s head {str(run.get('head_sha'))[:7]} is no longer in the PR's commits"
    names = set(facts.artifacts.get(int(str(rid)), ()))
    if not names & set(AGGREGATES):
        return f"run {rid} has neither aggregate artifact ({' nor '.join(AGGREGATES)})"
    return None


def labels_unfit(labels: Collection[str]) -> str | None:
    """Why the PR's labels make its sweep unfit for reuse (None: they do not)."""
    bad = [lb for lb in INCOMPATIBLE_LABELS if lb in labels]
    if bad:
        return f"the PR carries {', '.join(bad)}: such runs are not reusable after merge"
    if not any(lb in labels for lb in REUSABLE_LABELS):
        return "the PR carries no full-sweep label (" + ", ".join(REUSABLE_LABELS) + ")"
    return None


def _latest(facts: ReuseFacts, verdicts: dict[int, str | None]) -> Mapping[str, Any] | None:
    ok = [r for r in facts.runs if verdicts.get(int(r["id"])) is None]
    return max(ok, key=lambda r: (str(r.get("created_at") or ""), int(r["id"])), default=None)


def decide_reuse(facts: ReuseFacts) -> ReuseDecision:
    """Will the push to main reuse one of this PR's runs, and which line would authorize it."""
    verdicts = {int(r["id"]): run_unfit(r, facts, pinned=False) for r in facts.runs}
    per_run = {rid: why or "reusable" for rid, why in verdicts.items()}
    authorized, pinned = authorization(facts.comments, facts.bot_login)
    label_why = labels_unfit(facts.labels)
    best = _latest(facts, verdicts)
    rerun = "the push to main runs the whole sweep again"
    if authorized:
        decision = _authorized(facts, pinned, label_why, best, per_run)
    elif label_why is not None:
        decision = ReuseDecision("ineligible", label_why, main_will=rerun, per_run=per_run)
    elif best is not None:
        rid = int(best["id"])
        decision = ReuseDecision(
            "offer",
            f"run {rid} is reusable and no maintainer has authorized it yet",
            run_id=rid,
            source_sha=str(best.get("head_sha") or ""),
            main_will=f"{rerun} unless a maintainer posts `{COMMAND} {rid}`",
            per_run=per_run,
        )
    elif any(r.get("status") != "completed" for r in facts.runs):
        decision = ReuseDecision("pending", "the PR's sweep run has not completed", per_run=per_run)
    else:
        why = "no run-sweep.yml pull_request run of this PR is reusable"
        if per_run:
            why += ": " + "; ".join(w for w in per_run.values())
        decision = ReuseDecision("ineligible", why, main_will=rerun, per_run=per_run)
    if best is not None and label_why is None:
        decision = replace(decision, best_run=int(best["id"]), best_sha=str(best.get("head_sha") or ""))
    log.info("reuse_decision", kind=decision.kind, run=decision.run_id, why=decision.why)
    return decision


def _authorized(
    facts: ReuseFacts,
    pinned: int | None,
    label_why: str | None,
    best: Mapping[str, Any] | None,
    per_run: dict[int, str],
) -> ReuseDecision:
    fail = "main's setup job fails closed: nothing is published until a recovery"
    if label_why is not None:
        return ReuseDecision(
            "fails_closed", f"authorized, but {label_why}", pinned=pinned, main_will=fail, per_run=per_run
        )
    if pinned is None:
        if best is None:
            why = "authorized without a run id, but no successful run of this PR is reusable"
            return ReuseDecision("fails_closed", why, main_will=fail, per_run=per_run)
        rid, sha = int(best["id"]), str(best.get("head_sha") or "")
        why = f"authorized without a run id: the latest reusable run is {rid}"
    else:
        run = next((r for r in facts.runs if int(r["id"]) == pinned), None)
        if run is None:
            why = f"authorized run {pinned} is not a run-sweep.yml pull_request run of this PR"
            return ReuseDecision("fails_closed", why, pinned=pinned, main_will=fail, per_run=per_run)
        unfit = run_unfit(run, facts, pinned=True)
        if unfit is not None:
            return ReuseDecision(
                "fails_closed", f"authorized, but {unfit}", pinned=pinned, main_will=fail, per_run=per_run
            )
        rid, sha = pinned, str(run.get("head_sha") or "")
        why = f"run {pinned} is authorized by a maintainer's `{COMMAND} {pinned}`"
    return ReuseDecision(
        "authorized",
        why,
        run_id=rid,
        pinned=pinned,
        source_sha=sha,
        main_will=(
            f"the push to main reuses run {rid}: no GPU job runs, and trigger-ingest hands "
            f"source-run-id {rid} with main's own run as merge-run-id to InferenceX-app"
        ),
        per_run=per_run,
    )
