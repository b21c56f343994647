"""What a dispatch's run holds (app.core.dispatchjobs), against the repo's real master configs.

The oracle is the sim's e2e-tests.yml (``sim.runs.e2e_jobs``: the file's get-jobs and job families,
run on the rows the generator emits for the dispatched command).
"""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace
from typing import Any

import pytest

from app.core.dispatchjobs import matrix_jobs, plan_dispatch_jobs, with_dispatch_marks
from app.core.recipes import expand_points, parse_master, plannable_keys
from app.core.recipes.errors import RecipeError
from app.core.recipes.evals import EvalMode, plan_with_evals
from app.core.recipes.runners import hardware_table
from app.core.runmatch import JobName, job_matches_point, parse_job_name, point_job_name
from app.core.sweepspec import (
    dispatch_eval_flags,
    group_key,
    point_conc,
    point_seq,
    render_dispatch,
    row_concs,
)
from app.core.unexpanded_workflow import unexpanded_callers
from app.settings import Settings
from sim.getjobs import assign_evals, matrix_failures
from sim.matrix_evals import EvalMode as SimMode
from sim.runs import e2e_jobs, job_name, point_dict
from tests.recipe_helpers import SEED_KEY, fixture_text
from tests.test_bot_vs_sim import key_agrees, same_point

MASTERS = ("amd-master.head.yaml", "amd-master.f8f9b66.yaml", "nvidia-master.tail.head.yaml")
PATH = "configs/master.yaml"
FIELDS = ("conc",)
E2E = fixture_text("workflows/e2e-tests.yml")
SIM_UNEXPANDED = {f.caller for f in matrix_failures(E2E, ".github/workflows/e2e-tests.yml")}
BOT_UNEXPANDED = unexpanded_callers(E2E)  # the file is the same for every dispatch: read once
SIM_MODE = {
    EvalMode.DEFAULT: SimMode.DEFAULT,
    EvalMode.NONE: SimMode.NONE,
    EvalMode.ONLY: SimMode.ONLY,
    EvalMode.ALL: SimMode.ALL,
}
SETTINGS = Settings()  # the default dispatch template (made once: building one reads the environment)


class _Files:
    def __init__(self, text: str) -> None:
        self.text = text

    def read_file(self, repo: str, path: str, sha: str) -> bytes | None:
        if path == "configs/runners.yaml":  # the DRAM budgets of agentic offload rows
            return fixture_text("runners.yaml").encode()
        return self.text.encode() if path == PATH else None


def _command(key: str, group: list[dict[str, Any]], mode: EvalMode) -> dict[str, str]:
    point = group[0]
    lists = row_concs(group)
    _, _, inputs = render_dispatch(
        SETTINGS,
        key=key,
        seq=point_seq(point),
        conc=int(point["conc"]) if not lists else max(lists),
        concs=lists,
        tp=1,
        head_sha="0" * 40,
        head_ref="main",
        base_ref="main",
        run_name="sweepbot-1-1",
        pr=1,
        config_file=PATH,
        evals=dispatch_eval_flags(group, mode.value),
    )
    return inputs


def _keys() -> list[tuple[str, str]]:
    out = []
    for fixture in MASTERS:
        master = parse_master(fixture_text(fixture))
        for key in plannable_keys(master):
            try:
                expand_points(master, key)
            except RecipeError:
                continue
            out.append((fixture, key))
    return out


KEYS = _keys()


def test_the_keys_cover_every_kind() -> None:
    kinds = set()
    for fixture, key in KEYS:
        rows = [p.to_json() for p in expand_points(parse_master(fixture_text(fixture)), key)]
        kinds |= {("prefill" in r, r.get("scenario-type") == "agentic-coding") for r in rows}
    assert len(KEYS) > 40 and kinds == {(False, False), (True, False), (False, True), (True, True)}


# runners.yaml's `hardware:`, which the generator sizes a DRAM-offload row's `total-cpu-dram-gb`
# with (the sim reads the same file, `_Files`); the bot plans a sweep with it (app.flows.sweeps.request)
HARDWARE = hardware_table(fixture_text("runners.yaml"))


@pytest.mark.parametrize(("fixture", "key"), KEYS)
def test_slots_are_the_jobs_e2e_tests_runs_for_each_dispatch(fixture: str, key: str) -> None:
    """Every filter a sweep may have (none, each tp, each seq-len) under every eval mode the bot
    plans as the repo's generator does (the others: issue 28, tests/test_bot_vs_sim.py)."""
    text = fixture_text(fixture)
    modes = [m for m in EvalMode if key_agrees(text, key, SIM_MODE[m])]
    if not modes:
        pytest.xfail(
            "issue 28: the bot plans this key otherwise than the generator (tests/test_bot_vs_sim.py)"
        )
    master = parse_master(text)
    tps = sorted({int(p["tp"]) for p in (q.to_json() for q in expand_points(master, key)) if "tp" in p})
    every: list[dict[str, Any]] = [{}, *({"tp": t} for t in tps), {"seq": "8k1k"}, {"seq": "1k1k"}]
    for filters in every:
        for mode in modes:  # the eval modes the bot plans as the generator does
            try:
                planned = plan_with_evals(master, key, mode=mode, hardware=HARDWARE, **filters)
            except RecipeError:
                continue  # the filters match nothing of this key
            _check(text, master, key, planned, mode)


def _check(
    text: str, master: dict[str, Any], key: str, planned: list[dict[str, Any]], mode: EvalMode
) -> None:
    got = plan_dispatch_jobs(master, key, planned, FIELDS, mode.value, hardware=HARDWARE)
    groups: dict[str, list[dict[str, Any]]] = {}
    for point in planned:
        groups.setdefault(group_key(point, FIELDS), []).append(point)
    as_is = plan_dispatch_jobs(master, key, planned, FIELDS, mode.value, BOT_UNEXPANDED, HARDWARE)
    for gk, group in groups.items():
        run = SimpleNamespace(repo="o/r", head_sha="0" * 40, inputs=_command(key, group, mode))
        # the real file at 843c6254: GitHub never expands `eval /` (sim.getjobs reads why)
        broken = e2e_jobs(_Files(text), run, SIM_UNEXPANDED)  # type: ignore[arg-type]
        assert as_is.slots[gk] == len(broken), (gk, mode)
        real = e2e_jobs(_Files(text), run)  # type: ignore[arg-type]  # a fixed file: every family runs
        assert got.slots[gk] == len(real), (gk, mode)
        by_conc: dict[int, list[tuple[JobName, dict[str, Any]]]] = {}
        for name, r in real:
            parsed = parse_job_name(name)
            assert parsed is not None, name
            by_conc.setdefault(parsed.conc, []).append((parsed, r))
        for point in group:
            # the run's jobs the tracker cannot tell from this point's by name, in matrix order
            own = bool(point.get("eval-only"))
            near = by_conc.get(point_conc(point), [])
            same = [r for n, r in near if job_matches_point(n, point, eval_job=own)]
            rank = got.ranks.get(point["result-name"])
            if any(same_point(r, point) for r in same):
                assert rank is not None and rank.twins == len(same)
                assert same_point(same[rank.rank], point)
            else:  # an agentic point with an eval runs as its eval job alone: no throughput job
                assert rank is None and point.get("scenario-type") == "agentic-coding"


def test_a_filtered_sweeps_dispatch_counts_the_evals_the_generator_marks_on_its_slice() -> None:
    """dsr1-fp4-mi355x-sglang (amd-master at 843c6254), tp=4: the key's 8k1k evals are at 32 and 64
    (16 and up, grouped across TPs); the run at conc 32 evaluates every TP at 32, tp 8 included,
    the run at conc 16 (no planned eval: `--no-evals`) none."""
    master = parse_master(fixture_text("amd-master.head.yaml"))
    planned = plan_with_evals(master, "dsr1-fp4-mi355x-sglang", tp=4)
    assert [p["conc"] for p in planned if p["run-eval"]] == [32, 64]
    got = plan_dispatch_jobs(master, "dsr1-fp4-mi355x-sglang", planned, FIELDS)
    at = {c: [p for p in expand_points(master, "dsr1-fp4-mi355x-sglang") if p.conc == c] for c in (16, 32)}
    assert {p.tp for p in at[32] if p.isl == 8192} == {4, 8}
    assert got.slots["conc=32"] == len(at[32]) + len([p for p in at[32] if p.isl == 8192])
    assert got.slots["conc=16"] == len(at[16])


def test_a_dispatch_tracks_the_picks_its_own_command_gets() -> None:
    """f8f9b66's seed key: dp-attn false evaluates 128 and 512, dp-attn true 256 and 512. The
    dispatch at conc 256 is `test-config --conc 256` with default evals, which marks every 8k1k row
    at 256: the dp-attn false tp8/ep8 point at 256 is tracked with its eval too."""
    master = parse_master(fixture_text("amd-master.f8f9b66.yaml"))
    planned = plan_with_evals(master, SEED_KEY, seq="8k1k")
    at256 = [(p["ep"], p["dp-attn"]) for p in planned if p["conc"] == 256 and p["run-eval"]]
    assert at256 == [(8, True)]
    jobs = plan_dispatch_jobs(master, SEED_KEY, planned, FIELDS)
    tracked = with_dispatch_marks(planned, jobs)
    assert [(p["ep"], p["dp-attn"]) for p in tracked if p["conc"] == 256 and p["run-eval"]] == [
        (8, False),
        (8, True),
    ]
    # a conc no group picks is dispatched with --no-evals: nothing evaluated there
    assert not any(p["run-eval"] for p in tracked if p["conc"] == 64)
    assert [p["result-name"] for p in tracked] == [p["result-name"] for p in planned]


def _row(isl: int, tp: int, conc: int, **marks: Any) -> dict[str, Any]:
    return {"isl": isl, "osl": 1024, "tp": tp, "conc": conc, **marks}


def test_the_workflow_families() -> None:
    rows = [
        _row(1024, 4, 16),
        _row(8192, 4, 16, **{"run-eval": True}),  # throughput and its `eval /` job
        _row(8192, 8, 16, **{"run-eval": True, "eval-only": True}),  # the eval job alone
        {"scenario-type": "agentic-coding", "tp": 4, "conc": 8, "run-eval": True},  # `agentic eval /`
        {"scenario-type": "agentic-coding", "tp": 4, "conc": 4},  # `agentic /`
    ]
    jobs = matrix_jobs(rows)
    assert [(rows.index(dict(j.row)), j.eval_job) for j in jobs] == [
        (4, False),
        (3, True),
        (0, False),
        (1, False),
        (1, True),
        (2, True),
    ]


@pytest.mark.parametrize("fixture", MASTERS)
def test_a_rows_job_name_is_the_one_the_templates_give_it(fixture: str) -> None:
    master = parse_master(fixture_text(fixture))
    for key in master:
        try:
            rows = [point_dict(p) for p in expand_points(master, key)]
        except RecipeError:
            continue
        for row in rows:
            for eval_job in (False, True):
                marks = {"run-eval": eval_job, "eval-only": eval_job}
                parsed = parse_job_name(job_name("single-node /", row | marks))
                assert parsed is not None
                assert dataclasses.replace(parsed, caller="", priority=0) == point_job_name(
                    row, eval_job=eval_job
                )


def test_the_callers_github_never_expands_are_read_from_the_file() -> None:
    """The real e2e-tests.yml (843c6254) never assigns EVALS: `eval /` alone; the sim, which reads
    the file its own way (sim.getjobs), agrees, and a file that assigns it expands everything."""
    assert unexpanded_callers(E2E) == {"eval /"} == SIM_UNEXPANDED
    assert unexpanded_callers(assign_evals(E2E)) == frozenset()
    guarded = E2E.replace(
        "if: ${{ needs.get-jobs.outputs.eval-config != '[]' }}",
        "if: ${{ needs.get-jobs.outputs.eval-config != '' }}",
    )
    assert guarded != E2E and unexpanded_callers(guarded) == frozenset()  # skipped, not failed
    assert unexpanded_callers("not: [a workflow") == frozenset()
