"""Label mode to the end of a PR's life against the simulator: the sweep's run is offered for reuse,
a maintainer authorizes it, the PR merges, and main's run is followed; each runbook case too."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy.orm import Session

from app.flows.repo.bench_repo import clear_capacity_cache
from app.flows.results.merge_reuse import follow_main, refresh_reuse
from app.flows.results.reports import render_report
from app.flows.sweeps import ring
from app.flows.sweeps.request import request_sweep
from app.store.publications import problem_counts
from app.web.dashboard.data.overview import failures
from sim.scenario import SeedScenario
from sim.server import SimServer
from sim.world import SimSettings
from tests.helpers.wait import wait_for

KEY = "minimaxm3-fp4-mi355x-vllm"
REPO, PR = "SemiAnalysisAI/InferenceX", 2104


@pytest.fixture
def bot(db_session: Session, settings_env: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    from app.adapters.github.gateway import gateway
    from app.db import session_factory
    from app.settings import get_settings, reset_settings_cache

    with SimServer(settings=SimSettings(time_scale=0.0002, seed=3)) as sim:
        SeedScenario(sim.world).load()
        settings_env.setenv("SWEEPBOT_GITHUB_API_URL", sim.github_api_url)
        settings_env.setenv("SWEEPBOT_GITHUB_TOKEN", "sim-token")
        reset_settings_cache()
        clear_capacity_cache()
        settings_env.setattr(ring, "enqueue", lambda task, *args: None)
        yield {"sim": sim, "factory": session_factory(), "gw": lambda s: gateway(get_settings(), s)}


def _swept(bot: dict[str, Any]) -> tuple[int, Any]:
    """The PR changes the changelog (as a bump does); the bot's full sweep labels it and the repo's
    run-sweep.yml run (canary first) completes."""
    world = bot["sim"].world
    branch = world.pull(REPO, PR).head_ref
    text = (world.read_file(REPO, "perf-changelog.yaml", branch) or b"").decode()
    entry = f"- config-keys:\n    - {KEY}\n  description:\n    - bump\n  pr-link: XXX\n"
    world.commit_files(REPO, branch, {"perf-changelog.yaml": text + entry}, "Bump it", author="alice-admin")
    with bot["factory"]() as s:
        req = request_sweep(
            s,
            bot["gw"](s),
            repo=REPO,
            pr_number=PR,
            config_key=KEY,
            requested_by="alice-admin",
            reason="command",
        )
        s.commit()
        sweep_id = req.sweep.id
        kept = req.sweep.filters or {}
        assert kept["mode"] == "label" and kept["publishable"] is True
    assert "full-sweep-fail-fast" in world.pull(REPO, PR).labels
    run = max((r for r in world.runs.values() if r.event == "pull_request"), key=lambda r: r.id)
    wait_for(lambda: run.status == "completed", "the PR's run-sweep.yml run", timeout=60)
    assert world.jobs[run.jobs[1]].name.startswith("canary / ")
    return sweep_id, run


def _refresh(bot: dict[str, Any]) -> Any:
    with bot["factory"]() as s:
        d = refresh_reuse(s, bot["gw"](s), REPO, PR)
        s.commit()
        return d


def _follow(bot: dict[str, Any], merge_sha: str) -> Any:
    world = bot["sim"].world
    push = next(r for r in world.runs.values() if r.event == "push" and r.head_sha == merge_sha)
    wait_for(lambda: push.status == "completed", "main's run", timeout=60)
    with bot["factory"]() as s:
        gw = bot["gw"](s)
        pub = follow_main(s, gw, REPO, gw.get_run(REPO, push.id))
        s.commit()
        return pub, push


def _report(bot: dict[str, Any], sweep_id: int) -> str:
    with bot["factory"]() as s:
        return render_report(s, sweep_id)


def test_offer_authorize_merge_and_main_reuses_the_run(bot: dict[str, Any]) -> None:
    world = bot["sim"].world
    sweep_id, run = _swept(bot)
    offer = _refresh(bot)
    assert (offer.kind, offer.run_id) == ("offer", run.id)
    assert f"`/reuse-sweep-run {run.id}`" in _report(bot, sweep_id)
    world.add_comment(REPO, PR, "alice-admin", f"/reuse-sweep-run {run.id}")
    confirmed = _refresh(bot)
    assert confirmed.kind == "authorized" and f"reuses run {run.id}" in confirmed.main_will
    assert "Reuse authorized" in _report(bot, sweep_id)
    merge_sha = world.merge_pull(REPO, PR, "alice-admin")
    assert _refresh(bot).kind == "authorized"  # keeps the merge commit
    pub, push = _follow(bot, merge_sha)
    assert (pub.kind, pub.reuse_taken, pub.published, pub.source_run) == ("published", True, True, run.id)
    assert world.ingests[-1] == {"repo": REPO, "source-run-id": run.id, "merge-run-id": push.id}
    body = _report(bot, sweep_id)
    assert "✅ published" in body and "reuse taken" in body


def test_case_a_the_ingest_failed_after_reuse(bot: dict[str, Any]) -> None:
    world = bot["sim"].world
    _, run = _swept(bot)
    world.add_comment(REPO, PR, "alice-admin", f"/reuse-sweep-run {run.id}")
    _refresh(bot)
    world.faults.trigger_ingest_fail = True
    merge_sha = world.merge_pull(REPO, PR, "alice-admin")
    _refresh(bot)
    pub, push = _follow(bot, merge_sha)
    assert pub.kind == "case_a" and pub.reuse_taken and not pub.published
    assert pub.recovery.startswith(f"gh run rerun {push.id} --repo {REPO} --failed")
    # raised on the dashboard's "Needs a human" (with the recovery) and in /metrics' gauge
    with bot["factory"]() as s:
        (needs,) = [f for f in failures(s) if f.kind == "publication"]
        assert f"{REPO}#{PR} after merge (case_a)" in needs.summary and "gh run rerun" in needs.summary
        assert problem_counts(s) == {"case_a": 1, "case_b": 0, "needs_sweep": 0}


def test_case_b_reuse_authorized_for_a_run_that_cannot_be_reused(bot: dict[str, Any]) -> None:
    world = bot["sim"].world
    _, run = _swept(bot)
    world.add_comment(REPO, PR, "alice-admin", "/reuse-sweep-run 999999")  # not a run of this PR
    assert _refresh(bot).kind == "fails_closed"
    merge_sha = world.merge_pull(REPO, PR, "alice-admin")
    _refresh(bot)
    pub, push = _follow(bot, merge_sha)
    assert push.conclusion == "failure" and "999999 does not exist" in push.inputs["reuse"]["reason"]
    assert pub.kind == "case_b" and "reuse failed closed" in pub.why and not pub.published
    assert f'--body "/reuse-sweep-run {run.id}"' in pub.recovery and run.head_sha in pub.recovery


def test_without_authorization_main_sweeps_again_and_publishes_its_own_run(bot: dict[str, Any]) -> None:
    world = bot["sim"].world
    _, run = _swept(bot)
    merge_sha = world.merge_pull(REPO, PR, "alice-admin")
    assert _refresh(bot).kind == "offer"
    pub, push = _follow(bot, merge_sha)
    assert (pub.kind, pub.reuse_taken, pub.source_run) == ("published", False, push.id)


def test_opted_in_the_bot_opens_the_case_b_recovery_pr_and_main_then_reuses_the_source(
    bot: dict[str, Any],
) -> None:
    from app.core.bot_config import parse_bot_config
    from app.flows.results.merge_reuse import recovery_sweep
    from app.flows.results.recovery_pr import continue_recovery
    from app.models.tracking import BotConfigRecord

    with bot["factory"]() as s:
        cfg = parse_bot_config("recovery:\n  open-pr: true\n")
        s.add(
            BotConfigRecord(
                repo=REPO, ok=True, present=True, config=cfg.model_dump(mode="json", by_alias=True)
            )
        )
        s.commit()
    world = bot["sim"].world
    _, run = _swept(bot)
    world.add_comment(REPO, PR, "alice-admin", "/reuse-sweep-run 999999")  # fails closed on main
    _refresh(bot)
    merge_sha = world.merge_pull(REPO, PR, "alice-admin", method="squash")  # as merge_with_reuse.sh
    _refresh(bot)
    pub, _ = _follow(bot, merge_sha)
    assert pub.kind == "case_b"
    (rec,) = [p for p in world.repo(REPO).pulls.values() if p.head_ref == f"sweepbot/recover/pr-{PR}"]
    assert rec.labels == ["full-sweep-fail-fast"] and f"`/reuse-sweep-run {run.id}`" in rec.body
    main_log = world.read_file(REPO, "perf-changelog.yaml", "main") or b""
    with bot["factory"]() as s:  # the bot's own comment or nobody's authorizes nothing
        recovering = recovery_sweep(s, REPO, rec.number)
        assert recovering is not None and not continue_recovery(s, bot["gw"](s), recovering)
    world.add_comment(REPO, rec.number, "alice-admin", f"/reuse-sweep-run {run.id}")
    with bot["factory"]() as s:
        recovering = recovery_sweep(s, REPO, rec.number)
        assert recovering is not None and continue_recovery(s, bot["gw"](s), recovering)
        s.commit()
    head = world.pull_head_sha(rec)
    carrier = world.repo(REPO).objects.commits[head]
    assert carrier.parents[1] == run.head_sha  # the source head in the recovery PR's commits
    assert carrier.tree == world.repo(REPO).objects.commits[carrier.parents[0]].tree
    log = world.read_file(REPO, "perf-changelog.yaml", head) or b""
    assert log.startswith(main_log)  # never a historical byte changed
    assert f"pr-link: https://github.com/{REPO}/pull/{rec.number}" in log[len(main_log) :].decode()
    assert run.head_sha in world.pull_commits(REPO, rec.number)
    rec_merge = world.merge_pull(REPO, rec.number, "alice-admin", method="squash")
    push = next(r for r in world.runs.values() if r.event == "push" and r.head_sha == rec_merge)
    assert push.inputs["reuse"]["enabled"] and push.inputs["reuse"]["source-run-id"] == run.id
