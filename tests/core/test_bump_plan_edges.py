"""plan_bump's edges that the path table does not reach: a config with text but no path, a config
never read at all on the adopt path, an adopted head with no parent, the exact reasons a blocked
bump records, the log line of a recipe that cannot take the pin, and the commit of a key whose
changelog entry needs `scenario-type` and whose message lists its recipes and link."""

from __future__ import annotations

from collections.abc import MutableMapping
from dataclasses import replace
from typing import Any

import yaml
from structlog.testing import capture_logs

from app.core.bumpplan import (
    Adopt,
    Blocked,
    BumpFacts,
    BumpPlan,
    Commit,
    ConfigAt,
    HeadCommit,
    bump_subject,
    changelog_flags_for,
    commit_message,
    needs_changelog,
    plan_bump,
)
from app.core.recipes import NO_FLAGS, RecipeError, set_image
from app.core.recipes.changelog import append_changelog
from tests.core.test_bump_plan import BASE, CHANGELOG, HEAD, MASTER, ON_BUMP_BRANCH, PR_LINK
from tests.core.test_bump_recipes import FACTS as RECIPE_FACTS
from tests.core.test_bump_recipes import RECIPE_PATH
from tests.recipe_helpers import BUMPED_IMAGE, SEED_KEY, fixture_text


def _plan(facts: BumpFacts) -> tuple[BumpPlan, list[MutableMapping[str, Any]]]:
    with capture_logs() as logs:
        plan = plan_bump(facts)
    return plan, [e for e in logs if e["event"] == "bump_plan"]


def test_a_config_with_text_but_no_path_is_not_found_and_needs_no_changelog() -> None:
    pathless = replace(BASE, config=ConfigAt(None, MASTER))  # text that would take the pin
    assert set_image(MASTER, SEED_KEY, BUMPED_IMAGE) != MASTER
    assert not needs_changelog(pathless)
    assert plan_bump(pathless) == Blocked(f"config key {SEED_KEY} not found")
    assert plan_bump(replace(BASE, config=ConfigAt("", MASTER))) == Blocked(
        f"config key {SEED_KEY} not found"
    )
    assert not needs_changelog(replace(BASE, config=None))
    assert not needs_changelog(replace(BASE, config=ConfigAt(".github/configs/amd-master.yaml", None)))


def test_adopting_with_no_config_read_and_no_parent_known() -> None:
    facts = replace(
        ON_BUMP_BRANCH,
        last_own_sha=None,
        head=HeadCommit(HEAD, bump_subject(SEED_KEY, BUMPED_IMAGE), None),
        config=None,
    )
    assert plan_bump(facts) == Adopt(HEAD, "", None, "")


def test_a_pin_that_cannot_be_edited_records_the_editors_words() -> None:
    try:
        set_image(MASTER, SEED_KEY, "not an image")
    except RecipeError as exc:
        words = str(exc)
    else:  # pragma: no cover - the fixture guarantees the refusal
        raise AssertionError("set_image took an invalid image")
    assert words and words != "None"
    assert plan_bump(replace(BASE, image="not an image")) == Blocked(words)


def test_a_changelog_that_cannot_take_the_entry_records_why() -> None:
    try:
        append_changelog("version: 1\n", config_keys=[SEED_KEY], description=["x"], pr_link=PR_LINK)
    except RecipeError as exc:
        words = str(exc)
    else:  # pragma: no cover
        raise AssertionError("append_changelog took a mapping")
    assert words and words != "None"
    assert plan_bump(replace(BASE, changelog="version: 1\n")) == Blocked(words)


def test_missing_recipes_are_named_comma_separated_and_the_log_says_which_path() -> None:
    facts = replace(RECIPE_FACTS, recipes={}, missing_recipes=("a/one.yaml", "b/two.yaml"))
    plan, logs = _plan(facts)
    assert plan == Blocked(
        f"`{RECIPE_FACTS.key}` names srt-slurm recipe(s) the repo does not hold: a/one.yaml, b/two.yaml; "
        "fix the `CONFIG_FILE=` path(s) in the master config"
    )
    assert [e["why"] for e in logs] == ["a recipe of the key cannot take the pin"]


def test_a_multinode_commit_message_lists_its_recipes_and_the_entry_link() -> None:
    link = "https://github.com/SemiAnalysisAI/InferenceX/pull/2999"
    plan = plan_bump(replace(RECIPE_FACTS, entry_link=link))
    assert isinstance(plan, Commit) and RECIPE_PATH in plan.files
    assert plan.message == commit_message(
        RECIPE_FACTS.key, RECIPE_FACTS.image, list(RECIPE_FACTS.description), link, recipes=[RECIPE_PATH]
    )
    assert f"- {RECIPE_PATH}\n" in plan.message
    assert plan.message.rstrip("\n").endswith(f"pr-link: {link}")
    assert yaml.safe_load(plan.entry)[0]["pr-link"] == link


def test_commit_message_lists_the_recipes_it_was_given() -> None:
    message = commit_message(SEED_KEY, BUMPED_IMAGE, ["d"], None, recipes=["r/one.yaml", "r/two.yaml"])
    assert "- r/one.yaml\n- r/two.yaml\n" in message
    assert "2 个多节点" in message
    assert "srt-slurm" not in commit_message(SEED_KEY, BUMPED_IMAGE, ["d"], None)


def test_an_agentic_keys_commit_entry_carries_its_scenario_type() -> None:
    nvidia = fixture_text("nvidia-master.tail.head.yaml")
    key = next(k for k in yaml.safe_load(nvidia) if "agentic" in k)
    image = "lmsysorg/sglang:v9.9.9"
    facts = replace(BASE, key=key, image=image, config=ConfigAt(".github/configs/nvidia-master.yaml", nvidia))
    plan = plan_bump(facts)
    assert isinstance(plan, Commit), plan
    entry = yaml.safe_load(plan.entry)[0]
    assert entry["config-keys"] == [key]
    assert "agentic-coding" in entry["scenario-type"]
    assert plan.files["perf-changelog.yaml"].startswith(CHANGELOG)


def test_a_key_absent_or_not_a_mapping_needs_no_changelog_flags() -> None:
    assert changelog_flags_for(MASTER, "no-such-key") == NO_FLAGS
    assert changelog_flags_for("odd-key:\n  - a list, not a mapping\n", "odd-key") == NO_FLAGS
