"""Issue 13: the changelog's `evals-only` / `all-evals` fields start the sweep in that eval mode.

InferenceX's utils/evals/EVALS.md (tests/fixtures/inferencex/docs/EVALS.md): "Changelog entries
use `evals-only: true` and `all-evals: true`. The `all-evals` setting implies eval-only there."
The pure part reads the entries a PR adds (over the real perf-changelog tail); the sim part checks
that the sweep a bump queues runs that mode (eval points only; every point under all-evals).
"""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.changelog_mode import added_entries, eval_mode_for_key, parse_entries, pr_eval_mode
from app.core.recipes import EntryFlags, append_changelog
from app.core.recipes.evals import EvalMode
from sim.scenario import BENCH_REPO, RECIPE_BRANCH, VLLM_REPO
from tests.flows import test_commands_sim, test_tracking_sim
from tests.flows.test_tracking_sim import _gw, _open_pr, _poll
from tests.recipe_helpers import SEED_KEY, fixture_text

# The seed story's fixtures, shared with the tracking sim tests.
sim = test_tracking_sim.sim
story = test_tracking_sim.story

BASE = fixture_text("perf-changelog.head-tail.yaml")
LINK = "https://github.com/SemiAnalysisAI/InferenceX/pull/2104"


def _with(text: str, flags: EntryFlags = EntryFlags(), key: str = SEED_KEY) -> str:
    return append_changelog(
        text, config_keys=[key], description=["a recipe change"], pr_link=LINK, flags=flags
    )


def test_the_real_changelog_tail_has_no_eval_fields_so_it_asks_for_nothing() -> None:
    entries = parse_entries(BASE)
    assert len(entries) == 18
    assert all(eval_mode_for_key(entries, k).mode is None for e in entries for k in e["config-keys"])


@pytest.mark.parametrize(
    ("flags", "mode"),
    [
        (EntryFlags(), None),
        (EntryFlags(evals_only=True), EvalMode.ONLY),
        (EntryFlags(all_evals=True), EvalMode.ALL),
        (EntryFlags(evals_only=True, all_evals=True), EvalMode.ALL),
        (EntryFlags(no_evals=True), EvalMode.NONE),
    ],
)
def test_an_added_entry_for_the_key_sets_the_mode(flags: EntryFlags, mode: EvalMode | None) -> None:
    got = pr_eval_mode(BASE, _with(BASE, flags), SEED_KEY)
    assert got.mode == mode and got.why
    # Another key's entry, or the same entry already on the base, says nothing about this PR.
    assert pr_eval_mode(BASE, _with(BASE, flags, key="other-key"), SEED_KEY).mode is None
    assert pr_eval_mode(_with(BASE, flags), _with(BASE, flags), SEED_KEY).mode is None


def test_wildcard_keys_and_entries_main_added_after_the_pr_branched() -> None:
    head = _with(BASE, EntryFlags(evals_only=True), key="minimaxm3-*-vllm")
    assert pr_eval_mode(BASE, head, SEED_KEY).mode == EvalMode.ONLY
    # main got a new all-evals entry the PR branch does not have: it is not the PR's.
    newer_main = _with(BASE, EntryFlags(all_evals=True))
    assert pr_eval_mode(newer_main, head, SEED_KEY).mode == EvalMode.ONLY


def test_entries_that_disagree() -> None:
    only, every, none = ({"evals-only": True}, {"all-evals": True}, {"no-evals": True})

    def entry(**fields: Any) -> dict[str, Any]:
        return {"config-keys": [SEED_KEY], "description": ["x"], "pr-link": LINK, **fields}

    assert eval_mode_for_key([entry(**only), entry(**every)], SEED_KEY).mode == EvalMode.ALL
    assert eval_mode_for_key([entry(**none), entry(**only)], SEED_KEY).mode == EvalMode.DEFAULT
    # sweepbot's own bump entry carries no eval field: it does not override the recipe's.
    assert eval_mode_for_key([entry(**only), entry()], SEED_KEY).mode == EvalMode.ONLY
    # An entry the repo's gate would reject (not a boolean) asks for nothing.
    assert eval_mode_for_key([entry(**{"evals-only": "yes"})], SEED_KEY).mode is None
    assert added_entries([entry()], [entry(), entry()]) == [entry()]


def test_unreadable_changelogs_ask_for_nothing() -> None:
    assert pr_eval_mode(None, None, SEED_KEY).mode is None
    assert pr_eval_mode(BASE, "- config-keys: [\n", SEED_KEY).mode is None
    assert pr_eval_mode(BASE, "version: 1\n", SEED_KEY).mode is None


# ------------------------------------------------------------------- the sweep a bump queues


def _bump_with_entry(story: dict[str, Any], db_session: Session, flags: EntryFlags) -> Any:
    """The seed story up to the bump, with the recipe PR's own changelog entry carrying ``flags``."""
    from app.flows.tracking.watches import DepRef, drop_dependencies
    from app.models.sweeps import Sweep

    world, scenario = story["world"], story["scenario"]
    changelog = world.read_file(BENCH_REPO, "perf-changelog.yaml", RECIPE_BRANCH).decode()
    world.commit_files(
        BENCH_REPO,
        RECIPE_BRANCH,
        {"perf-changelog.yaml": _with(changelog, flags)},
        "perf-changelog entry for the recipe",
        author="carol-writer",
    )
    _open_pr(db_session)
    for _ in ("nightly-before-merge", "merge-47269", "nightly-after-47269", "close-47270"):
        scenario.step()
        _poll(db_session)
    reply = drop_dependencies(
        db_session,
        _gw(db_session),
        repo=BENCH_REPO,
        pr_number=2104,
        refs=[DepRef(VLLM_REPO, 47270)],
        actor="bob-maintainer",
    )
    db_session.commit()
    assert "bumped" in reply
    return db_session.scalars(select(Sweep).where(Sweep.reason == "bump")).one()


@pytest.mark.parametrize(
    ("flags", "evals"),
    [(EntryFlags(evals_only=True), "only"), (EntryFlags(all_evals=True), "all"), (EntryFlags(), "default")],
)
def test_the_bump_sweep_runs_the_mode_the_recipe_entry_asks_for(
    story: dict[str, Any], db_session: Session, flags: EntryFlags, evals: str
) -> None:
    from app.models.sweeps import SweepJob

    sweep = _bump_with_entry(story, db_session, flags)
    points = [j.point for j in db_session.scalars(select(SweepJob).where(SweepJob.sweep_id == sweep.id))]
    assert points
    assert ((sweep.filters or {}).get("evals") or "default") == evals
    eval_only = [bool(p.get("eval-only")) for p in points]
    if evals == "default":
        assert not any(eval_only) and any(p.get("run-eval") for p in points)
    else:
        assert all(eval_only)  # evals-only and all-evals: no throughput job
    if evals == "all":
        # every point of the key's search space is evaluated, not just the selected ones
        assert len(points) > 2 and all(p.get("run-eval") for p in points)


# ------------------------------------------------------------------- /sweep without evals=

world = test_commands_sim.world


@pytest.mark.parametrize(
    ("body", "flags", "evals"),
    [
        ("/sweep conc=4", EntryFlags(all_evals=True), "all"),
        ("/sweep", EntryFlags(evals_only=True), "only"),
        ("/sweep conc=4 evals=default", EntryFlags(all_evals=True), "default"),  # an explicit evals= wins
        ("/sweep conc=4", EntryFlags(), "default"),
    ],
)
def test_a_sweep_command_without_evals_uses_the_prs_changelog_entry(
    world: Any, db_session: Session, body: str, flags: EntryFlags, evals: str
) -> None:
    from app.models.sweeps import Sweep

    changelog = world.read_file(BENCH_REPO, "perf-changelog.yaml", RECIPE_BRANCH).decode()
    world.commit_files(
        BENCH_REPO,
        RECIPE_BRANCH,
        {"perf-changelog.yaml": _with(changelog, flags)},
        "perf-changelog entry for the recipe",
        author="carol-writer",
    )
    test_commands_sim._comment(db_session, world, "bob-maintainer", body)
    sweep = db_session.scalars(select(Sweep).where(Sweep.reason == "command")).one()
    assert ((sweep.filters or {}).get("evals") or "default") == evals
