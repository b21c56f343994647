"""The readiness decision path by path, as the PR and the dashboard read it (app.core.readiness):
every action with its exact reason and log line, the containment search's probes, and the
one-line explanation's order of precedence."""

from __future__ import annotations

from typing import Any

import pytest
from structlog.testing import capture_logs

from app.core.readiness import (
    Dep,
    DepView,
    Readiness,
    archived_key_reason,
    choose_nightly,
    decide_readiness,
    explain_readiness,
    is_contained,
    search_containing,
    stop_if_archived,
)

REPO = "rocm/vllm-dev"
MERGED = DepView("vllm-project/vllm#1", Dep.MERGED, merge_sha="abc")
MERGED2 = DepView("vllm-project/vllm#2", Dep.MERGED, merge_sha="def")


def decide(deps: list[DepView], **kw: Any) -> Readiness:
    base: dict[str, Any] = {
        "key": "dsr1-fp8-mi355x-vllm",
        "image_repo": REPO,
        "chosen_tag": "nightly-7",
        "pinned_image": f"{REPO}:nightly-1",
        "pinned_contains": False,
        "bumped_image": None,
    }
    return decide_readiness(deps=deps, **(base | kw))


C1 = DepView("a#1", Dep.CLOSED)
C2 = DepView("b#2", Dep.CLOSED)
M1 = DepView("c#3", Dep.MISSING)
M2 = DepView("d#4", Dep.MISSING)


@pytest.mark.parametrize(
    ("deps", "kw", "want"),
    [
        (
            [MERGED],
            {"bumped_image": f"{REPO}:n5"},
            Readiness("noop", f"already bumped to {REPO}:n5; a bump happens once"),
        ),
        (
            [MERGED],
            {"bumped_image": f"{REPO}:n5", "bumped_covers": True},
            Readiness("noop", f"already bumped to {REPO}:n5; a bump happens once"),
        ),
        (
            [MERGED],
            {"bumped_image": f"{REPO}:n5", "bumped_covers": False},
            Readiness(
                "bump", f"every dependency is merged and contained in {REPO}:nightly-7", f"{REPO}:nightly-7"
            ),
        ),
        (
            [MERGED],
            {"bumped_image": ""},
            Readiness(
                "bump", f"every dependency is merged and contained in {REPO}:nightly-7", f"{REPO}:nightly-7"
            ),
        ),
        ([], {}, Readiness("noop", "no upstream dependencies to wait for")),
        (
            [MERGED],
            {"config_problem": "config key k is not in any master config"},
            Readiness("blocked", "config key k is not in any master config"),
        ),
        (
            [MERGED, C1, M1, C2],
            {},
            Readiness(
                "blocked",
                "a#1, b#2 closed without merging; it will never ship. If the recipe no longer "
                "needs it, comment `/depends-on drop a#1`, `/depends-on drop b#2`",
            ),
        ),
        (
            [MERGED, M1, M2, DepView("e#5", Dep.OPEN)],
            {},
            Readiness(
                "blocked",
                "c#3, d#4 does not exist (GitHub answers 404 Not Found): fix the "
                "reference in the PR body or comment `/depends-on drop c#3 d#4`",
            ),
        ),
        (
            [MERGED, DepView("e#5", Dep.OPEN), DepView("f#6", Dep.UNKNOWN)],
            {},
            Readiness("wait", "waiting for e#5, f#6 to merge"),
        ),
        (
            [MERGED, DepView("g#7", Dep.MERGED), DepView("h#8", Dep.MERGED, merge_sha="")],
            {},
            Readiness("wait", "g#7, h#8 merged but GitHub has not reported the merge commit yet"),
        ),
        (
            [MERGED],
            {"image_repo": None},
            Readiness("blocked", "config key dsr1-fp8-mi355x-vllm has no image pin to bump"),
        ),
        (
            [MERGED],
            {"image_repo": ""},
            Readiness("blocked", "config key dsr1-fp8-mi355x-vllm has no image pin to bump"),
        ),
        (
            [MERGED],
            {"pinned_contains": True},
            Readiness("noop", f"the pinned image {REPO}:nightly-1 already contains every dependency"),
        ),
        (
            [MERGED],
            {"pinned_contains": None},
            Readiness(
                "bump", f"every dependency is merged and contained in {REPO}:nightly-7", f"{REPO}:nightly-7"
            ),
        ),
        (
            [MERGED],
            {"chosen_tag": None, "registry_error": "x" * 250},
            Readiness(
                "wait",
                f"the registry of {REPO} cannot be read ({'x' * 200}), so no "
                f"nightly can be chosen; checking again at the next poll",
            ),
        ),
        (
            [MERGED],
            {"chosen_tag": "", "registry_error": None},
            Readiness(
                "wait",
                f"no nightly of {REPO} contains every merge commit yet; checking again at the next poll",
            ),
        ),
        (
            [MERGED],
            {"registry_error": "boom"},
            Readiness(
                "bump", f"every dependency is merged and contained in {REPO}:nightly-7", f"{REPO}:nightly-7"
            ),
        ),
        (
            [MERGED, MERGED2],
            {"pinned_image": f"{REPO}:nightly-7"},
            Readiness("noop", f"the pin is already {REPO}:nightly-7"),
        ),
    ],
)
def test_decide_readiness(deps: list[DepView], kw: dict[str, Any], want: Readiness) -> None:
    with capture_logs() as logs:
        got = decide(deps, **kw)
    assert got == want
    assert logs == [
        {
            "event": "readiness",
            "log_level": "info",
            "key": "dsr1-fp8-mi355x-vllm",
            "action": want.action,
            "reason": want.reason,
            "image": want.image,
        }
    ]


@pytest.mark.parametrize(
    ("status", "contained"), [("ahead", True), ("identical", True), ("behind", False), ("diverged", False)]
)
def test_is_contained(status: str, contained: bool) -> None:
    assert is_contained(status) is contained


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 9, 16, 17])
@pytest.mark.parametrize("shipped_at", [0, 1, 4, 7, 15, 16])
def test_search_containing_finds_the_first_with_at_most_1_plus_ceil_log2_n_probes(
    n: int, shipped_at: int
) -> None:
    asked: list[int] = []
    bound = 1 + (n - 1).bit_length()

    def contains(i: int) -> bool:
        asked.append(i)
        # fail at the first probe past the bound: a search that loops forever fails here, at once
        if len(asked) > bound:
            pytest.fail(f"probe {len(asked)} of a {n}-candidate search: more than 1 + ceil(log2 n) = {bound}")
        return i >= shipped_at

    found = search_containing(n, contains)
    if shipped_at >= n:
        assert (found.newest, found.first, found.probes) == (None, None, 1) and asked == [n - 1]
        return
    assert (found.newest, found.first) == (n - 1, shipped_at)
    assert asked[0] == n - 1 and found.probes == len(asked)
    assert found.probes <= bound


def test_search_containing_of_nothing_probes_nothing() -> None:
    for n in (0, -1):
        assert search_containing(n, lambda i: pytest.fail("probed")) == search_containing(0, lambda i: True)
        assert search_containing(n, lambda i: True).probes == 0


def test_choose_nightly_logs_why() -> None:
    tags = [("n0", "c0"), ("n1", "c1"), ("n2", "c2")]
    with capture_logs() as logs:
        got = choose_nightly(tags, lambda c: c != "c0")
        none = choose_nightly(tags, lambda c: False)
    assert (got.chosen, got.first, got.probes) == ("n2", "n1", 3)
    assert (none.chosen, none.first, none.probes) == (None, None, 1)
    assert logs == [
        {
            "event": "nightly_choice",
            "log_level": "info",
            "candidates": 3,
            "chosen": "n2",
            "first": "n1",
            "probes": 3,
            "why": "the newest nightly containing every merge commit",
        },
        {
            "event": "nightly_choice",
            "log_level": "info",
            "candidates": 3,
            "chosen": None,
            "first": None,
            "probes": 1,
            "why": "no nightly contains them all",
        },
    ]


ARCHIVED = "configs/deprecated/amd-master.yaml"


def test_archived_key_reason_and_stop() -> None:
    assert archived_key_reason("k", ARCHIVED) == (
        "config key k moved to `configs/deprecated/amd-master.yaml`, which sweep generation no longer reads "
        "(its scenario was deprecated), so there is no pin to bump; sweepbot stopped watching it. Move the "
        "key back into an active master config (a push to this PR re-checks it) or watch a current key"
    )
    assert archived_key_reason("k", "configs/amd-master.yaml") is None
    assert archived_key_reason("k", None) is None and archived_key_reason("k", "") is None
    blocked = Readiness("blocked", "config key k is not in any active master config")
    with capture_logs() as logs:
        got = stop_if_archived(blocked, key="k", path=ARCHIVED, config_problem="gone", bumped=False)
    assert got == Readiness("stopped", archived_key_reason("k", ARCHIVED) or "")
    assert logs == [
        {
            "event": "watch_stopped_archived",
            "log_level": "info",
            "key": "k",
            "path": ARCHIVED,
            "reason": got.reason,
        }
    ]
    assert stop_if_archived(blocked, key="k", path=ARCHIVED, config_problem=None, bumped=False) is blocked
    assert stop_if_archived(blocked, key="k", path=ARCHIVED, config_problem="", bumped=False) is blocked


def explain(deps: list[DepView], reason: str | None = None, **kw: Any) -> str | None:
    return explain_readiness(
        **({"watch_state": "watching", "reason": reason, "deps": deps, "bump_state": None} | kw)
    )


def test_explain_readiness_in_its_order() -> None:
    closed, closed2 = DepView("a#1", Dep.CLOSED), DepView("b#2", Dep.CLOSED)
    dropped = DepView("z#9", Dep.CLOSED, dropped=True)
    gone, gone2 = DepView("c#3", Dep.MISSING), DepView("d#4", Dep.MISSING)
    opened, unknown = DepView("e#5", Dep.OPEN), DepView("f#6", Dep.UNKNOWN)
    shipped = DepView("g#7", Dep.MERGED, merge_sha="x", contained_in="n3")
    unshipped, unshipped2 = DepView("h#8", Dep.MERGED, merge_sha="y"), DepView("i#9", Dep.MERGED)
    assert explain([closed], bump_state="committed") is None
    assert explain([closed], bump_state="already") is None
    assert explain([closed], "moved", watch_state="archived") == "moved"
    assert explain([closed, closed2, gone], "r", watch_state="archived", bump_state="failed") == "r"
    assert explain([closed, gone, closed2], watch_state="archived") == (
        "a#1, b#2 closed without merge: it can never ship; drop it with `/depends-on drop a#1 b#2`"
    )
    assert explain([dropped, gone, opened, gone2]) == "c#3, d#4 does not exist (GitHub answers 404 Not Found)"
    assert explain([opened, shipped, unknown]) == "waiting for e#5 (open), f#6 (unknown) to merge"
    assert (
        explain([unshipped, shipped, unshipped2], "stored") == "merged, but no nightly contains h#8, i#9 yet"
    )
    assert explain([shipped], "stored reason") == "stored reason"
    assert explain([dropped]) == "no dependencies to wait for"
    assert explain([]) == "no dependencies to wait for"
    assert explain([shipped, dropped]) == "every dependency shipped; the bump happens at the next check"
