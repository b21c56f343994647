"""The real e2e-tests.yml's `eval /` job, as GitHub runs it: get-jobs writes `eval-config=$EVALS`
and never assigns EVALS, so `test-sweep-evals` is not skipped (`'' != '[]'`) and its matrix,
`fromJson('')`, cannot evaluate. GitHub fails the job unexpanded (sim/getjobs.py has the sources).
"""

from __future__ import annotations

import httpx
from github import Github

from sim.getjobs import assign_evals, matrix_failures
from sim.scenario import SeedScenario
from sim.server import SimServer
from tests.helpers.wait import wait_for
from tests.recipe_helpers import fixture_text
from tests.sim.conftest import TEST_CONFIG

BENCH = "SemiAnalysisAI/InferenceX"
KEY = "minimaxm3-fp4-mi355x-vllm"
PATH = ".github/workflows/e2e-tests.yml"
BRANCH = "minimaxm3-fp4-mi355x-vllm-int4-qr"


def _real() -> str:
    return fixture_text("workflows/e2e-tests.yml")


def test_the_real_file_fails_only_its_eval_job_where_the_matrix_expression_is() -> None:
    text = _real()
    [failure] = matrix_failures(text, PATH)
    line = next(n for n, row in enumerate(text.splitlines(), 1) if "outputs.eval-config) }}" in row)
    col = text.splitlines()[line - 1].index("${{") + 1
    at = f"{PATH} (Line: {line}, Col: {col})"
    assert (failure.job_id, failure.caller) == ("test-sweep-evals", "eval /")
    assert failure.message == (
        f"Error when evaluating 'strategy' for job 'test-sweep-evals'. {at}: Error parsing fromJson,"
        f"{at}: Error reading JToken from JsonReader. Path '', line 0, position 0.,{at}: Unexpected value ''"
    )
    assert (line, col) == (636, 25)


def test_the_failure_is_read_from_the_file_not_assumed() -> None:
    text = _real()
    assert matrix_failures(assign_evals(text), PATH) == ()  # a get-jobs that assigns EVALS: none
    # another output left unassigned fails its own job
    no_multi = "\n".join(r for r in text.splitlines() if "MULTI_EVAL=$(" not in r)
    assert [f.caller for f in matrix_failures(no_multi, PATH)] == ["multi-node eval /", "eval /"]
    # a job whose `if:` would skip an empty output is skipped, not failed
    guarded = text.replace(
        "needs.get-jobs.outputs.eval-config != '[]'", "needs.get-jobs.outputs.eval-config != ''"
    )
    assert matrix_failures(guarded, PATH) == ()
    # a step env that sets the variable counts as an assignment
    env = text.replace(
        "EVALS_ONLY: ${{ inputs.evals-only }}",
        "EVALS_ONLY: ${{ inputs.evals-only }}\n                  EVALS: '[]'",
    )
    assert matrix_failures(env, PATH) == ()


def _dispatch(seeded: SimServer, gh: Github, cmd: str) -> int:
    run = (
        gh.get_repo(BENCH)
        .get_workflow("e2e-tests.yml")
        .create_dispatch(
            BRANCH,
            {"generate-cli-command": cmd, "test-name": "sweepbot-9"},
            throw=True,
            return_run_details=True,
        )
    )
    wait_for(lambda: seeded.world.runs[run.id].status == "completed", what="the run")
    return int(run.id)


def _get(seeded: SimServer, path: str) -> object:
    r = httpx.get(f"{seeded.github_api_url}{path}", headers={"Authorization": "token sim-token"})
    assert r.status_code == 200, r.text
    return r.json()


def test_the_eval_job_fails_unexpanded_as_github_reports_it(seeded: SimServer, gh: Github) -> None:
    run_id = _dispatch(seeded, gh, f"{TEST_CONFIG} {KEY} --conc 32 64")
    run = _get(seeded, f"/repos/{BENCH}/actions/runs/{run_id}")
    assert isinstance(run, dict) and (run["status"], run["conclusion"]) == ("completed", "failure")
    listed = _get(seeded, f"/repos/{BENCH}/actions/runs/{run_id}/jobs")
    assert isinstance(listed, dict)
    jobs = {j["name"]: j for j in listed["jobs"]}
    assert sorted(jobs) == [
        "eval /",
        "get-jobs",
        "single-node / p50 | minimaxm3 fp4 mi355x vllm TP4    c32",
        "single-node / p50 | minimaxm3 fp4 mi355x vllm TP4    c64",  # conc 64's throughput still runs
    ]
    failed = jobs["eval /"]
    assert (failed["status"], failed["conclusion"], failed["steps"], failed["labels"]) == (
        "completed",
        "failure",
        [],
        [],
    )
    assert failed["runner_name"] is None and failed["runner_id"] is None
    assert failed["started_at"] == failed["completed_at"]
    notes = _get(seeded, f"/repos/{BENCH}/check-runs/{failed['id']}/annotations")
    assert isinstance(notes, list) and len(notes) == 1
    assert notes[0]["annotation_level"] == "failure"
    assert notes[0]["message"].startswith("Error when evaluating 'strategy' for job 'test-sweep-evals'. ")
    assert notes[0]["message"].endswith("Unexpected value ''")
    arts = _get(seeded, f"/repos/{BENCH}/actions/runs/{run_id}/artifacts")
    assert isinstance(arts, dict) and not [a for a in arts["artifacts"] if a["name"].startswith("eval_")]


def test_a_dispatch_without_evals_fails_the_same_way(seeded: SimServer, gh: Github) -> None:
    # eval-config is '' whatever the rows: even a --no-evals run has the failed `eval /` job
    run_id = _dispatch(seeded, gh, f"{TEST_CONFIG} {KEY} --conc 32 --no-evals")
    names = [seeded.world.jobs[j].name for j in seeded.world.runs[run_id].jobs]
    assert names == ["get-jobs", "single-node / p50 | minimaxm3 fp4 mi355x vllm TP4    c32", "eval /"]
    assert seeded.world.runs[run_id].conclusion == "failure"


def test_a_fixed_workflow_runs_its_eval_jobs(sim: SimServer, gh: Github) -> None:
    SeedScenario(sim.world, evals_assigned=True).load()
    run_id = _dispatch(sim, gh, f"{TEST_CONFIG} {KEY} --conc 32 64")
    run = sim.world.runs[run_id]
    names = [sim.world.jobs[j].name for j in run.jobs]
    assert names[-1] == "eval / p50 | minimaxm3 fp4 mi355x vllm TP4    c64 | eval-only"
    assert "eval /" not in names and run.conclusion == "success"
    assert any(a.name.startswith("eval_minimaxm3_8k1k_") for a in sim.world.artifacts.values())
