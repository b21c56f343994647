"""What a bump does, decided from facts (pure), in the spirit of Renovate's ``shouldReuseExistingBranch``.

The bump flow (``app.flows.tracking.bump``) loads the facts: where it commits (the recipe PR's branch or
the key's bump branch) and that branch's head, what an earlier refused attempt said, sweepbot's
own last commit there, the head commit when someone else may have pushed, the master config and
the perf-changelog at that head. ``plan_bump(facts)`` returns one ``BumpPlan`` and logs why:

* ``Commit``: the pin edit and the changelog entry, as file contents and a commit message;
* ``Adopt``: the branch head is sweepbot's own bump commit whose record was rolled back; finish it;
* ``RefuseHumanPush``: someone pushed to the bump branch since sweepbot's last commit; never overwrite;
* ``AlreadyPinned``: the config already pins the image at that head;
* ``Blocked(reason)``: the key cannot be bumped (missing, unreadable pin, a changelog that cannot
  take the entry), or the same refusal still holds at the same head (``record=False``: no writes).

Also the pure texts of a bump: branch names, commit messages, the changelog fields it writes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import structlog

from app.core.githubtext import bump_commit_message
from app.core.recipes import (
    NO_FLAGS,
    SCENARIO_TYPES,
    EntryFlags,
    RecipeError,
    append_changelog,
    parse_master,
    set_image,
)
from app.core.recipes.master import scenario_kinds
from app.core.recipes.srtrecipe import set_container

log = structlog.get_logger(__name__)

BUMP_BRANCH_PREFIX = "sweepbot/bump/"
BUMP_PR_MARKER = "<!-- sweepbot:bump-pr -->"
BUMP_BLOCKED_MARKER = "<!-- sweepbot:bump-blocked -->"
SKIP_SWEEP = "[skip-sweep]"  # run-sweep.yml skips a PR's benchmark setup when the head commit says so
# Bumps that happened (a superseded bump happened too: its key was bumped by a newer one).
DONE_STATES = ("committed", "already", "superseded")

Mode = Literal["pr_branch", "bump_pr"]

# ====================================================================================== texts


def bump_branch(key: str) -> str:
    return f"{BUMP_BRANCH_PREFIX}{key}"


def bump_subject(key: str, image: str) -> str:
    return f"Bump {key} image to {image}"


def link_fix_subject(key: str, image: str) -> str:
    """Subject of the follow-up commit that writes the bump PR's own link into its changelog entry."""
    return f"Link the {key} bump to {image} in perf-changelog to its PR"


def canonical_pr_link(repo: str, number: int) -> str:
    """The only link the repo's changelog gate accepts for an entry merged with PR ``number``."""
    return f"https://github.com/{repo}/pull/{int(number)}"


def without_skip_sweep(subject: str) -> str:
    return subject.removesuffix(f" {SKIP_SWEEP}")


def commit_message(
    key: str,
    image: str,
    description: list[str],
    pr_link: str | None,
    *,
    skip_sweep: bool = False,
    recipes: Sequence[str] = (),
) -> str:
    """Subject (English), the changelog's description lines, the recipes it edits, the Chinese
    translation (the repo's authoring policy: app.core.githubtext), and the changelog fields as
    trailers.

    ``skip_sweep`` (sweep mode ``dispatch``): the subject ends in ``[skip-sweep]``, so the repo's
    own run-sweep.yml does not run the sweep the bot's queue already runs.
    """
    subject = bump_subject(key, image) + (f" {SKIP_SWEEP}" if skip_sweep else "")
    return bump_commit_message(
        subject=subject,
        key=key,
        image=image,
        description=description,
        pr_link=pr_link or "XXX",
        recipes=recipes,
    )


def changelog_flags_for(master_text: str, key: str) -> EntryFlags:
    """Changelog fields a bump of ``key`` needs: ``scenario-type`` when the key has scenarios other
    than plain fixed-seq-len (the repo's gate plans only fixed-seq-len without it; 67 entries at
    InferenceX HEAD carry it), listing the key's scenario kinds in the repo's order."""
    entry = parse_master(master_text).get(key)
    kinds = scenario_kinds(entry) if isinstance(entry, dict) else frozenset()
    if not kinds or kinds == {"fixed-seq-len"}:
        return NO_FLAGS
    return EntryFlags(scenario_type=tuple(k for k in SCENARIO_TYPES if k in kinds))


def first_line(message: str) -> str:
    return without_skip_sweep(message.split("\n", 1)[0])


# ====================================================================================== facts


@dataclass(frozen=True)
class Refusal:
    """An earlier blocked attempt of this bump: the head it saw and why it stopped."""

    branch: str | None
    start_sha: str | None
    reason: str


@dataclass(frozen=True)
class HeadCommit:
    """The bump branch's head commit as judged (sweepbot's link fix is looked through to its parent)."""

    sha: str
    subject: str
    parent: str | None


@dataclass(frozen=True)
class ConfigAt:
    """The master config holding the key at the branch head (``text`` None: not found; ``reason``)."""

    path: str | None
    text: str | None
    reason: str | None = None


@dataclass(frozen=True)
class BumpFacts:
    repo: str
    key: str
    image: str
    mode: Mode
    branch: str
    start_sha: str  # the commit the bump builds on (the branch head, or the default branch's)
    exists: bool  # the branch exists (the ref is updated, not created)
    refusal: Refusal | None = None
    last_own_sha: str | None = None  # sweepbot's last commit on this branch, per its records
    head: HeadCommit | None = None  # loaded when someone else may have pushed (must_inspect_head)
    config: ConfigAt | None = None
    changelog_path: str = "perf-changelog.yaml"
    changelog: str = ""  # the perf-changelog at start_sha ("" when absent)
    changelog_before: str | None = None  # Adopt: the perf-changelog at the head commit's parent
    previous_entry: str | None = None  # the open bump PR's earlier entry, replaced in place
    description: Sequence[str] = field(default_factory=tuple)
    entry_link: str | None = None  # the pr-link the entry gets (None: XXX until the PR exists)
    skip_sweep: bool = False
    # a multi-node key's srt-slurm recipes in the repo at start_sha ({path: text}), whose
    # `model.container` the same commit sets to the pin; and those named by a repo path but absent
    recipes: Mapping[str, str] = field(default_factory=dict)
    missing_recipes: Sequence[str] = ()


def refusal_holds(facts: BumpFacts) -> bool:
    """The earlier refusal was made at this very branch head: its reason still holds."""
    r = facts.refusal
    return r is not None and r.start_sha == facts.start_sha and r.branch == facts.branch


def must_inspect_head(facts: BumpFacts) -> bool:
    """The bump branch exists and its head is not sweepbot's last recorded commit: read the head
    commit to tell sweepbot's own unrecorded commit from a human push."""
    return facts.exists and facts.mode == "bump_pr" and facts.last_own_sha != facts.start_sha


def needs_changelog(facts: BumpFacts) -> bool:
    """The pin edit changes the config, so the commit needs the perf-changelog (read it only then)."""
    cfg = facts.config
    if cfg is None or cfg.text is None or not cfg.path:
        return False
    try:
        return set_image(cfg.text, facts.key, facts.image) != cfg.text
    except RecipeError:
        return False


def head_is_own_bump(facts: BumpFacts) -> bool:
    return facts.head is not None and facts.head.subject == bump_subject(facts.key, facts.image)


# ====================================================================================== plans


@dataclass(frozen=True)
class Commit:
    files: dict[str, str]  # path -> new content (the master config and the perf-changelog)
    message: str
    entry: str  # the changelog entry appended
    path: str  # the master config's path
    kind: Literal["commit"] = "commit"


@dataclass(frozen=True)
class Adopt:
    sha: str  # the head commit: sweepbot's own bump
    parent: str  # what it was built on
    path: str | None
    entry: str
    kind: Literal["adopt"] = "adopt"


@dataclass(frozen=True)
class RefuseHumanPush:
    reason: str
    kind: Literal["refuse"] = "refuse"


@dataclass(frozen=True)
class AlreadyPinned:
    path: str | None
    kind: Literal["already"] = "already"


@dataclass(frozen=True)
class Blocked:
    reason: str
    record: bool = True  # False: the same refusal at the same head, nothing to write or say again
    kind: Literal["blocked"] = "blocked"


BumpPlan = Commit | Adopt | RefuseHumanPush | AlreadyPinned | Blocked


def _said(plan: BumpPlan, facts: BumpFacts, why: str) -> BumpPlan:
    log.info(
        "bump_plan",
        plan=plan.kind,
        repo=facts.repo,
        key=facts.key,
        image=facts.image,
        branch=facts.branch,
        start=facts.start_sha[:12],
        why=why,
    )
    return plan


def refusal_reason(facts: BumpFacts) -> str:
    return (
        f"someone pushed to `{facts.branch}` since sweepbot's last commit "
        f"(its head is now `{facts.start_sha[:7]}`); sweepbot will not overwrite it. Merge or close the "
        f"bump PR and delete `{facts.branch}` to let sweepbot bump `{facts.key}` to `{facts.image}` again"
    )


def _adopted_entry(facts: BumpFacts) -> str:
    before, after = facts.changelog_before, facts.changelog
    return after[len(before) :] if before and after and after.startswith(before) else ""


def recipe_edits(facts: BumpFacts) -> tuple[dict[str, str], str | None]:
    """The key's srt-slurm recipes with ``model.container`` set to the pin (AGENTS.md: it must equal
    ``image``), only those that change; or why the bump cannot keep them equal."""
    if facts.missing_recipes:
        return {}, (
            f"`{facts.key}` names srt-slurm recipe(s) the repo does not hold: "
            f"{', '.join(facts.missing_recipes)}; fix the `CONFIG_FILE=` path(s) in the master config"
        )
    edited: dict[str, str] = {}
    for path, text in facts.recipes.items():
        try:
            new = set_container(text, facts.image)
        except RecipeError as exc:
            return {}, f"{path}: {exc}"
        if new != text:
            edited[path] = new
    return edited, None


def plan_bump(facts: BumpFacts) -> BumpPlan:
    """The one bump decision: every path returns a plan and logs why."""
    if facts.refusal is not None and refusal_holds(facts):
        return _said(
            Blocked(facts.refusal.reason, record=False), facts, "the earlier refusal was at this same head"
        )
    if must_inspect_head(facts):
        if head_is_own_bump(facts) and facts.head is not None:
            parent = facts.head.parent or ""
            path = facts.config.path if facts.config else None
            plan = Adopt(facts.start_sha, parent, path, _adopted_entry(facts))
            return _said(plan, facts, "the head is sweepbot's own bump commit whose record was lost")
        # The bump branch is sweepbot's alone; a human commit on it is never overwritten.
        return _said(RefuseHumanPush(refusal_reason(facts)), facts, "the head is not sweepbot's commit")
    return _plan_edit(facts)


def _plan_edit(facts: BumpFacts) -> BumpPlan:
    cfg = facts.config
    if cfg is None or cfg.text is None or not cfg.path:
        reason = (cfg.reason if cfg else None) or f"config key {facts.key} not found"
        return _said(Blocked(reason), facts, "the key's master config was not found at the head")
    try:
        new_text = set_image(cfg.text, facts.key, facts.image)
    except RecipeError as exc:
        return _said(Blocked(str(exc)), facts, "the pin cannot be edited")
    if new_text == cfg.text:
        return _said(AlreadyPinned(cfg.path), facts, "the config already pins the image at the head")
    recipes, problem = recipe_edits(facts)
    if problem is not None:
        return _said(Blocked(problem), facts, "a recipe of the key cannot take the pin")
    old = facts.changelog
    if facts.previous_entry and old.endswith(facts.previous_entry):
        old = old[: len(old) - len(facts.previous_entry)]  # the open bump PR carries one entry
    description = list(facts.description)
    try:
        new_changelog = append_changelog(
            old,
            config_keys=[facts.key],
            description=description,
            pr_link=facts.entry_link,
            flags=changelog_flags_for(cfg.text, facts.key),
        )
    except RecipeError as exc:
        return _said(Blocked(str(exc)), facts, "the perf-changelog cannot take the entry")
    message = commit_message(
        facts.key,
        facts.image,
        description,
        facts.entry_link,
        skip_sweep=facts.skip_sweep,
        recipes=sorted(recipes),
    )
    plan = Commit(
        files={cfg.path: new_text, **recipes, facts.changelog_path: new_changelog},
        message=message,
        entry=new_changelog[len(old) :],
        path=cfg.path,
    )
    return _said(plan, facts, "the pin changes: one commit with the config line and the changelog entry")
