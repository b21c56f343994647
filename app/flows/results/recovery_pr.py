"""Opt-in (`.github/sweepbot.yml` `recovery: {open-pr: true}`): the bot opens the runbook's case-B
recovery PR itself, in the runbook's order.

1. An empty commit on ``sweepbot/recover/pr-<N>`` from main, the PR, its one full-sweep label;
   the PR's description asks a maintainer for ``/reuse-sweep-run <source>`` (the bot's own comment
   would not authorize anything).
2. Once that authorization is on the PR: the recovery entry appended to ``perf-changelog.yaml``
   (the merged PR's entries, the recovery PR's link, every earlier byte kept), then the carrier
   commit (same tree; second parent the source run's head), pushed without force.

Idempotent: the state rides on the merged PR's sweep (``recovery_pr``); each step looks first.
"""

from __future__ import annotations

from typing import Any, Protocol

import structlog
from sqlalchemy.orm import Session

from app.core.bot_config import BotConfig
from app.core.recoveryplan import (
    append_recovery,
    merged_entries,
    recovery_body,
    recovery_branch,
    recovery_title,
)
from app.core.sweepreuse import authorization
from app.models.sweeps import Sweep
from app.settings import get_settings
from app.store.audit import record
from app.store.bot_configs import stored_config

log = structlog.get_logger(__name__)


class RecoveryGateway(Protocol):
    def get_ref(self, repo: str, ref: str) -> dict[str, Any] | None: ...
    def get_commit(self, repo: str, sha: str) -> dict[str, Any]: ...
    def create_commit(self, repo: str, message: str, tree: str, parents: list[str]) -> dict[str, Any]: ...
    def create_ref(self, repo: str, ref: str, sha: str) -> dict[str, Any]: ...
    def update_ref(self, repo: str, ref: str, sha: str, *, force: bool = False) -> dict[str, Any]: ...
    def create_blob(self, repo: str, text: str) -> str: ...
    def create_tree(self, repo: str, base_tree: str, files: dict[str, str]) -> str: ...
    def get_file(self, repo: str, path: str, ref: str | None = None) -> tuple[str, str] | None: ...
    def create_pull(self, repo: str, *, title: str, head: str, base: str, body: str) -> dict[str, Any]: ...
    def add_labels(self, repo: str, number: int, labels: list[str]) -> Any: ...
    def list_comments(self, repo: str, number: int) -> list[dict[str, Any]]: ...


def _state(sweep: Sweep) -> dict[str, Any]:
    return dict((sweep.filters or {}).get("recovery_pr") or {})


def _keep(sweep: Sweep, state: dict[str, Any]) -> None:
    sweep.filters = {**(sweep.filters or {}), "recovery_pr": state}


def open_recovery_pr(session: Session, gw: RecoveryGateway, sweep: Sweep, pub: dict[str, Any]) -> int | None:
    """Step 1 when opted in and main's run is case B; the recovery PR's number (None: not opted in)."""
    cfg = stored_config(session, sweep.repo) or BotConfig()
    source = (sweep.filters or {}).get("reuse", {}).get("best_run")
    if not cfg.recovery.open_pr or pub.get("kind") != "case_b" or source is None:
        return None
    state = _state(sweep)
    if state.get("number"):
        return int(state["number"])
    repo, base, branch = sweep.repo, sweep.base_ref or "main", recovery_branch(sweep.pr_number)
    ref = gw.get_ref(repo, f"heads/{branch}")
    if ref is None:
        main = gw.get_ref(repo, f"heads/{base}")
        main_sha = str((main or {}).get("object", {}).get("sha") or "")
        tree = str(gw.get_commit(repo, main_sha)["tree"]["sha"])
        empty = gw.create_commit(repo, f"{recovery_title(sweep.pr_number)} [skip-sweep]", tree, [main_sha])
        gw.create_ref(repo, f"heads/{branch}", str(empty["sha"]))
    body = recovery_body(repo, sweep.pr_number, int(source), pub.get("merge_run"))
    pull = gw.create_pull(repo, title=recovery_title(sweep.pr_number), head=branch, base=base, body=body)
    number = int(pull["number"])
    gw.add_labels(repo, number, [cfg.sweep.label])
    _keep(
        sweep, {"number": number, "branch": branch, "source": int(source), "phase": "awaiting_authorization"}
    )
    record(
        session,
        actor="sweepbot",
        action="recovery.open_pr",
        target=f"{repo}#{number}",
        detail={"sweep": sweep.id, "source": source, "for_pr": sweep.pr_number},
    )
    log.info("recovery_pr_opened", repo=repo, pr=number, source=source, for_pr=sweep.pr_number)
    return number


def continue_recovery(session: Session, gw: RecoveryGateway, sweep: Sweep) -> bool:
    """Step 2 once a maintainer authorized the source on the recovery PR; True when pushed."""
    state = _state(sweep)
    if state.get("phase") != "awaiting_authorization":
        return False
    repo, number, source = sweep.repo, int(state["number"]), int(state["source"])
    ok, pinned = authorization(gw.list_comments(repo, number), get_settings().bot_login)
    if not ok or pinned not in (None, source):
        log.info(
            "recovery_waits", repo=repo, pr=number, why="no maintainer's /reuse-sweep-run for the source"
        )
        return False
    cfg = stored_config(session, repo) or BotConfig()
    path, merge_sha = cfg.bump.changelog, str((sweep.filters or {}).get("merge_sha") or "")
    parent = str(gw.get_commit(repo, merge_sha)["parents"][0]["sha"])
    before, after = gw.get_file(repo, path, ref=parent), gw.get_file(repo, path, ref=merge_sha)
    entries = merged_entries(before[0] if before else None, after[0] if after else None)
    head = str((gw.get_ref(repo, f"heads/{state['branch']}") or {}).get("object", {}).get("sha") or "")
    current = gw.get_file(repo, path, ref=head)
    link = f"https://github.com/{repo}/pull/{number}"
    text = append_recovery(current[0] if current else "", entries, link)
    base_tree = str(gw.get_commit(repo, head)["tree"]["sha"])
    tree = gw.create_tree(repo, base_tree, {path: gw.create_blob(repo, text)})
    entry = gw.create_commit(repo, f"chore: recover PR #{sweep.pr_number} ingest [skip-sweep]", tree, [head])
    source_sha = str((sweep.filters or {}).get("reuse", {}).get("best_sha") or "")
    carrier = gw.create_commit(
        repo, f"chore: attach reusable sweep run {source}", tree, [str(entry["sha"]), source_sha]
    )
    gw.update_ref(repo, f"heads/{state['branch']}", str(carrier["sha"]), force=False)
    _keep(sweep, {**state, "phase": "pushed", "head": carrier["sha"]})
    log.info("recovery_pushed", repo=repo, pr=number, source=source, carrier=carrier["sha"])
    return True
