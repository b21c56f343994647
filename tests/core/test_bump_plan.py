"""plan_bump(facts) -> BumpPlan, table-tested over the real InferenceX files: every variant (commit,
adopt own commit, refuse a human push, already pinned, blocked), the fact predicates the flow
loads by, and the log line each path writes saying why."""

from __future__ import annotations

from collections.abc import MutableMapping
from dataclasses import replace
from typing import Any

import pytest
import yaml
from structlog.testing import capture_logs

from app.core.bumpplan import (
    Adopt,
    AlreadyPinned,
    Blocked,
    BumpFacts,
    BumpPlan,
    Commit,
    ConfigAt,
    HeadCommit,
    Refusal,
    RefuseHumanPush,
    bump_subject,
    changelog_flags_for,
    must_inspect_head,
    needs_changelog,
    plan_bump,
    refusal_holds,
)
from tests.recipe_helpers import BUMPED_IMAGE, SEED_KEY, fixture_text

MASTER_PATH = ".github/configs/amd-master.yaml"
MASTER = fixture_text("amd-master.f8f9b66.yaml")
CHANGELOG = fixture_text("perf-changelog.tail.yaml")
OLD_IMAGE = "vllm/vllm-openai-rocm:nightly-4559c43a9526597c00cbcc4f59979496500268d1"
HEAD = "a" * 40
PARENT = "b" * 40
PR_LINK = "https://github.com/SemiAnalysisAI/InferenceX/pull/2104"

BASE = BumpFacts(
    repo="SemiAnalysisAI/InferenceX",
    key=SEED_KEY,
    image=BUMPED_IMAGE,
    mode="pr_branch",
    branch="recipe/minimaxm3",
    start_sha=HEAD,
    exists=True,
    config=ConfigAt(MASTER_PATH, MASTER),
    changelog=CHANGELOG,
    description=(f"Bump image to {BUMPED_IMAGE}", "Brings vllm-project/vllm#47269 (6971582)"),
    entry_link=PR_LINK,
)
ON_BUMP_BRANCH = replace(BASE, mode="bump_pr", branch=f"sweepbot/bump/{SEED_KEY}", entry_link=None)


def _plan(facts: BumpFacts) -> tuple[BumpPlan, list[MutableMapping[str, Any]]]:
    with capture_logs() as logs:
        plan = plan_bump(facts)
    return plan, [e for e in logs if e["event"] == "bump_plan"]


def _entries(text: str) -> list[dict[str, object]]:
    return list(yaml.safe_load(text))


# Each row: what the facts say, the plan kind expected, words its log line's `why` contains.
TABLE = [
    ("recipe branch, pin changes", BASE, "commit", "the pin changes"),
    ("new bump branch", replace(ON_BUMP_BRANCH, exists=False), "commit", "the pin changes"),
    (
        "bump branch at sweepbot's own last commit",
        replace(ON_BUMP_BRANCH, last_own_sha=HEAD),
        "commit",
        "the pin changes",
    ),
    (
        "bump branch head is sweepbot's unrecorded bump",
        replace(
            ON_BUMP_BRANCH,
            last_own_sha=PARENT,
            head=HeadCommit(HEAD, bump_subject(SEED_KEY, BUMPED_IMAGE), PARENT),
            changelog_before=CHANGELOG[:-200],
        ),
        "adopt",
        "own bump commit",
    ),
    (
        "bump branch head is someone else's",
        replace(ON_BUMP_BRANCH, last_own_sha=PARENT, head=HeadCommit(HEAD, "Tweak the recipe", PARENT)),
        "refuse",
        "not sweepbot's",
    ),
    (
        "bump branch never committed to by sweepbot, head unknown",
        replace(ON_BUMP_BRANCH, last_own_sha=None, head=HeadCommit(HEAD, "Initial commit", None)),
        "refuse",
        "not sweepbot's",
    ),
    ("already pinned", replace(BASE, image=OLD_IMAGE), "already", "already pins"),
    (
        "key not found",
        replace(BASE, config=ConfigAt(None, None, "config key x is in no master config")),
        "blocked",
        "not found",
    ),
    ("no config read at all", replace(BASE, config=None), "blocked", "not found"),
    ("pin cannot be edited", replace(BASE, image="not an image"), "blocked", "cannot be edited"),
    (
        "changelog is not a list",
        replace(BASE, changelog="version: 1\n"),
        "blocked",
        "perf-changelog cannot take",
    ),
    (
        "same refusal at the same head",
        replace(BASE, refusal=Refusal("recipe/minimaxm3", HEAD, "someone pushed")),
        "blocked",
        "same head",
    ),
]


@pytest.mark.parametrize(("name", "facts", "kind", "why"), TABLE, ids=[row[0] for row in TABLE])
def test_every_path_plans_one_variant_and_says_why(name: str, facts: BumpFacts, kind: str, why: str) -> None:
    plan, logs = _plan(facts)
    assert plan.kind == kind, name
    assert len(logs) == 1 and logs[0]["plan"] == kind and why in str(logs[0]["why"])
    assert logs[0]["key"] == SEED_KEY and logs[0]["branch"] == facts.branch


def test_a_commit_carries_the_pin_edit_and_one_entry_linking_the_recipe_pr() -> None:
    plan, _ = _plan(BASE)
    assert isinstance(plan, Commit)
    assert set(plan.files) == {MASTER_PATH, "perf-changelog.yaml"} and plan.path == MASTER_PATH
    new_master = plan.files[MASTER_PATH]
    assert BUMPED_IMAGE in new_master and OLD_IMAGE not in new_master.split(f"{SEED_KEY}:", 1)[1][:300]
    changelog = plan.files["perf-changelog.yaml"]
    assert changelog.startswith(CHANGELOG) and changelog[len(CHANGELOG) :].endswith(plan.entry)
    entries = _entries(changelog)
    assert entries[:-1] == _entries(CHANGELOG)
    assert entries[-1]["config-keys"] == [SEED_KEY] and entries[-1]["pr-link"] == PR_LINK
    assert plan.message.startswith(f"Bump {SEED_KEY} image to {BUMPED_IMAGE}\n")
    assert "[skip-sweep]" not in plan.message
    skipping = plan_bump(replace(BASE, skip_sweep=True))
    assert isinstance(skipping, Commit) and "[skip-sweep]" in skipping.message


def test_a_bump_pr_entry_says_xxx_and_replaces_the_open_bump_prs_earlier_entry() -> None:
    first = plan_bump(replace(ON_BUMP_BRANCH, exists=False))
    assert isinstance(first, Commit) and "pr-link: XXX" in first.entry
    with_earlier = first.files["perf-changelog.yaml"]
    newer_image = BUMPED_IMAGE.replace("69715823", "79715823")
    newer = replace(
        ON_BUMP_BRANCH,
        image=newer_image,
        description=(f"Bump image to {newer_image}",),
        last_own_sha=HEAD,
        changelog=with_earlier,
        previous_entry=first.entry,
    )
    second = plan_bump(newer)
    assert isinstance(second, Commit)
    entries = _entries(second.files["perf-changelog.yaml"])
    assert len(entries) == len(_entries(CHANGELOG)) + 1  # updated in place: still one entry
    assert "79715823" in str(entries[-1]["description"])
    # An earlier entry that is not at the end (the bump PR was merged, or edited) stays.
    kept = plan_bump(replace(newer, previous_entry="- config-keys:\n    - other\n"))
    assert isinstance(kept, Commit)
    assert len(_entries(kept.files["perf-changelog.yaml"])) == len(_entries(CHANGELOG)) + 2


def test_adopt_finishes_sweepbots_own_commit_with_its_entry() -> None:
    before = CHANGELOG
    done = plan_bump(replace(ON_BUMP_BRANCH, exists=False))
    assert isinstance(done, Commit)
    after = done.files["perf-changelog.yaml"]
    facts = replace(
        ON_BUMP_BRANCH,
        last_own_sha=None,
        head=HeadCommit(HEAD, bump_subject(SEED_KEY, BUMPED_IMAGE), PARENT),
        changelog=after,
        changelog_before=before,
    )
    plan = plan_bump(facts)
    assert plan == Adopt(HEAD, PARENT, MASTER_PATH, done.entry)
    # A changelog that was rewritten, not appended to, gives no entry to remember (never a guess).
    assert plan_bump(replace(facts, changelog_before="something else")) == Adopt(
        HEAD, PARENT, MASTER_PATH, ""
    )


def test_a_human_push_is_refused_with_how_to_let_sweepbot_bump_again() -> None:
    facts = replace(ON_BUMP_BRANCH, last_own_sha=PARENT, head=HeadCommit(HEAD, "Tweak", PARENT))
    plan = plan_bump(facts)
    assert isinstance(plan, RefuseHumanPush)
    assert f"`{ON_BUMP_BRANCH.branch}`" in plan.reason and HEAD[:7] in plan.reason
    assert "delete" in plan.reason and BUMPED_IMAGE in plan.reason


def test_blocked_plans_record_unless_the_same_refusal_still_holds() -> None:
    refused = Refusal(BASE.branch, HEAD, "the reason from before")
    assert plan_bump(replace(BASE, refusal=refused)) == Blocked("the reason from before", record=False)
    # A moved head (or another branch) decides again from scratch.
    assert plan_bump(replace(BASE, refusal=replace(refused, start_sha=PARENT))).kind == "commit"
    assert plan_bump(replace(BASE, refusal=replace(refused, branch="other"))).kind == "commit"
    missing = plan_bump(replace(BASE, config=ConfigAt(None, None, "gone")))
    assert missing == Blocked("gone")
    assert plan_bump(replace(BASE, image=OLD_IMAGE)) == AlreadyPinned(MASTER_PATH)


def test_the_predicates_the_flow_loads_facts_by() -> None:
    assert not must_inspect_head(BASE)  # the recipe branch: a human commit there is normal
    assert not must_inspect_head(replace(ON_BUMP_BRANCH, exists=False))
    assert not must_inspect_head(replace(ON_BUMP_BRANCH, last_own_sha=HEAD))
    assert must_inspect_head(replace(ON_BUMP_BRANCH, last_own_sha=PARENT))
    assert refusal_holds(replace(BASE, refusal=Refusal(BASE.branch, HEAD, "r")))
    assert not refusal_holds(BASE)
    assert needs_changelog(BASE)
    assert not needs_changelog(replace(BASE, image=OLD_IMAGE))  # already pinned: no changelog read
    assert not needs_changelog(replace(BASE, config=ConfigAt(None, None, "gone")))
    assert not needs_changelog(replace(BASE, image="not an image"))


def test_agentic_keys_get_scenario_type_in_the_entry() -> None:
    nvidia = fixture_text("nvidia-master.tail.head.yaml")
    agentic = [k for k in yaml.safe_load(nvidia) if "agentic" in k]
    assert agentic, "the NVIDIA tail holds agentic keys"
    flags = changelog_flags_for(nvidia, agentic[0])
    assert "agentic-coding" in flags.scenario_type
    assert changelog_flags_for(MASTER, SEED_KEY).scenario_type == ()


WHY = {
    "the pin changes": "the pin changes: one commit with the config line and the changelog entry",
    "own bump commit": "the head is sweepbot's own bump commit whose record was lost",
    "not sweepbot's": "the head is not sweepbot's commit",
    "already pins": "the config already pins the image at the head",
    "not found": "the key's master config was not found at the head",
    "cannot be edited": "the pin cannot be edited",
    "perf-changelog cannot take": "the perf-changelog cannot take the entry",
    "same head": "the earlier refusal was at this same head",
}


@pytest.mark.parametrize(("name", "facts", "kind", "why"), TABLE, ids=[row[0] for row in TABLE])
def test_each_paths_log_line_in_full(name: str, facts: BumpFacts, kind: str, why: str) -> None:
    _, logs = _plan(facts)
    assert logs == [
        {
            "event": "bump_plan",
            "log_level": "info",
            "plan": kind,
            "repo": "SemiAnalysisAI/InferenceX",
            "key": SEED_KEY,
            "image": facts.image,
            "branch": facts.branch,
            "start": facts.start_sha[:12],
            "why": WHY[why],
        }
    ]


def test_a_human_push_refusal_names_the_seven_digit_head() -> None:
    facts = replace(ON_BUMP_BRANCH, start_sha="0123456789abcdef" + "0" * 24, last_own_sha=PARENT,
                    head=HeadCommit(HEAD, "Tweak the recipe", PARENT))  # fmt: skip
    plan, _ = _plan(facts)
    assert isinstance(plan, RefuseHumanPush) and "(its head is now `0123456`)" in plan.reason
