"""The bump's small texts (app.core.bumpplan): the changelog gate's only accepted PR link, the
commit subject with and without ``[skip-sweep]`` (run-sweep.yml reads the head commit's subject),
and the first line a PR title takes from a message."""

from __future__ import annotations

from app.core.bumpplan import (
    SKIP_SWEEP,
    bump_subject,
    canonical_pr_link,
    commit_message,
    first_line,
    without_skip_sweep,
)

KEY, IMAGE = "dsr1-fp8-mi355x-vllm", "rocm/vllm-dev:nightly-20261201"


def test_the_canonical_pr_link() -> None:
    assert (
        canonical_pr_link("SemiAnalysisAI/InferenceX", 1234)
        == "https://github.com/SemiAnalysisAI/InferenceX/pull/1234"
    )


def test_skip_sweep_only_when_asked_and_only_as_the_subjects_suffix() -> None:
    subject = bump_subject(KEY, IMAGE)
    assert commit_message(KEY, IMAGE, ["d"], None).split("\n", 1)[0] == subject
    skipped = commit_message(KEY, IMAGE, ["d"], None, skip_sweep=True)
    assert skipped.split("\n", 1)[0] == f"{subject} {SKIP_SWEEP}"
    assert first_line(skipped) == subject
    assert without_skip_sweep(f"{subject} {SKIP_SWEEP}") == subject
    assert without_skip_sweep(f"{SKIP_SWEEP} {subject}") == f"{SKIP_SWEEP} {subject}"
    assert without_skip_sweep(f"{subject}{SKIP_SWEEP}") == f"{subject}{SKIP_SWEEP}"


def test_first_line() -> None:
    assert first_line("subject\nbody\nmore") == "subject"
    assert first_line("only") == "only"
    assert first_line("") == ""
