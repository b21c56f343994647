"""The pure readiness pieces beside decide_readiness: the nightly choice, stopping on an archived
key, and the one readiness explanation the dashboard shows (explain_readiness)."""

from __future__ import annotations

from typing import Any

import pytest
from structlog.testing import capture_logs

from app.core.readiness import (
    ARCHIVED_WATCH,
    Dep,
    DepView,
    Readiness,
    choose_nightly,
    decide_readiness,
    explain_readiness,
    stop_if_archived,
)
from app.models.tracking import DepState, WatchState

A, B = "vllm-project/vllm#1", "vllm-project/vllm#2"


def test_the_core_dependency_states_are_the_stored_ones() -> None:
    # app.core cannot import app.models: the same values, spelled twice, checked here.
    assert (Dep.OPEN, Dep.MERGED, Dep.CLOSED, Dep.UNKNOWN, Dep.MISSING) == (
        DepState.OPEN,
        DepState.MERGED,
        DepState.CLOSED,
        DepState.UNKNOWN,
        DepState.MISSING,
    )
    assert ARCHIVED_WATCH == WatchState.ARCHIVED


def test_choose_nightly_takes_the_newest_containing_and_says_where_it_first_shipped() -> None:
    tags = [(f"nightly-{i}", f"c{i}") for i in range(10)]
    with capture_logs() as logs:
        choice = choose_nightly(tags, lambda commit: int(commit[1:]) >= 6)
    assert (choice.chosen, choice.first) == ("nightly-9", "nightly-6")
    assert choice.probes <= 1 + 4
    assert [e["why"] for e in logs if e["event"] == "nightly_choice"] == [
        "the newest nightly containing every merge commit"
    ]
    none = choose_nightly(tags, lambda commit: False)
    assert (none.chosen, none.first, none.probes) == (None, None, 1)
    assert choose_nightly([], lambda commit: True).chosen is None


def test_a_config_problem_on_an_archived_key_stops_the_watch_unless_it_was_bumped() -> None:
    blocked = Readiness("blocked", "config key k is not in any active master config")
    path = "configs/deprecated/amd-minimaxm3-8k1k-master.yaml"
    stopped = stop_if_archived(blocked, key="k", path=path, config_problem=blocked.reason, bumped=False)
    assert stopped.action == "stopped" and path in stopped.reason
    assert (
        stop_if_archived(blocked, key="k", path=path, config_problem=blocked.reason, bumped=True) == blocked
    )
    assert stop_if_archived(
        blocked, key="k", path="configs/amd-master.yaml", config_problem="x", bumped=False
    ) == (blocked)
    noop = Readiness("noop", "no upstream dependencies to wait for")
    assert stop_if_archived(noop, key="k", path=path, config_problem=None, bumped=False) == noop


EXPLAIN = [
    ("a bump happened", dict(bump_state="committed"), [DepView(A, Dep.OPEN)], None),
    ("already pinned", dict(bump_state="already"), [], None),
    (
        "archived key",
        dict(watch_state="archived", reason="moved to configs/deprecated/x.yaml"),
        [DepView(A, Dep.OPEN)],
        "moved to configs/deprecated/x.yaml",
    ),
    (
        "closed dependency",
        {},
        [DepView(A, Dep.CLOSED), DepView(B, Dep.OPEN)],
        f"{A} closed without merge: it can never ship; drop it with `/depends-on drop {A}`",
    ),
    (
        "open dependency",
        {},
        [DepView(A, Dep.OPEN), DepView(B, Dep.UNKNOWN)],
        f"waiting for {A} (open), {B} (unknown) to merge",
    ),
    ("dropped ones do not count", {}, [DepView(A, Dep.CLOSED, dropped=True)], "no dependencies to wait for"),
    (
        "merged, in no nightly",
        {},
        [DepView(A, Dep.MERGED, "m1", contained_in="nightly-x"), DepView(B, Dep.MERGED, "m2")],
        f"merged, but no nightly contains {B} yet",
    ),
    (
        "shipped, the stored reason says what next",
        dict(reason="the pin is already x"),
        [DepView(A, Dep.MERGED, "m1", contained_in="n")],
        "the pin is already x",
    ),
    (
        "shipped, no reason yet",
        {},
        [DepView(A, Dep.MERGED, "m1", contained_in="n")],
        "every dependency shipped; the bump happens at the next check",
    ),
    (
        "a blocked bump explains itself",
        dict(bump_state="blocked", reason="someone pushed"),
        [DepView(A, Dep.MERGED, "m", contained_in="n")],
        "someone pushed",
    ),
]


@pytest.mark.parametrize(("name", "kw", "deps", "want"), EXPLAIN, ids=[row[0] for row in EXPLAIN])
def test_explain_readiness(name: str, kw: dict[str, str], deps: list[DepView], want: str | None) -> None:
    assert _explain(deps, **kw) == want, name


def _explain(
    deps: list[DepView],
    *,
    watch_state: str = "waiting",
    reason: str | None = None,
    bump_state: str | None = None,
) -> str | None:
    """explain_readiness for a waiting watch with no stored reason and no bump, but what a row sets."""
    return explain_readiness(watch_state=watch_state, reason=reason, deps=deps, bump_state=bump_state)


_MERGED = [DepView(A, Dep.MERGED, "abc1234", None)]
_BASE: dict[str, Any] = dict(
    key="k", image_repo="vllm/vllm-openai-rocm", pinned_image="vllm/vllm-openai-rocm:old"
)


def test_a_dependency_that_does_not_exist_blocks_and_says_how_to_fix_it() -> None:
    deps = [DepView(A, Dep.OPEN, None, None), DepView(B, Dep.MISSING, None, None)]
    got = decide_readiness(deps=deps, chosen_tag=None, pinned_contains=None, bumped_image=None, **_BASE)
    assert got.action == "blocked"
    assert got.reason.startswith(f"{B} does not exist (GitHub answers 404 Not Found)")
    assert f"`/depends-on drop {B}`" in got.reason
    said = explain_readiness(watch_state="blocked", reason=got.reason, deps=deps, bump_state=None)
    assert said == f"{B} does not exist (GitHub answers 404 Not Found)"


def test_an_unreachable_registry_is_not_called_no_nightly_yet() -> None:
    kw: dict[str, Any] = dict(
        deps=_MERGED, chosen_tag=None, pinned_contains=False, bumped_image=None, **_BASE
    )
    down = decide_readiness(registry_error="connect: refused", **kw)
    assert down.action == "wait" and "cannot be read (connect: refused)" in down.reason
    up = decide_readiness(**kw)
    assert up.reason.startswith("no nightly of vllm/vllm-openai-rocm contains every merge commit yet")
