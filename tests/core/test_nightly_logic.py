"""The nightly watch's pure decisions: what to measure, bisection, recovery, the issue text."""

from __future__ import annotations

from typing import Any

from app.core.nightly_watch import (
    Finding,
    IssueView,
    Nightly,
    issue_marker,
    issue_title,
    merged_pulls,
    narrow_step,
    plan_new_nightlies,
    pulls_in,
    recovered_at,
    refresh_findings,
    render_issue,
    within,
)


def test_new_nightlies_measure_the_newest_and_keep_the_rest_for_bisection() -> None:
    first = plan_new_nightlies(set(), ["n1", "n2", "n3"], first_run=True)
    assert first.measure == ["n3"] and first.skip == ["n1", "n2"] and "first run" in first.reason
    burst = plan_new_nightlies({"n1", "n2", "n3"}, ["n2", "n3", "n4", "n5", "n6"], first_run=False)
    assert burst.measure == ["n6"] and burst.skip == ["n4", "n5"]
    assert plan_new_nightlies({"n1"}, ["n1"], first_run=False).measure == []


def _line(
    n: int, measured: set[int], gone: frozenset[int] = frozenset(), planned: frozenset[int] = frozenset()
):
    return [Nightly(f"n{i}", None, i in measured, i not in gone, i in planned) for i in range(n)]


def test_bisection_halves_the_retained_unmeasured_nightlies_and_stops_when_adjacent() -> None:
    line = _line(12, {0, 1, 2, 3, 10, 11})
    step = narrow_step(line, "n3", "n10", runs_left=4)
    assert not step.done and step.measure == "n7"  # the middle of n4..n9
    assert narrow_step(_line(12, {0, 3, 7, 10}), "n3", "n7", runs_left=3).measure == "n5"
    done = narrow_step(_line(12, {3, 4}), "n3", "n4", runs_left=3)
    assert done.done and done.measure is None and "adjacent" in done.reason
    # the nightlies between were deleted by the registry: the bracket is as narrow as it gets
    gone = narrow_step(_line(12, {3, 10}, gone=frozenset(range(4, 10))), "n3", "n10", runs_left=3)
    assert gone.done and "no longer in the registry" in gone.reason
    # a bisection canary in flight: wait for it
    wait = narrow_step(_line(12, {3, 10}, planned=frozenset({6})), "n3", "n10", runs_left=3)
    assert not wait.done and wait.measure is None and "waiting" in wait.reason
    # the budget of bisection runs is spent
    spent = narrow_step(_line(12, {3, 10}), "n3", "n10", runs_left=0)
    assert spent.done and "budget" in spent.reason


def test_within_compares_brackets_by_nightly_order() -> None:
    line = _line(10, set())
    assert within(line, ("n2", "n8"), ("n4", "n5"))
    assert not within(line, ("n4", "n5"), ("n2", "n8"))
    assert within(line, ("n2", "n8"), ("n2", "n8"))


def test_recovery_needs_a_final_run_back_at_the_old_level() -> None:
    pts = [(f"n{i}", v) for i, v in enumerate([10, 10, 10, 11, 11, 11, 10.1, 10.0, 9.9])]
    assert recovered_at(pts, "n3", 10.0, 11.0, min_run=3) == "n6"
    assert recovered_at(pts[:8], "n3", 10.0, 11.0, min_run=3) is None  # only two back so far
    flaky = [*pts, ("n9", 11.0)]
    assert recovered_at(flaky, "n3", 10.0, 11.0, min_run=3) is None


def test_pulls_are_read_from_squash_titles_and_merge_commits() -> None:
    commits = [
        {"sha": "a", "title": "[Perf] Faster attention (#50123)"},
        {"sha": "b", "title": "Merge pull request #47269 from rocm-dev/int4"},
        {"sha": "c", "title": "[CI] no PR here"},
        {"sha": "d", "title": "[Perf] Faster attention (#50123)"},
    ]
    assert pulls_in(commits) == [50123, 47269]


def sample_view(**over: Any) -> IssueView:
    """A regression issue's view (config key `k`, one TPOT finding, one commit in the range)."""
    view = IssueView(
        repo="o/bench",
        config_key="k",
        image_repo="vllm/vllm-openai-rocm",
        last_good_tag="nightly-" + "1" * 40,
        first_bad_tag="nightly-" + "2" * 40,
        findings=[
            {
                "result_name": "k_conc64",
                "metric": "mean_tpot_ms",
                "before": 25.0,
                "after": 26.0,
                "change": 0.04,
                "p": 0.003,
            }
        ],
        chart_points=[("nightly-" + "1" * 40, 25.0), ("nightly-" + "2" * 40, 26.0)],
        chart_metric="mean_tpot_ms",
        chart_point="k_conc64",
        narrowing="bisection over 5 retained nightlies",
        source_repo="vllm-project/vllm",
        compare_url="https://github.com/vllm-project/vllm/compare/a...b",
        commits=[{"sha": "c" * 40, "title": "@everyone <img src=x> [link](http://evil) (#9)"}],
        pulls=[9],
    )
    return IssueView(**{**view.__dict__, **over})


def test_the_issue_carries_its_marker_the_range_and_inert_commit_titles() -> None:
    view = sample_view()
    body = render_issue(view)
    assert body.startswith(issue_marker("o/bench", "k", "nightly-" + "2" * 40))
    assert "first bad nightly: `nightly-" + "2" * 40 in body
    assert "vllm-project/vllm#9" in body and "xychart-beta" in body and "+4.0%" in body
    assert "@\u200beveryone" in body and "<img" not in body and "\\[link\\]" in body
    assert "TPOT +4.0%" in issue_title(view)
    closed = render_issue(IssueView(**{**view.__dict__, "recovered_tag": "nightly-" + "3" * 40}))
    assert "**Recovered**" in closed


def test_merged_pulls_come_from_the_associated_pulls_answer_and_titles_only_for_the_rest() -> None:
    commits = [
        {"sha": "a1", "title": "[Perf] Rework the MoE kernel launch"},  # a PR branch commit: no number
        {"sha": "a2", "title": "Merge pull request #50123 from vllm-dev/story/pr-50123"},
        {"sha": "a3", "title": "Refer to #777 in passing (#42)"},  # looked up: the title is not believed
        {"sha": "a4", "title": "[CI] Flaky test fix (#50150)"},  # not looked up: the title names it
    ]
    associated: dict[str, list[dict[str, Any]]] = {
        "a1": [{"number": 50123, "merged_at": "2026-11-02T10:00:00Z"}],
        "a2": [{"number": 50123, "merged_at": "2026-11-02T10:00:00Z"}],
        "a3": [{"number": 50131, "merged_at": "2026-11-02T11:00:00Z"}, {"number": 9, "merged_at": None}],
    }
    assert merged_pulls(commits, associated) == [50123, 50131, 50150]
    assert merged_pulls(commits, {}) == [50123, 42, 50150]  # nothing looked up: titles only


def _finding(name: str, metric: str, good: str, bad: str, before: float, after: float, p: float) -> Finding:
    return Finding(name, metric, good, bad, before, after, (after - before) / before, p)


def test_an_open_regression_keeps_its_bracket_and_lists_every_series_as_measured_now() -> None:
    tags = [f"n{i}" for i in range(12)]
    tpot = [10.0, 10.1, 9.9, 10.0, 10.6, 10.5, 10.7, 10.6, 10.5, 10.6, 10.7, 10.6]
    ttft = [50.0, 50.5, 49.5, 50.0, 50.2, 53.0, 53.5, 53.0, 52.8, 53.1, 53.0, 53.2]
    series = {
        ("p", "mean_tpot_ms"): list(zip(tags, tpot, strict=True)),
        ("p", "mean_ttft_ms"): list(zip(tags, ttft, strict=True)),
    }
    listed = [_finding("p", "mean_tpot_ms", "n3", "n4", 10.0, 10.6, 0.003).to_json()]
    # This pass the detector puts TPOT's change one nightly later (noise) and finds TTFT moving:
    # both are listed at the regression's own bracket n3 -> n4, with the newest p of each.
    found = [
        _finding("p", "mean_tpot_ms", "n4", "n5", 10.3, 10.6, 0.002),
        _finding("p", "mean_ttft_ms", "n4", "n5", 50.0, 53.0, 0.001),
    ]
    out = refresh_findings(series, "n3", "n4", listed, found)
    assert [(f["metric"], f["last_good"], f["first_bad"]) for f in out] == [
        ("mean_tpot_ms", "n3", "n4"),
        ("mean_ttft_ms", "n3", "n4"),
    ]
    assert out[0]["before"] == 10.0 and out[0]["after"] == 10.6 and out[0]["p"] == 0.002
    assert out[1]["before"] == 50.0 and out[1]["p"] == 0.001
    # the same measurements again: the same list, so the issue is not edited
    assert refresh_findings(series, "n3", "n4", out, found) == out
    # a series the detector no longer reports stays listed (re-measured, with its last p)
    assert refresh_findings(series, "n3", "n4", out, [])[1]["p"] == 0.001


def test_a_refreshed_series_stops_its_after_level_where_it_recovered() -> None:
    tags = [f"n{i}" for i in range(12)]
    values = [10.0, 10.0, 10.0, 10.0, 11.0, 11.0, 11.0, 11.0, 10.0, 10.0, 10.0, 10.0]
    series = {("p", "mean_tpot_ms"): list(zip(tags, values, strict=True))}
    listed = [_finding("p", "mean_tpot_ms", "n3", "n4", 10.0, 11.0, 0.001).to_json()]
    out = refresh_findings(series, "n3", "n4", listed, [])
    assert out[0]["after"] == 11.0 and out[0]["change"] == 0.1
    # the bracket is not in the series any more (the recipe changed): the entry stays as it was
    assert refresh_findings({}, "n3", "n4", listed, []) == listed


def test_the_issue_says_when_the_commit_range_was_truncated() -> None:
    view = IssueView(
        repo="o/bench",
        config_key="k",
        image_repo="vllm/vllm-openai",
        last_good_tag="n1",
        first_bad_tag="n2",
        findings=[],
        chart_points=[],
        chart_metric="mean_tpot_ms",
        chart_point="p",
        narrowing="adjacent",
        source_repo="vllm-project/vllm",
        commits=[{"sha": f"{i:040x}", "title": f"c{i}"} for i in range(60)],
        commits_total=1400,
    )
    body = render_issue(view)
    assert "... and 10 more" in body
    assert "**truncated**: the range has 1400 commits and sweepbot read the first 60" in body
    assert "truncated" not in render_issue(
        IssueView(**{**view.__dict__, "commits_total": 60})  # the whole range was read
    )
