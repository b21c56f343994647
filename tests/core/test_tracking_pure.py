"""Pure pieces of tracking: dependency references, the containment search, readiness, the status text."""

from __future__ import annotations

import math
from functools import partial
from typing import Any

import pytest

from app.flows.tracking.watches import (
    DepRef,
    DepView,
    WatchView,
    decide_readiness,
    parse_config_keys,
    parse_dependency_refs,
    parse_refs_list,
    render_status,
    search_containing,
)

V = "vllm-project/vllm"


def test_refs_in_the_seed_body_and_variants() -> None:
    body = (
        "Intro mentioning vllm-project/vllm#1 in prose is not a dependency.\n\n"
        "requires vllm-project/vllm#47269\n"
        "Depends-On: vllm-project/vllm#47270\n"
        "depends on https://github.com/vllm-project/vllm/pull/47271 and vllm-project/vllm#47272, "
        "https://github.com/ROCm/aiter/pull/9/files\n"
        "Depends-On: vllm-project/vllm#47269\n"
    )
    assert parse_dependency_refs(body) == [
        DepRef(V, 47269),
        DepRef(V, 47270),
        DepRef(V, 47271),
        DepRef(V, 47272),
        DepRef("ROCm/aiter", 9),
    ]


def test_refs_ignore_quotes_code_and_drop_lines() -> None:
    body = (
        "> Depends-On: vllm-project/vllm#1\n"
        "```\nDepends-On: vllm-project/vllm#2\n```\n"
        "~~~md\nrequires vllm-project/vllm#3\n~~~\n"
        "Use `Depends-On: vllm-project/vllm#4` to declare one.\n"
        "/depends-on drop vllm-project/vllm#5\n"
        "/depends-on vllm-project/vllm#6 #7\n"
    )
    assert parse_dependency_refs(body) == [DepRef(V, 6)]
    assert parse_dependency_refs(body, default_repo=V) == [DepRef(V, 6), DepRef(V, 7)]


def test_single_refs_and_lists() -> None:
    assert DepRef.parse("https://github.com/vllm-project/vllm/pull/47269") == DepRef(V, 47269)
    assert str(DepRef.parse("#12", default_repo=V)) == f"{V}#12"
    with pytest.raises(ValueError, match="owner/repo#N"):
        DepRef.parse("vllm 47269")
    assert parse_refs_list(f"{V}#1   {V}#2") == [DepRef(V, 1), DepRef(V, 2)]
    assert parse_config_keys("Config-Keys: a-b, `c`\n> Config-Key: d\n") == ["a-b", "c"]


@pytest.mark.parametrize("n", [1, 2, 3, 7, 14, 100, 1000])
def test_search_is_logarithmic_and_finds_newest_and_first(n: int) -> None:
    for boundary in {0, n // 3, n - 1, n}:  # n: nothing contains
        calls: list[int] = []

        def contains(i: int, b: int = boundary, calls: list[int] = calls) -> bool:
            calls.append(i)
            return i >= b

        found = search_containing(n, contains)
        assert found.probes == len(calls) <= 1 + math.ceil(math.log2(n)) if n > 1 else len(calls) == 1
        if boundary >= n:
            assert (found.newest, found.first) == (None, None) and len(calls) == 1
        else:
            assert (found.newest, found.first) == (n - 1, boundary)


def test_search_empty() -> None:
    assert search_containing(0, lambda i: True).probes == 0


def _d(ref: str, state: str, sha: str | None = None) -> DepView:
    return DepView(ref, state, sha)


# A watch on "img", pinned at img:old, no nightly chosen, never bumped: each row changes some of it.
decide = partial(
    decide_readiness,
    key="k",
    image_repo="img",
    chosen_tag=None,
    pinned_image="img:old",
    pinned_contains=False,
    bumped_image=None,
)


@pytest.mark.parametrize(
    ("deps", "over", "action", "words"),
    [
        ([], {}, "noop", "no upstream"),
        ([_d("a#1", "merged", "m1"), _d("a#2", "closed")], {}, "blocked", "/depends-on drop a#2"),
        ([_d("a#1", "open")], {}, "wait", "waiting for a#1 to merge"),
        ([_d("a#1", "unknown")], {}, "wait", "waiting for a#1"),
        ([_d("a#1", "merged")], {}, "wait", "merge commit"),
        ([_d("a#1", "merged", "m1")], {"image_repo": None}, "blocked", "no image pin"),
        ([_d("a#1", "merged", "m1")], {"pinned_contains": True}, "noop", "already contains"),
        ([_d("a#1", "merged", "m1")], {}, "wait", "no nightly"),
        ([_d("a#1", "merged", "m1")], {"chosen_tag": "old"}, "noop", "already img:old"),
        ([_d("a#1", "merged", "m1")], {"chosen_tag": "new"}, "bump", "contained in img:new"),
        ([_d("a#1", "merged", "m1")], {"chosen_tag": "new", "bumped_image": "img:x"}, "noop", "once"),
    ],
)
def test_readiness_paths(deps: list[DepView], over: dict[str, Any], action: str, words: str) -> None:
    got = decide(deps=deps, **over)
    assert got.action == action and words in got.reason
    assert (got.image == "img:new") == (action == "bump")


def test_status_text_is_deterministic_and_complete() -> None:
    view = WatchView(
        key="k",
        deps=[_d(f"{V}#47269", "merged", "62fa9935eae"), _d(f"{V}#47270", "closed")],
        image_repo="img",
        pinned_image="img:nightly-old",
        pinned_missing=True,
        chosen_tag="nightly-x",
        first_tag="nightly-w",
        decision=decide(deps=[_d("a", "closed")]),
        dropped=(f"{V}#1",),
    )
    body = render_status([view])
    assert body == render_status([view])
    assert "<!-- sweepbot:status -->" in body
    assert "merged at `62fa993`, contained in nightly `nightly-x`" in body
    assert f"`/depends-on drop {V}#47270`" in body
    assert "can no longer be pulled" in body and "first nightly containing them all: `nightly-w`" in body
