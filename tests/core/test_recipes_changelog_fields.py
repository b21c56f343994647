"""Every changelog field the repo's gate knows, the whitespace-only last line, and the XXX link fix.

Checked against the real perf-changelog at InferenceX HEAD (tests/fixtures/inferencex/
perf-changelog.head-tail.yaml): its entries carry `scenario-type` and `append-only`, and it has
whitespace-only lines between entries, so some revisions end in one.
"""

from __future__ import annotations

import pytest
import yaml

from app.core.recipes import (
    PENDING_PR_LINK,
    ChangelogError,
    EntryFlags,
    append_changelog,
    replace_pending_link,
)
from tests.recipe_helpers import fixture_text

LINK = "https://github.com/SemiAnalysisAI/InferenceX/pull/2710"
EVERY_FIELD = EntryFlags(
    scenario_type=("fixed-seq-len", "agentic-coding"),
    evals_only=True,
    all_evals=True,
    eval_min_prefill_ep=8,
)
# The gate forbids mixing these with eval selection, so they get their own entry.
THROUGHPUT_ONLY = EntryFlags(scenario_type=("agentic-coding",), no_evals=True, append_only=True)


def _revisions_ending_in_whitespace_only_line(text: str) -> list[str]:
    """Every prefix of the real file that ends just after a whitespace-only line."""
    out, pos = [], 0
    for line in text.splitlines(keepends=True):
        pos += len(line)
        if line.strip() == "" and line != "\n":
            out.append(text[:pos])
    return out


def _entry_prefixes(text: str) -> list[str]:
    """Every prefix of the real file that ends where an entry ends (before the next one starts)."""
    cuts = [i for i in range(1, len(text)) if text.startswith("- config-keys:", i) and text[i - 1] == "\n"]
    return [text[:cut] for cut in cuts] + [text]


def _empty_lines_before_last_entry(text: str) -> int:
    lines = text.splitlines()
    start = max(i for i, line in enumerate(lines) if line.startswith("- config-keys:"))
    count = 0
    for line in reversed(lines[:start]):
        if line != "":
            break
        count += 1
    return count


def test_the_real_tail_has_whitespace_only_last_lines_to_test() -> None:
    real = fixture_text("perf-changelog.head-tail.yaml")
    revisions = _revisions_ending_in_whitespace_only_line(real)
    assert len(revisions) == 4
    assert all(r.splitlines()[-1] == "  " for r in revisions)


@pytest.mark.parametrize("flags", [EVERY_FIELD, THROUGHPUT_ONLY], ids=["eval-fields", "no-evals-append-only"])
def test_every_field_on_a_file_ending_in_a_whitespace_only_line(flags: EntryFlags) -> None:
    real = fixture_text("perf-changelog.head-tail.yaml")
    for old in _revisions_ending_in_whitespace_only_line(real) + _entry_prefixes(real):
        keys = ["dsv4-fp4-mi355x-atom-agentic-mtp", "gptoss*"]
        new = append_changelog(
            old, config_keys=keys, description=["Bump image", 'say "hi"'], pr_link=None, flags=flags
        )
        assert new.startswith(old)  # no existing byte deleted or changed
        added = new[len(old) :]
        assert all(line == line.rstrip() for line in added.splitlines())  # `git diff --check` clean
        assert _empty_lines_before_last_entry(new) == 1
        before, after = yaml.safe_load(old), yaml.safe_load(new)
        assert after[:-1] == before
        assert after[-1] == {
            "config-keys": keys,
            "description": ["Bump image", 'say "hi"'],
            "pr-link": PENDING_PR_LINK,
            **flags.as_fields(),
        }
        # The gate counts entries by their `- config-keys:` lines.
        assert sum(line.startswith("- config-keys:") for line in new.splitlines()) == len(after)


def test_fields_are_written_in_the_repos_order_and_only_when_set() -> None:
    new = append_changelog("", config_keys=["k"], description=["d"], pr_link=LINK, flags=EVERY_FIELD)
    assert new == (
        "- config-keys:\n    - k\n  scenario-type:\n    - fixed-seq-len\n    - agentic-coding\n"
        f'  description:\n    - "d"\n  pr-link: {LINK}\n  evals-only: true\n  all-evals: true\n'
        "  eval-min-prefill-ep: 8\n"
    )
    plain = append_changelog("", config_keys=["k"], description=["d"], pr_link=LINK)
    assert set(yaml.safe_load(plain)[0]) == {"config-keys", "description", "pr-link"}


def test_the_repos_own_entries_round_trip_through_the_same_flags() -> None:
    # Each real entry, re-rendered from its fields, parses back to itself.
    for entry in yaml.safe_load(fixture_text("perf-changelog.head-tail.yaml")):
        flags = EntryFlags(
            scenario_type=tuple(entry.get("scenario-type") or ()),
            append_only=bool(entry.get("append-only")),
        )
        new = append_changelog(
            "", config_keys=entry["config-keys"], description=entry["description"],
            pr_link=entry["pr-link"], flags=flags,
        )  # fmt: skip
        assert yaml.safe_load(new) == [entry]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (EntryFlags(scenario_type=("agentic",)), "not one the repo knows"),
        (EntryFlags(scenario_type=("agentic-coding", "agentic-coding")), "twice"),
        (EntryFlags(no_evals=True, evals_only=True), "no-evals cannot be combined"),
        (EntryFlags(append_only=True, all_evals=True), "append-only cannot be combined"),
        (EntryFlags(append_only=True, eval_min_prefill_ep=4), "append-only cannot be combined"),
        (EntryFlags(eval_min_prefill_ep=0), ">= 1"),
    ],
)
def test_entries_the_gate_would_reject_are_refused(flags: EntryFlags, message: str) -> None:
    with pytest.raises(ChangelogError, match=message):
        append_changelog("", config_keys=["k"], description=["d"], pr_link=None, flags=flags)


@pytest.mark.parametrize("link", ["XXX", "https://github.com/SemiAnalysisAI/InferenceX/pull/XXX"])
def test_the_placeholder_links_the_gate_accepts_are_accepted(link: str) -> None:
    new = append_changelog("", config_keys=["k"], description=["d"], pr_link=link)
    assert yaml.safe_load(new)[-1]["pr-link"] == link
    default = append_changelog("", config_keys=["k"], description=["d"], pr_link=None)
    assert (new == default) is (link == "XXX")  # no link given is written as the bare placeholder


def test_pending_link_is_fixed_in_place_and_only_that_line_changes() -> None:
    old = fixture_text("perf-changelog.head-tail.yaml")
    with_xxx = append_changelog(
        old, config_keys=["k"], description=["d"], pr_link=None, flags=THROUGHPUT_ONLY
    )
    entry = with_xxx[len(old) :]
    fixed, new_entry = replace_pending_link(with_xxx, entry, LINK)
    assert fixed.startswith(old) and fixed == old + new_entry
    changed = [(a, b) for a, b in zip(with_xxx.splitlines(), fixed.splitlines(), strict=True) if a != b]
    assert changed == [("  pr-link: XXX", f"  pr-link: {LINK}")]
    assert yaml.safe_load(fixed)[-1]["pr-link"] == LINK
    with pytest.raises(ChangelogError, match="no pending"):
        replace_pending_link(fixed, new_entry, LINK)
    with pytest.raises(ChangelogError, match="not a PR link"):
        replace_pending_link(with_xxx, entry, "XXX")


def test_a_bump_of_an_agentic_key_writes_scenario_type_as_the_repo_does() -> None:
    from app.core.recipes import NO_FLAGS, parse_master
    from app.flows.tracking.bump import changelog_flags_for

    text = fixture_text("amd-master.head.yaml")
    real = yaml.safe_load(fixture_text("perf-changelog.head-tail.yaml"))
    real_types = {k: tuple(e.get("scenario-type") or ()) for e in real for k in e["config-keys"]}
    seen = 0
    for key, entry in parse_master(text).items():
        flags = changelog_flags_for(text, key)
        if "agentic-coding" in entry["scenarios"]:
            assert flags.scenario_type == ("agentic-coding",), key
        else:
            assert flags == NO_FLAGS, key
        if key in real_types:  # the repo's own entries for the same key agree
            assert flags.scenario_type == real_types[key], key
            seen += 1
    assert seen >= 1
